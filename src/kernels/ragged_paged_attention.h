// ragged_paged_attention: the public entry point of rpa's attention kernel.
// Contract: ../shared/docs/rpa-contract.md (inputs §1, semantics §2, validation §3).
//
//   queries  [T, Hq, D]          f32 or bf16
//   keys     [T, Hkv, D]         == kv_cache dtype (already quantized by quantize_kv)
//   values   [T, Hkv, D]         == kv_cache dtype
//   kv_cache [NP, PS, 2*Hkv, D]  f32, bf16, float8_e4m3fn or float8_e5m2; slot 2h = K of
//                                kv-head h, slot 2h+1 = V of h. Updated in place unless
//                                update_kv_cache is false.
//   output   [T, Hq, D]          dtype of queries; rows past cu_q_lens[d2] are unspecified.
//
// Every call validates shapes, dtypes and metadata values (static and dynamic checks of §3)
// and throws rpa::InvalidArgument with the contract's messages; no metadata, however
// wrong, makes the kernel read or write outside the views it was given.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "numerics/tensor_view.h"

namespace rpa {

// Ragged batch metadata, int32, in caller memory (§1).
struct AttentionMetadata {
  std::span<const int32_t> kv_lens;       // [S]   context length after this step
  std::span<const int32_t> page_indices;  // [S * PPS] flat block table
  std::span<const int32_t> cu_q_lens;     // [S + 1] prefix sums of query lengths
  std::span<const int32_t> distribution;  // [3]   (decode end, prefill end, num seqs)
};

struct AttentionOptions {
  float sm_scale = 1.0f;
  std::optional<int32_t> sliding_window;  // unset or > 0
  std::optional<float> soft_cap;          // unset or != 0
  std::optional<TensorView> sinks;        // f32 [Hq]
  std::optional<float> q_scale;
  std::optional<float> k_scale;
  std::optional<float> v_scale;
  bool use_causal_mask = true;
  bool update_kv_cache = true;  // false = KV-share mode: read the cache, write nothing
  int num_threads = 0;          // 0 = every thread of the kernel's pool
};

// Validates, writes the new K/V into the cache (unless update_kv_cache is false), and
// computes attention for every scheduled token.
void RaggedPagedAttention(const TensorView& queries, const TensorView& keys,
                          const TensorView& values, const TensorView& kv_cache,
                          const AttentionMetadata& metadata, const AttentionOptions& options,
                          const TensorView& output);

}  // namespace rpa
