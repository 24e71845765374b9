// Ragged paged attention test cases: one description drives the GoogleTest matrix (kernel
// vs the float64 reference) and the benchmarks (which only need the materialized buffers).
//
// A case names the shapes, dtypes, ragged sequence lengths and options; MakeProblem turns
// it into deterministic buffers laid out exactly as contract §1 says, with every cache
// slot that no result may depend on (slots at or past kv_len, unused pages, the positions
// this step writes) filled with NaN, so any leak shows up as a non-finite output.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/ragged_paged_attention.h"
#include "numerics/dtype.h"
#include "numerics/tensor_view.h"
#include "tests/kernels/reference_attention.h"

namespace rpa::testing {

struct SeqShape {
  int32_t q_len;
  int32_t kv_len;  // after this step, new tokens included
};

enum class Fill : uint8_t {
  kUniform01,  // uniform [0, 1) * magnitude, as upstream's tests (nearly flat softmax)
  kSigned,     // uniform [-1, 1) * magnitude: peaked softmax, cancellation in the sums
};

struct RpaCase {
  std::string name;  // [A-Za-z0-9_], unique within its suite: the gtest parameter name
  DType q_dtype = DType::kBFloat16;
  DType kv_dtype = DType::kBFloat16;
  int num_q_heads = 32;
  int num_kv_heads = 8;
  int head_dim = 128;
  int page_size = 16;
  // Sequences in bucket order: the first num_decode are the decode bucket (q_len 1), the
  // next num_prefill the prefill bucket, the rest the mixed bucket.
  std::vector<SeqShape> seqs;
  int num_decode = 0;
  int num_prefill = 0;

  // Slack beyond what the sequences need.
  int extra_seqs = 0;           // max_num_seqs - num_seqs (metadata rows never read)
  int extra_pages_per_seq = 0;  // block-table columns never read
  int extra_tokens = 0;         // padding rows past cu_q_lens[d2]
  bool shuffle_pages = false;   // random permutation of physical pages instead of 0, 1, ...
  // Unused block-table entries hold out-of-range garbage instead of a NaN-filled page.
  bool garbage_page_entries = false;

  std::optional<float> sm_scale;  // unset: 1 / sqrt(head_dim), as upstream's tests
  std::optional<int32_t> sliding_window;
  std::optional<float> soft_cap;
  std::optional<float> sinks_magnitude;  // sinks[n] = uniform [0, 1) * this (signed fill: [-1, 1))
  std::optional<float> q_scale;
  std::optional<float> k_scale;
  std::optional<float> v_scale;
  bool use_causal_mask = true;
  bool update_kv_cache = true;
  int num_threads = 0;

  Fill fill = Fill::kUniform01;
  float q_magnitude = 1.0f;
  float kv_magnitude = 1.0f;
  uint64_t seed = 1;
};

// gtest prints a parameter by its name.
inline void PrintTo(const RpaCase& c, std::ostream* os) { *os << c.name; }

// The buffers of one case, row-major, owned here; the views point into them.
struct RpaProblem {
  RpaCase spec;
  int64_t num_tokens = 0;  // T
  int64_t max_num_seqs = 0;
  int64_t pages_per_seq = 0;
  int64_t num_pages = 0;
  std::vector<uint8_t> queries;   // [T, Hq, D] q_dtype
  std::vector<uint8_t> keys;      // [T, Hkv, D] kv_dtype
  std::vector<uint8_t> values;    // [T, Hkv, D] kv_dtype
  std::vector<uint8_t> kv_cache;  // [NP, PS, 2*Hkv, D] kv_dtype
  std::vector<float> sinks;       // [Hq] when spec.sinks_magnitude
  std::vector<int32_t> kv_lens, page_indices, cu_q_lens, distribution;

  TensorView queries_view();
  TensorView keys_view();
  TensorView values_view();
  TensorView kv_cache_view();
  AttentionMetadata metadata() const;
  AttentionOptions options();  // sinks view points into this->sinks
  int64_t num_scheduled_tokens() const { return cu_q_lens[distribution[2]]; }
};

RpaProblem MakeProblem(const RpaCase& spec);

// Overwrites the new K/V rows with fresh data drawn from `seed` (KV-share tests).
void RefillNewKv(RpaProblem& problem, uint64_t seed);

// An output buffer with canary bytes on both sides, to catch out-of-bounds writes.
class GuardedOutput {
 public:
  GuardedOutput(DType dtype, int64_t num_tokens, int64_t num_heads, int64_t head_dim);
  TensorView view();
  const void* data() const { return bytes_.data() + kGuardBytes; }
  bool CanariesIntact() const;

 private:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint8_t kCanary = 0xA5;
  DType dtype_;
  int64_t shape_[3];
  std::vector<uint8_t> bytes_;
};

// The largest |kernel - reference| the contract's f32 pipeline allows for output element
// (token, head, d); the derivation is in rpa_cases.cc.
double AttentionErrorBound(const RpaProblem& problem, const ReferenceResult& ref, int64_t token,
                           int64_t head, int64_t d);

struct OutputCheck {
  int64_t num_checked = 0;
  int64_t num_bad = 0;        // elements over the bound, or not finite
  double worst_ratio = 0;     // max |out - ref| / bound
  double worst_upstream = 0;  // max |out - ref| / (1 + |ref|): upstream's metric (tol 0.2)
  std::string first_bad;      // description of the first bad element
};

// Compares the scheduled rows of `output` ([T, Hq, D], q_dtype, contiguous) with `ref`.
OutputCheck CheckOutput(const RpaProblem& problem, const ReferenceResult& ref, const void* output);

// Runs the reference on the problem's current buffers (which it does not modify).
ReferenceResult RunReference(RpaProblem& problem);

// ---- Case lists ----
// Contract §6, upstream's matrix.
std::vector<RpaCase> BasicCases();
std::vector<RpaCase> QuantizedKvCases();
std::vector<RpaCase> QuantizedAttentionCases();
std::vector<RpaCase> DecodeOnlyCases();
std::vector<RpaCase> PrefillOnlyCases();
std::vector<RpaCase> MixedCases();
std::vector<RpaCase> ComplexCases();
std::vector<RpaCase> SlidingWindowCases();
std::vector<RpaCase> SoftCapCases();
std::vector<RpaCase> SinksCases();
std::vector<RpaCase> KvShareCases();
// rpa's own harder cases (small and ragged, then long contexts).
std::vector<RpaCase> HardCases();
std::vector<RpaCase> LongContextCases();

}  // namespace rpa::testing
