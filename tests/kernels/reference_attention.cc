#include "tests/kernels/reference_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "numerics/scalar_codec.h"
#include "util/error.h"

namespace rpa::testing {
namespace {

// Address of element (i, j, k) of a rank-3 view, through its strides.
const uint8_t* At3(const TensorView& v, int64_t i, int64_t j, int64_t k) {
  const int64_t off = i * v.strides[0] + j * v.strides[1] + k * v.strides[2];
  return static_cast<const uint8_t*>(v.data) + off * static_cast<int64_t>(DTypeSize(v.dtype));
}

// The contract's q_scale step for one element: q / q_scale in f32 (the dtype the kernel
// divides in), clipped to the cache dtype's finite range, cast to the cache dtype with one
// round-to-nearest-even step, and read back exactly.
double QuantizeQueryElement(float q, float q_scale, DType cache_dtype) {
  float x = q / q_scale;
  float max = 0;
  switch (cache_dtype) {
    case DType::kFloat32:
      return x;
    case DType::kBFloat16:
      max = 0x1.FEp127f;
      break;
    case DType::kFloat16:
      max = 65504.0f;
      break;
    case DType::kFloat8E4M3FN:
      max = 448.0f;
      break;
    case DType::kFloat8E5M2:
      max = 57344.0f;
      break;
  }
  if (!std::isnan(x)) x = std::clamp(x, -max, max);
  switch (cache_dtype) {
    case DType::kBFloat16:
      return BF16ToF32(F32ToBF16(x));
    case DType::kFloat16:
      return F16ToF32(F32ToF16(x));
    case DType::kFloat8E4M3FN:
      return E4M3FNToF32(F32ToE4M3FN(x));
    case DType::kFloat8E5M2:
      return E5M2ToF32(F32ToE5M2(x));
    default:
      return x;
  }
}

}  // namespace

double DecodeToDouble(DType dtype, const void* element) {
  switch (dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, element, sizeof f);
      return f;
    }
    case DType::kBFloat16: {
      uint16_t b;
      std::memcpy(&b, element, sizeof b);
      return BF16ToF32(b);
    }
    case DType::kFloat16: {
      uint16_t b;
      std::memcpy(&b, element, sizeof b);
      return F16ToF32(b);
    }
    case DType::kFloat8E4M3FN:
      return E4M3FNToF32(*static_cast<const uint8_t*>(element));
    case DType::kFloat8E5M2:
      return E5M2ToF32(*static_cast<const uint8_t*>(element));
  }
  RPA_CHECK(false && "unknown dtype");
}

