// Test scaffolding for the serving attention path: a recording AttentionBackend, a ragged
// batch with its paged cache, and deterministic layer weights. Nothing here computes what
// the code under test computes; it only builds inputs and captures what crosses the
// layer -> kernel boundary.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/layer_kv_cache.h"
#include "layers/ragged_batch.h"
#include "numerics/convert.h"
#include "numerics/dtype.h"
#include "numerics/tensor_view.h"

namespace rpa::test {

inline std::vector<uint8_t> Bytes(const TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.byte_size());
}

// What one backend call received, copied out of the caller's buffers.
struct RecordedCall {
  DType q_dtype, k_dtype, v_dtype, cache_dtype;
  std::vector<uint8_t> q, k, v;  // raw bytes, [T, H, D]
  AttentionOptions options;
};

// Records every call; forwards it to `next` when given (e.g. the real kernel), else
// writes zeros to the output (all-zero bytes are +0.0 in every dtype).
class RecordingBackend final : public AttentionBackend {
 public:
  explicit RecordingBackend(AttentionBackend* next = nullptr) : next_(next) {}

  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override {
    calls.push_back(RecordedCall{queries.dtype, keys.dtype, values.dtype, kv_cache.dtype,
                                 Bytes(queries), Bytes(keys), Bytes(values), options});
    if (next_ != nullptr) {
      next_->Run(queries, keys, values, kv_cache, metadata, options, output);
    } else {
      std::memset(output.data, 0, output.byte_size());
    }
  }

  std::vector<RecordedCall> calls;

 private:
  AttentionBackend* next_;
};

// One sequence of a step: q_len new tokens, kv_len context after the step.
struct SeqSpec {
  int32_t q_len;
  int32_t kv_len;
};

// A ragged batch plus the paged cache it addresses. Pages are handed out in a scrambled
// order so that logical and physical page numbers differ.
class ServingBatch {
 public:
  // REQUIRES seqs ordered decode-only (q_len 1), then prefill-only (q_len == kv_len), then
  // mixed, as the kernel's distribution expects.
  ServingBatch(std::vector<SeqSpec> seqs, int32_t page_size)
      : seqs_(std::move(seqs)), ps_(page_size) {
    int32_t pps = 1;
    for (const SeqSpec& s : seqs_) pps = std::max(pps, (s.kv_len + ps_ - 1) / ps_);
    pps_ = pps;
    const int32_t n = static_cast<int32_t>(seqs_.size());
    num_pages_ = n * pps_ + 3;  // a few never-used pages
    // Page j of sequence i -> physical (7 * (i * pps + j) + 2) mod num_pages: a bijection
    // whenever num_pages is not a multiple of 7.
    if (num_pages_ % 7 == 0) ++num_pages_;
    page_indices_.resize(n * pps_);
    for (int32_t k = 0; k < n * pps_; ++k) page_indices_[k] = (7 * k + 2) % num_pages_;
    cu_q_lens_.push_back(0);
    int32_t d0 = 0, d1 = 0;
    for (int32_t i = 0; i < n; ++i) {
      const SeqSpec& s = seqs_[i];
      kv_lens_.push_back(s.kv_len);
      cu_q_lens_.push_back(cu_q_lens_.back() + s.q_len);
      if (s.q_len == 1 && d0 == i)
        d0 = d1 = i + 1;
      else if (s.q_len == s.kv_len && d1 == i)
        d1 = i + 1;
      for (int32_t r = 0; r < s.q_len; ++r) positions_.push_back(s.kv_len - s.q_len + r);
    }
    distribution_ = {d0, d1, n};
  }

  int64_t num_tokens() const { return cu_q_lens_.back(); }
  int32_t page_size() const { return ps_; }
  int32_t num_pages() const { return num_pages_; }
  const std::vector<SeqSpec>& seqs() const { return seqs_; }
  std::span<const int32_t> positions() const { return positions_; }

  RaggedBatch batch() const {
    return RaggedBatch{AttentionMetadata{kv_lens_, page_indices_, cu_q_lens_, distribution_}};
  }

  // Element offset of (position pos of sequence seq, kv slot, 0) in a [NP, PS, 2*Hkv, D]
  // cache.
  int64_t SlotOffset(int seq, int32_t pos, int64_t slot, int64_t num_kv_heads, int64_t d) const {
    const int32_t page = page_indices_[seq * pps_ + pos / ps_];
    return ((static_cast<int64_t>(page) * ps_ + pos % ps_) * 2 * num_kv_heads + slot) * d;
  }

 private:
  std::vector<SeqSpec> seqs_;
  int32_t ps_, pps_ = 0, num_pages_ = 0;
  std::vector<int32_t> kv_lens_, page_indices_, cu_q_lens_, distribution_, positions_;
};

// Owning storage for one layer's cache, [NP, PS, 2*Hkv, D].
struct CacheStorage {
  CacheStorage(DType dtype, int32_t num_pages, int32_t page_size, int64_t num_kv_heads,
               int64_t head_dim)
      : bytes(static_cast<size_t>(num_pages) * page_size * 2 * num_kv_heads * head_dim *
              DTypeSize(dtype)) {
    view = TensorView::Contiguous(bytes.data(), dtype,
                                  {num_pages, page_size, 2 * num_kv_heads, head_dim});
  }
  // Every slot holds NaN: unused slots must never leak into results.
  void FillNaN() {
    std::vector<float> nan(view.numel(), std::numeric_limits<float>::quiet_NaN());
    ConvertScalar(DType::kFloat32, nan.data(), view.dtype, bytes.data(), nan.size());
  }
  LayerKvCache layer_cache(KvScales scales = {}) { return LayerKvCache{view, scales}; }

  std::vector<uint8_t> bytes;
  TensorView view;
};

// Writes the context that precedes this step (positions [0, kv_len - q_len) of every
// sequence) into `cache`: each stored element is a multiple of 1/4 in [-2, 2] (exact in
// every cache dtype: at most 3 significant bits) times k_mult (K slots) or v_mult (V
// slots). Two caches filled with the same seed hold the same logical context when one
// stores codes (mult 1, dequantized by scales s) and the other stores values (mult s).
inline void FillPriorContext(const ServingBatch& b, CacheStorage& cache, int64_t num_kv_heads,
                             int64_t d, uint32_t seed, float k_mult = 1.0f, float v_mult = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-8, 8);
  for (size_t i = 0; i < b.seqs().size(); ++i) {
    const SeqSpec& s = b.seqs()[i];
    for (int32_t pos = 0; pos < s.kv_len - s.q_len; ++pos) {
      for (int64_t slot = 0; slot < 2 * num_kv_heads; ++slot) {
        const int64_t off = b.SlotOffset(static_cast<int>(i), pos, slot, num_kv_heads, d);
        for (int64_t e = 0; e < d; ++e) {
          StoreFromF32(cache.view.dtype, q(rng) * 0.25f * (slot % 2 == 0 ? k_mult : v_mult),
                       cache.bytes.data() + (off + e) * DTypeSize(cache.view.dtype));
        }
      }
    }
  }
}

inline std::vector<float> RandomVector(size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = scale * u(rng);
  return v;
}

// Weights with entries uniform in +-scale / sqrt(fan_in), so projections of O(1) inputs
// are O(1); norm weights around 1; sinks around 0.
inline AttentionWeights RandomWeights(const AttentionConfig& c, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  const int64_t qw = c.num_q_heads * c.head_dim, kvw = c.num_kv_heads * c.head_dim;
  const float in_scale = scale / std::sqrt(static_cast<float>(c.d_model));
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(qw));
  AttentionWeights w;
  w.wq = RandomVector(qw * c.d_model, in_scale, rng);
  w.wk = RandomVector(kvw * c.d_model, in_scale, rng);
  w.wv = RandomVector(kvw * c.d_model, in_scale, rng);
  w.wo = RandomVector(c.d_model * qw, out_scale, rng);
  if (c.qk_norm) {
    w.q_norm = RandomVector(c.head_dim, 0.5f, rng);
    w.k_norm = RandomVector(c.head_dim, 0.5f, rng);
    for (float& x : w.q_norm) x += 1.0f;
    for (float& x : w.k_norm) x += 1.0f;
  }
  if (c.has_sinks) w.sinks = RandomVector(c.num_q_heads, 1.0f, rng);
  return w;
}

// Hidden states [T, d_model] in `dtype`, entries uniform in +-scale (rounded once to dtype).
inline std::vector<uint8_t> RandomHidden(int64_t t, int64_t d_model, DType dtype, float scale,
                                         uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<float> f = RandomVector(t * d_model, scale, rng);
  std::vector<uint8_t> out(f.size() * DTypeSize(dtype));
  ConvertScalar(DType::kFloat32, f.data(), dtype, out.data(), f.size());
  return out;
}

}  // namespace rpa::test