ReferenceResult ReferenceRaggedPagedAttention(const TensorView& queries, const TensorView& keys,
                                              const TensorView& values, const TensorView& kv_cache,
                                              const AttentionMetadata& metadata,
                                              const AttentionOptions& options) {
  RPA_CHECK(queries.rank == 3 && keys.rank == 3 && values.rank == 3 && kv_cache.rank == 4);
  RPA_CHECK(kv_cache.is_contiguous());
  const int64_t num_tokens = queries.shape[0];
  const int64_t num_q_heads = queries.shape[1];
  const int64_t head_dim = queries.shape[2];
  const int64_t num_kv_heads = keys.shape[1];
  const int64_t page_size = kv_cache.shape[1];
  const int64_t num_pages = kv_cache.shape[0];
  const int64_t group = num_q_heads / num_kv_heads;
  const DType cache_dtype = kv_cache.dtype;
  const int64_t elem = static_cast<int64_t>(DTypeSize(cache_dtype));
  const int64_t max_num_seqs = static_cast<int64_t>(metadata.kv_lens.size());
  const int64_t pages_per_seq = static_cast<int64_t>(metadata.page_indices.size()) / max_num_seqs;
  const int64_t num_seqs = metadata.distribution[2];
  RPA_CHECK(num_kv_heads * group == num_q_heads && num_seqs <= max_num_seqs);

  ReferenceResult r;
  r.kv_cache.assign(static_cast<const uint8_t*>(kv_cache.data),
                    static_cast<const uint8_t*>(kv_cache.data) + kv_cache.byte_size());
  r.output.assign(num_tokens * num_q_heads * head_dim, std::numeric_limits<double>::quiet_NaN());
  r.logit_abs_bound.assign(num_tokens * num_q_heads, 0.0);
  r.value_abs_sum.assign(num_tokens * num_q_heads * head_dim, 0.0);
  r.num_visible.assign(num_tokens, 0);

  // Byte address of cache element (page, slot, kv slot, 0): [NP, PS, 2*Hkv, D] row-major.
  auto cache_row = [&](int64_t seq, int64_t pos, int64_t kv_slot) -> uint8_t* {
    const int32_t page = metadata.page_indices[seq * pages_per_seq + pos / page_size];
    RPA_CHECK(page >= 0 && page < num_pages);
    const int64_t row = ((page * page_size + pos % page_size) * 2 * num_kv_heads + kv_slot);
    return r.kv_cache.data() + row * head_dim * elem;
  };

  // 1. Write-then-read: the new K/V rows land in the cache first (bytes copied as-is).
  if (options.update_kv_cache) {
    for (int64_t i = 0; i < num_seqs; ++i) {
      const int64_t q_begin = metadata.cu_q_lens[i];
      const int64_t q_len = metadata.cu_q_lens[i + 1] - q_begin;
      const int64_t offset = metadata.kv_lens[i] - q_len;
      for (int64_t j = 0; j < q_len; ++j) {
        for (int64_t h = 0; h < num_kv_heads; ++h) {
          for (int64_t d = 0; d < head_dim; ++d) {
            std::memcpy(cache_row(i, offset + j, 2 * h) + d * elem, At3(keys, q_begin + j, h, d),
                        elem);
            std::memcpy(cache_row(i, offset + j, 2 * h + 1) + d * elem,
                        At3(values, q_begin + j, h, d), elem);
          }
        }
      }
    }
  }

  const double logit_scale = static_cast<double>(options.sm_scale) *
                             options.k_scale.value_or(1.0f) * options.q_scale.value_or(1.0f);
  const double v_scale = options.v_scale.value_or(1.0f);

  // 2. Attention per sequence, reading the updated cache through the page table.
  for (int64_t i = 0; i < num_seqs; ++i) {
    const int64_t q_begin = metadata.cu_q_lens[i];
    const int64_t q_len = metadata.cu_q_lens[i + 1] - q_begin;
    const int64_t kv_len = metadata.kv_lens[i];
    const int64_t offset = kv_len - q_len;
    // Gathered K and V of this sequence: [Hkv, kv_len, D] each.
    std::vector<double> k_seq(num_kv_heads * kv_len * head_dim);
    std::vector<double> v_seq(num_kv_heads * kv_len * head_dim);
    for (int64_t h = 0; h < num_kv_heads; ++h) {
      for (int64_t t = 0; t < kv_len; ++t) {
        const uint8_t* k_row = cache_row(i, t, 2 * h);
        const uint8_t* v_row = cache_row(i, t, 2 * h + 1);
        for (int64_t d = 0; d < head_dim; ++d) {
          k_seq[(h * kv_len + t) * head_dim + d] = DecodeToDouble(cache_dtype, k_row + d * elem);
          v_seq[(h * kv_len + t) * head_dim + d] = DecodeToDouble(cache_dtype, v_row + d * elem);
        }
      }
    }

    std::vector<double> q(head_dim), logits(kv_len), weights(kv_len);
    for (int64_t row = 0; row < q_len; ++row) {
      const int64_t token = q_begin + row;
      const int64_t pos = offset + row;  // absolute position of this query
      int64_t t_begin = 0, t_end = kv_len;
      if (options.use_causal_mask) {
        t_end = pos + 1;
        if (options.sliding_window) {
          t_begin = std::max<int64_t>(0, pos - *options.sliding_window + 1);
        }
      }
      r.num_visible[token] = t_end - t_begin;
      for (int64_t n = 0; n < num_q_heads; ++n) {
        const int64_t h = n / group;
        for (int64_t d = 0; d < head_dim; ++d) {
          const double qd = DecodeToDouble(queries.dtype, At3(queries, token, n, d));
          q[d] = options.q_scale
                     ? QuantizeQueryElement(static_cast<float>(qd), *options.q_scale, cache_dtype)
                     : qd;
        }
        double max_logit = -std::numeric_limits<double>::infinity();
        double abs_bound = 0;
        for (int64_t t = t_begin; t < t_end; ++t) {
          const double* k = &k_seq[(h * kv_len + t) * head_dim];
          double dot = 0, abs_dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) {
            dot += q[d] * k[d];
            abs_dot += std::abs(q[d] * k[d]);
          }
          double s = dot * logit_scale;
          abs_bound = std::max(abs_bound, abs_dot * std::abs(logit_scale));
          if (options.soft_cap) s = *options.soft_cap * std::tanh(s / *options.soft_cap);
          logits[t] = s;
          max_logit = std::max(max_logit, s);
        }
        double sink = 0;
        if (options.sinks) {
          sink = DecodeToDouble(options.sinks->dtype,
                                static_cast<const uint8_t*>(options.sinks->data) +
                                    n * options.sinks->strides[0] *
                                        static_cast<int64_t>(DTypeSize(options.sinks->dtype)));
          max_logit = std::max(max_logit, sink);
        }
        double denom = options.sinks ? std::exp(sink - max_logit) : 0.0;
        for (int64_t t = t_begin; t < t_end; ++t) {
          weights[t] = std::exp(logits[t] - max_logit);
          denom += weights[t];
        }
        double* out = &r.output[(token * num_q_heads + n) * head_dim];
        double* abs_sum = &r.value_abs_sum[(token * num_q_heads + n) * head_dim];
        for (int64_t d = 0; d < head_dim; ++d) out[d] = abs_sum[d] = 0;
        for (int64_t t = t_begin; t < t_end; ++t) {
          const double w = weights[t] / denom;
          const double* v = &v_seq[(h * kv_len + t) * head_dim];
          for (int64_t d = 0; d < head_dim; ++d) {
            out[d] += w * v[d];
            abs_sum[d] += w * std::abs(v[d]);
          }
        }
        for (int64_t d = 0; d < head_dim; ++d) {
          out[d] *= v_scale;
          abs_sum[d] *= std::abs(v_scale);
        }
        r.logit_abs_bound[token * num_q_heads + n] = abs_bound;
      }
    }
  }
  return r;
}

}  // namespace rpa::testing
