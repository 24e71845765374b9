// The ragged paged attention kernel: one work item (sequence, kv head, query rows, KV range)
// at a time, SIMD over head_dim, dispatched per target with Highway.
//
// Memory traffic. Decode attention is a stream over the KV cache: every K and V element of
// the context is read once per step and used by the M = rows * G queries of the item (all
// query heads of the KV head), so each byte does 2 * M FLOPs. The queries (M x D f32), the
// accumulators (M x D f32) and one tile of logits (M x 16) stay in L1/L2. fp8 and bf16 are
// decoded to f32 in registers inside the dot products; nothing is dequantized to memory
// unless M is large (prefill), where a 16-token tile is decoded once into an f32 scratch
// (16 x D, in L1) and reused by all M queries.
//
// Tiling. The KV range is walked in tiles of kTile = 16 tokens gathered through the page
// table (any page size, 1 included). Per tile:
//   S[m, t] = q_m . K_t                        (q_m pre-scaled by sm_scale*k_scale*q_scale)
//   soft cap, causal / window mask, online softmax update (f32, running max and sum)
//   acc[m, :] = acc[m, :] * alpha_m + sum_t P[m, t] V_t
// The next tile's K/V rows are prefetched: rows of one head are 2*Hkv*D elements apart, a
// stride the hardware prefetchers do not follow across pages.
//
// Numerics: f32 logits, f32 softmax, f32 P.V, one rounding at the output. The scalar tail
// (D not a multiple of the vector width) uses the same formulas one lane at a time.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention_kernel.h"
#include "numerics/scalar_codec.h"
#include "util/aligned_buffer.h"
#include "util/error.h"
#include "util/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "numerics/simd_codec-inl.h"

// Per-target non-SIMD helpers live once (outside the per-target guard).
#ifndef RPA_KERNELS_ATTENTION_KERNEL_COMMON_
#define RPA_KERNELS_ATTENTION_KERNEL_COMMON_
namespace rpa {
namespace attention_detail {

constexpr int kTile = 16;       // KV tokens per tile: one f32 logit vector on AVX-512
constexpr int kDirectMaxM = 8;  // above this many queries, tiles are decoded to f32 once

// Per-worker scratch, sized for the plan's largest item.
struct Scratch {
  AlignedBuffer<float> buf;
  AlignedBuffer<int32_t> range;  // [2, M]: visible KV positions [lo, hi) of each query
  int32_t* lo;
  int32_t* hi;
  float* q;      // [M, D] scaled f32 queries
  float* acc;    // [M, D] output accumulators
  float* s;      // [M, kTile] logits, then softmax weights
  float* mx;     // [M] running max
  float* sum;    // [M] running denominator
  float* alpha;  // [M] rescale factor of the current tile
  float* kf;     // [kTile, D] decoded K tile (large M only)
  float* vf;     // [kTile, D] decoded V tile

  void Prepare(int64_t max_m, int64_t d) {
    // Each region is rounded up to 16 floats so every one starts 64-byte aligned.
    auto up = [](int64_t n) { return (n + 15) / 16 * 16; };
    const int64_t md = up(max_m * d), ms = up(max_m * kTile), m1 = up(max_m),
                  td = up(kTile * d);
    buf.Reserve(static_cast<size_t>(2 * md + ms + 3 * m1 + 2 * td));
    float* p = buf.data();
    q = p, p += md;
    acc = p, p += md;
    s = p, p += ms;
    mx = p, p += m1;
    sum = p, p += m1;
    alpha = p, p += m1;
    kf = p, p += td;
    vf = p;
    range.Reserve(static_cast<size_t>(2 * max_m));
    lo = range.data();
    hi = lo + max_m;
  }
};

}  // namespace attention_detail
}  // namespace rpa
#endif  // RPA_KERNELS_ATTENTION_KERNEL_COMMON_

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using attention_detail::kDirectMaxM;
using attention_detail::kTile;
using attention_detail::Scratch;
using DF = hn::ScalableTag<float>;

// How K/V elements are stored where the kernel reads them.
enum class KvKind { kF32, kBF16, kE4M3Scaled, kE5M2 };

template <KvKind kKind>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const uint8_t* row, size_t d) {
  if constexpr (kKind == KvKind::kF32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + d);
  } else if constexpr (kKind == KvKind::kBF16) {
    return DecodeBF16(df, reinterpret_cast<const uint16_t*>(row) + d);
  } else if constexpr (kKind == KvKind::kE4M3Scaled) {
    return DecodeE4M3FNScaled(df, row + d);
  } else {
    return DecodeE5M2Finite(df, row + d);
  }
}

template <KvKind kKind>
HWY_INLINE float LoadKvScalar(const uint8_t* row, size_t d) {
  if constexpr (kKind == KvKind::kF32) {
    return reinterpret_cast<const float*>(row)[d];
  } else if constexpr (kKind == KvKind::kBF16) {
    uint16_t b;
    std::memcpy(&b, row + 2 * d, 2);
    return BF16ToF32(b);
  } else if constexpr (kKind == KvKind::kE4M3Scaled) {
    return E4M3FNToF32(row[d]) * (1.0f / 256.0f);
  } else {
    return E5M2ToF32(row[d]);
  }
}

// ---------------------------------------------------------------------------------------
// S[j, t] = q_j . K_t for kQ queries (rows of q, stride D) and the tile's n tokens.
// kT tokens are processed together so kQ * kT independent FMA chains hide the latency.
template <KvKind kKind, int kQ, int kT>
HWY_INLINE void DotBlock(DF df, const float* HWY_RESTRICT q, size_t D,
                         const uint8_t* const* rows, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> acc[kQ][kT];
  for (int j = 0; j < kQ; ++j)
    for (int t = 0; t < kT; ++t) acc[j][t] = hn::Zero(df);
  size_t d = 0;
  for (; d + N <= D; d += N) {
    hn::Vec<DF> k[kT];
    for (int t = 0; t < kT; ++t) k[t] = LoadKv<kKind>(df, rows[t], d);
    for (int j = 0; j < kQ; ++j) {
      const auto qv = hn::LoadU(df, q + j * D + d);
      for (int t = 0; t < kT; ++t) acc[j][t] = hn::MulAdd(qv, k[t], acc[j][t]);
    }
  }
  for (int j = 0; j < kQ; ++j) {
    for (int t = 0; t < kT; ++t) {
      float dot = hn::GetLane(hn::SumOfLanes(df, acc[j][t]));
      for (size_t e = d; e < D; ++e) dot += q[j * D + e] * LoadKvScalar<kKind>(rows[t], e);
      s[j * kTile + t] = dot;
    }
  }
}

template <KvKind kKind, int kQ>
HWY_INLINE void DotTile(DF df, const float* q, size_t D, const uint8_t* const* rows, int n,
                        float* s) {
  int t = 0;
  for (; t + 4 <= n; t += 4) DotBlock<kKind, kQ, 4>(df, q, D, rows + t, s + t);
  for (; t < n; ++t) DotBlock<kKind, kQ, 1>(df, q, D, rows + t, s + t);
}

// S[m, 0:n) for all M queries.
template <KvKind kKind>
HWY_INLINE void QkTile(DF df, const float* q, int64_t M, size_t D, const uint8_t* const* rows,
                       int n, float* s) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) DotTile<kKind, 4>(df, q + m * D, D, rows, n, s + m * kTile);
  switch (M - m) {
    case 3: DotTile<kKind, 3>(df, q + m * D, D, rows, n, s + m * kTile); break;
    case 2: DotTile<kKind, 2>(df, q + m * D, D, rows, n, s + m * kTile); break;
    case 1: DotTile<kKind, 1>(df, q + m * D, D, rows, n, s + m * kTile); break;
    default: break;
  }
}

// acc[j, d:d+kDv*N) += sum_t P[j, t] V_t[d:...] for kQ queries.
template <KvKind kKind, int kQ, int kDv>
HWY_INLINE void PvBlock(DF df, const float* HWY_RESTRICT p, const uint8_t* const* rows, int n,
                        float* HWY_RESTRICT acc, size_t D, size_t d) {
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> a[kQ][kDv];
  for (int j = 0; j < kQ; ++j)
    for (int v = 0; v < kDv; ++v) a[j][v] = hn::LoadU(df, acc + j * D + d + v * N);
  for (int t = 0; t < n; ++t) {
    hn::Vec<DF> x[kDv];
    for (int v = 0; v < kDv; ++v) x[v] = LoadKv<kKind>(df, rows[t], d + v * N);
    for (int j = 0; j < kQ; ++j) {
      const auto w = hn::Set(df, p[j * kTile + t]);
      for (int v = 0; v < kDv; ++v) a[j][v] = hn::MulAdd(w, x[v], a[j][v]);
    }
  }
  for (int j = 0; j < kQ; ++j)
    for (int v = 0; v < kDv; ++v) hn::StoreU(a[j][v], df, acc + j * D + d + v * N);
}

template <KvKind kKind, int kQ>
HWY_INLINE void PvRows(DF df, const float* p, const uint8_t* const* rows, int n, float* acc,
                       size_t D) {
  const size_t N = hn::Lanes(df);
  size_t d = 0;
  for (; d + 4 * N <= D; d += 4 * N) PvBlock<kKind, kQ, 4>(df, p, rows, n, acc, D, d);
  for (; d + N <= D; d += N) PvBlock<kKind, kQ, 1>(df, p, rows, n, acc, D, d);
  for (; d < D; ++d) {
    for (int t = 0; t < n; ++t) {
      const float x = LoadKvScalar<kKind>(rows[t], d);
      for (int j = 0; j < kQ; ++j) acc[j * D + d] += p[j * kTile + t] * x;
    }
  }
}

template <KvKind kKind>
HWY_INLINE void PvTile(DF df, const float* p, int64_t M, const uint8_t* const* rows, int n,
                       float* acc, size_t D) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) PvRows<kKind, 4>(df, p + m * kTile, rows, n, acc + m * D, D);
  switch (M - m) {
    case 3: PvRows<kKind, 3>(df, p + m * kTile, rows, n, acc + m * D, D); break;
    case 2: PvRows<kKind, 2>(df, p + m * kTile, rows, n, acc + m * D, D); break;
    case 1: PvRows<kKind, 1>(df, p + m * kTile, rows, n, acc + m * D, D); break;
    default: break;
  }
}

// Decodes n rows of D elements into f32 rows of the scratch (stride D).
template <KvKind kKind>
HWY_INLINE void DecodeTile(DF df, const uint8_t* const* rows, int n, size_t D, float* out) {
  const size_t N = hn::Lanes(df);
  for (int t = 0; t < n; ++t) {
    size_t d = 0;
    for (; d + N <= D; d += N) hn::StoreU(LoadKv<kKind>(df, rows[t], d), df, out + t * D + d);
    for (; d < D; ++d) out[t * D + d] = LoadKvScalar<kKind>(rows[t], d);
  }
}

// ---------------------------------------------------------------------------------------
// Online softmax over one tile: masks S[m, 0:kTile) to the query's visible positions
// [lo[m], hi[m]) (absolute), updates the running max / sum and leaves the weights P in s.
// alpha[m] is the factor the accumulator row must be multiplied by (1 when the max did not
// move, 0 before the first visible token).
HWY_INLINE void SoftmaxTile(DF df, int64_t M, int32_t t0, int n, const int32_t* lo,
                            const int32_t* hi, bool has_cap, float cap, float* s, float* mx,
                            float* sum, float* alpha) {
  const size_t N = hn::Lanes(df);
  const hn::RebindToSigned<DF> di;
  const auto neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (int64_t m = 0; m < M; ++m) {
    float* sm = s + m * kTile;
    const int32_t l = std::max(lo[m], t0);
    const int32_t h = std::min(hi[m], t0 + n);
    if (l >= h) {  // nothing visible in this tile for this query
      for (int t = 0; t < kTile; t += static_cast<int>(N)) hn::StoreU(hn::Zero(df), df, sm + t);
      alpha[m] = 1.0f;
      continue;
    }
    auto vmax = neg_inf;
    for (int t = 0; t < kTile; t += static_cast<int>(N)) {
      auto x = hn::LoadU(df, sm + t);
      if (has_cap) {
        const auto c = hn::Set(df, cap);
        x = hn::Mul(c, hn::Tanh(df, hn::Div(x, c)));
      }
      const auto pos = hn::Iota(di, t0 + t);
      const auto vis = hn::And(hn::Lt(hn::Set(di, l - 1), pos), hn::Lt(pos, hn::Set(di, h)));
      x = hn::IfThenElse(hn::RebindMask(df, vis), x, neg_inf);
      hn::StoreU(x, df, sm + t);
      vmax = hn::Max(vmax, x);
    }
    const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float new_max = std::max(mx[m], tile_max);
    // exp(-inf) = 0: the first visible tile zeroes the (empty) accumulator.
    alpha[m] = mx[m] == new_max ? 1.0f : std::exp(mx[m] - new_max);
    const auto vnew = hn::Set(df, new_max);
    auto vsum = hn::Zero(df);
    for (int t = 0; t < kTile; t += static_cast<int>(N)) {
      // Masked lanes are -inf; Exp maps them (below its lower bound) to exactly 0.
      const auto p = hn::Exp(df, hn::Sub(hn::LoadU(df, sm + t), vnew));
      hn::StoreU(p, df, sm + t);
      vsum = hn::Add(vsum, p);
    }
    sum[m] = sum[m] * alpha[m] + hn::GetLane(hn::SumOfLanes(df, vsum));
    mx[m] = new_max;
  }
}

HWY_INLINE void ScaleRows(DF df, int64_t M, size_t D, const float* alpha, float* acc) {
  const size_t N = hn::Lanes(df);
  for (int64_t m = 0; m < M; ++m) {
    if (alpha[m] == 1.0f) continue;
    float* row = acc + m * D;
    const auto a = hn::Set(df, alpha[m]);
    size_t d = 0;
    for (; d + N <= D; d += N) hn::StoreU(hn::Mul(hn::LoadU(df, row + d), a), df, row + d);
    for (; d < D; ++d) row[d] *= alpha[m];
  }
}

// ---------------------------------------------------------------------------------------
// Query loading and output.

// q row (f32 or bf16) -> f32 * logit_scale, with §2's q_scale step when requested:
// q / q_scale, clipped to the cache dtype's finite range, rounded to the cache dtype.
void LoadQuery(DF df, const AttentionKernelArgs& a, const uint8_t* src, size_t D, float* dst) {
  const size_t N = hn::Lanes(df);
  const DType qt = a.queries.dtype;
  if (!a.quantize_q) {
    const auto scale = hn::Set(df, a.logit_scale);
    size_t d = 0;
    for (; d + N <= D; d += N) {
      const auto x = qt == DType::kFloat32
                         ? hn::LoadU(df, reinterpret_cast<const float*>(src) + d)
                         : DecodeBF16(df, reinterpret_cast<const uint16_t*>(src) + d);
      hn::StoreU(hn::Mul(x, scale), df, dst + d);
    }
    for (; d < D; ++d) {
      uint16_t b = 0;
      if (qt == DType::kBFloat16) std::memcpy(&b, src + 2 * d, 2);
      dst[d] = (qt == DType::kFloat32 ? reinterpret_cast<const float*>(src)[d] : BF16ToF32(b)) *
               a.logit_scale;
    }
    return;
  }
  const DType ct = a.kv_cache.dtype;
  const float max = static_cast<float>(GetFInfo(ct).max);
  for (size_t d = 0; d < D; ++d) {
    uint16_t b = 0;
    if (qt == DType::kBFloat16) std::memcpy(&b, src + 2 * d, 2);
    float x = qt == DType::kFloat32 ? reinterpret_cast<const float*>(src)[d] : BF16ToF32(b);
    x /= a.q_scale;
    if (!std::isnan(x)) x = std::clamp(x, -max, max);
    switch (ct) {
      case DType::kBFloat16: x = BF16ToF32(F32ToBF16(x)); break;
      case DType::kFloat8E4M3FN: x = E4M3FNToF32(F32ToE4M3FN(x)); break;
      case DType::kFloat8E5M2: x = E5M2ToF32(F32ToE5M2(x)); break;
      default: break;  // f32: already the cache dtype
    }
    dst[d] = x * a.logit_scale;
  }
}

// out_row = acc_row * factor, cast to the output dtype (f32 or bf16, round to nearest even).
void StoreOutput(DF df, const float* acc, float factor, DType dt, size_t D, uint8_t* dst) {
  const size_t N = hn::Lanes(df);
  const auto f = hn::Set(df, factor);
  size_t d = 0;
  if (dt == DType::kFloat32) {
    float* o = reinterpret_cast<float*>(dst);
    for (; d + N <= D; d += N) hn::StoreU(hn::Mul(hn::LoadU(df, acc + d), f), df, o + d);
    for (; d < D; ++d) o[d] = acc[d] * factor;
  } else {
    uint16_t* o = reinterpret_cast<uint16_t*>(dst);
    for (; d + N <= D; d += N) EncodeBF16<false>(df, hn::Mul(hn::LoadU(df, acc + d), f), o + d);
    for (; d < D; ++d) {
      const uint16_t b = F32ToBF16(acc[d] * factor);
      std::memcpy(o + d, &b, 2);
    }
  }
}

// The normalizing factor of one query's state: out = acc * factor. A sink adds exp(sink)
// to the denominator; both terms are taken relative to max(mx, sink) so neither overflows.
// An empty state (sum 0, no sink) gives 0 rather than NaN.
float Normalizer(float mx, float sum, const float* sink, float out_scale) {
  float acc_w = 1.0f, denom = sum;
  if (sink != nullptr) {
    const float big = std::max(mx, *sink);
    acc_w = std::exp(mx - big);
    denom = sum * acc_w + std::exp(*sink - big);
  }
  if (!(denom > 0.0f)) return 0.0f;
  return acc_w * out_scale / denom;
}

uint8_t* OutputRow(const AttentionKernelArgs& a, int64_t row, int64_t head) {
  const TensorView& o = a.output;
  return static_cast<uint8_t*>(o.data) +
         (row * o.strides[0] + head * o.strides[1]) * static_cast<int64_t>(DTypeSize(o.dtype));
}

// ---------------------------------------------------------------------------------------
// One work item.

template <KvKind kKind>
void ComputeItemT(const AttentionKernelArgs& a, const AttentionWorkItem& it, Scratch& sc) {
  const DF df;
  const AttentionPlan& plan = *a.plan;
  const AttentionShape& sh = plan.shape;
  const int64_t D = sh.head_dim, G = sh.num_q_heads / sh.num_kv_heads, PS = sh.page_size;
  // Queries are ordered (head, row, group member): m = (h - head_begin) * Mh + r * G + g.
  const int64_t Mh = (it.row_end - it.row_begin) * G;  // queries per KV head
  const int64_t H = it.head_end - it.head_begin;
  const int64_t M = Mh * H;
  const int32_t seq_row0 = plan.cu_q_lens[it.seq];
  const int32_t kv_len = plan.kv_lens[it.seq];
  const int32_t q_len = plan.cu_q_lens[it.seq + 1] - seq_row0;
  const int32_t offset = kv_len - q_len;  // absolute position of the sequence's first row

  // Visible range of each query (the same for every head), clipped to the item's KV range.
  int32_t* lo = sc.lo;
  int32_t* hi = sc.hi;
  for (int64_t m = 0; m < Mh; ++m) {
    const int32_t pos = offset + static_cast<int32_t>(it.row_begin + m / G - seq_row0);
    int32_t l = 0, h = kv_len;
    if (plan.use_causal_mask) {
      h = pos + 1;
      if (plan.sliding_window > 0) l = std::max(0, pos - plan.sliding_window + 1);
    }
    lo[m] = std::max(l, it.kv_begin);
    hi[m] = std::min(h, it.kv_end);
  }
  const TensorView& qv = a.queries;
  const int64_t qes = static_cast<int64_t>(DTypeSize(qv.dtype));
  for (int64_t m = 0; m < M; ++m) {
    const int64_t mh = m % Mh;
    const int64_t r = it.row_begin + mh / G, head = (it.head_begin + m / Mh) * G + mh % G;
    const uint8_t* src = static_cast<const uint8_t*>(qv.data) +
                         (r * qv.strides[0] + head * qv.strides[1]) * qes;
    LoadQuery(df, a, src, static_cast<size_t>(D), sc.q + m * D);
    sc.mx[m] = -std::numeric_limits<float>::infinity();
    sc.sum[m] = 0.0f;
  }
  std::fill(sc.acc, sc.acc + M * D, 0.0f);

  const int32_t kv_lo = *std::min_element(lo, lo + Mh);
  const int32_t kv_hi = *std::max_element(hi, hi + Mh);
  const uint8_t* cache = static_cast<const uint8_t*>(a.kv_cache.data);
  const int64_t es = static_cast<int64_t>(DTypeSize(a.kv_cache.dtype));
  const int64_t slot_bytes = 2 * sh.num_kv_heads * D * es;  // all heads of one token
  const int64_t head_bytes = 2 * D * es;                    // K and V of one head
  const int32_t* pages = plan.page_indices.data() + it.seq * plan.pages_per_seq;
  // Start of the item's heads in the page slot of position t.
  auto slot_of = [&](int32_t t) {
    return cache + (static_cast<int64_t>(pages[t / PS]) * PS + t % PS) * slot_bytes +
           it.head_begin * head_bytes;
  };
  const bool decode_tiles = Mh > kDirectMaxM;
  const uint8_t* slots[kTile];
  const uint8_t* krows[kTile];
  const uint8_t* vrows[kTile];
  const uint8_t* kf_rows[kTile];
  const uint8_t* vf_rows[kTile];
  for (int t = 0; t < kTile; ++t) {
    kf_rows[t] = reinterpret_cast<const uint8_t*>(sc.kf + t * D);
    vf_rows[t] = reinterpret_cast<const uint8_t*>(sc.vf + t * D);
  }
  const size_t ud = static_cast<size_t>(D);
  const int64_t span_bytes = H * head_bytes;  // contiguous bytes the item reads per token

  // Tiles sit on a grid of kTile absolute positions, so with page_size 16 a tile is a page.
  // Positions of the first tile before kv_lo are valid (< kv_len) and masked for every query.
  for (int32_t t0 = kv_lo / kTile * kTile; t0 < kv_hi; t0 += kTile) {
    const int n = static_cast<int>(std::min<int32_t>(kTile, kv_hi - t0));
    for (int t = 0; t < n; ++t) slots[t] = slot_of(t0 + t);
    // Prefetch the next tile (every other line: the adjacent-line prefetcher fetches pairs).
    static const int kTmpPf = getenv("RPA_TMP_PF") ? atoi(getenv("RPA_TMP_PF")) : 1;
    const int32_t next_end = std::min<int32_t>(t0 + (kTmpPf + 1) * kTile, kv_hi);
    if (kTmpPf > 1) t0 += (kTmpPf - 1) * kTile;
    for (int32_t t = t0 + kTile; t < next_end; ++t) {
      const uint8_t* p = slot_of(t);
      for (int64_t b = 0; b < span_bytes; b += 128) hwy::Prefetch(p + b);
    }
    if (kTmpPf > 1) t0 -= (kTmpPf - 1) * kTile;
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int t = 0; t < n; ++t) {
        krows[t] = slots[t] + hh * head_bytes;
        vrows[t] = krows[t] + D * es;
      }
      float* q = sc.q + hh * Mh * D;
      float* acc = sc.acc + hh * Mh * D;
      float* mx = sc.mx + hh * Mh;
      float* sum = sc.sum + hh * Mh;
      if (decode_tiles) {
        DecodeTile<kKind>(df, krows, n, ud, sc.kf);
        QkTile<KvKind::kF32>(df, q, Mh, ud, kf_rows, n, sc.s);
      } else {
        QkTile<kKind>(df, q, Mh, ud, krows, n, sc.s);
      }
      SoftmaxTile(df, Mh, t0, n, lo, hi, a.has_soft_cap, a.soft_cap, sc.s, mx, sum, sc.alpha);
      ScaleRows(df, Mh, ud, sc.alpha, acc);
      if (decode_tiles) {
        DecodeTile<kKind>(df, vrows, n, ud, sc.vf);
        PvTile<KvKind::kF32>(df, sc.s, Mh, vf_rows, n, acc, ud);
      } else {
        PvTile<kKind>(df, sc.s, Mh, vrows, n, acc, ud);
      }
    }
  }

  if (it.partial >= 0) {
    float* slot = a.partials + it.partial * plan.partial_stride;
    std::memcpy(slot, sc.acc, sizeof(float) * M * D);
    std::memcpy(slot + M * D, sc.mx, sizeof(float) * M);
    std::memcpy(slot + M * D + M, sc.sum, sizeof(float) * M);
    return;
  }
  for (int64_t m = 0; m < M; ++m) {
    const int64_t mh = m % Mh;
    const int64_t r = it.row_begin + mh / G, head = (it.head_begin + m / Mh) * G + mh % G;
    const float f = Normalizer(sc.mx[m], sc.sum[m], a.sinks ? a.sinks + head : nullptr,
                               a.out_scale);
    StoreOutput(df, sc.acc + m * D, f, a.output.dtype, ud, OutputRow(a, r, head));
  }
}

}  // namespace

void ComputeItem(const AttentionKernelArgs& a, const AttentionWorkItem& it, Scratch& sc) {
  switch (a.kv_cache.dtype) {
    case DType::kFloat32: return ComputeItemT<KvKind::kF32>(a, it, sc);
    case DType::kBFloat16: return ComputeItemT<KvKind::kBF16>(a, it, sc);
    case DType::kFloat8E4M3FN: return ComputeItemT<KvKind::kE4M3Scaled>(a, it, sc);
    case DType::kFloat8E5M2: return ComputeItemT<KvKind::kE5M2>(a, it, sc);
    case DType::kFloat16: break;  // rejected by validation
  }
  RPA_CHECK(false && "unsupported kv_cache dtype");
}

// Combines the partial states of one split (seq, kv head, rows) into the output. A chunk
// that saw no visible token has max -inf and weight 0; it is skipped, so an empty chunk
// never turns the result into NaN.
void MergePartials(const AttentionKernelArgs& a, const AttentionMerge& mg, Scratch& sc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const AttentionPlan& plan = *a.plan;
  const int64_t D = plan.shape.head_dim;
  const int64_t G = plan.shape.num_q_heads / plan.shape.num_kv_heads;
  const int64_t Mh = (mg.row_end - mg.row_begin) * G;
  const int64_t M = Mh * (mg.head_end - mg.head_begin);
  const float* base = a.partials + mg.first_partial * plan.partial_stride;
  for (int64_t m = 0; m < M; ++m) {
    float gmax = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < mg.num_partials; ++c) {
      gmax = std::max(gmax, base[c * plan.partial_stride + M * D + m]);
    }
    float* acc = sc.acc;
    std::fill(acc, acc + D, 0.0f);
    float sum = 0.0f;
    for (int c = 0; c < mg.num_partials; ++c) {
      const float* slot = base + c * plan.partial_stride;
      const float cmax = slot[M * D + m];
      if (cmax == -std::numeric_limits<float>::infinity()) continue;
      const float w = std::exp(cmax - gmax);
      sum += w * slot[M * D + M + m];
      const auto vw = hn::Set(df, w);
      const float* src = slot + m * D;
      int64_t d = 0;
      for (; d + static_cast<int64_t>(N) <= D; d += N) {
        hn::StoreU(hn::MulAdd(vw, hn::LoadU(df, src + d), hn::LoadU(df, acc + d)), df, acc + d);
      }
      for (; d < D; ++d) acc[d] += w * src[d];
    }
    const int64_t mh = m % Mh;
    const int64_t r = mg.row_begin + mh / G, head = (mg.head_begin + m / Mh) * G + mh % G;
    const float f = Normalizer(gmax, sum, a.sinks ? a.sinks + head : nullptr, a.out_scale);
    StoreOutput(df, acc, f, a.output.dtype, static_cast<size_t>(D), OutputRow(a, r, head));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {

HWY_EXPORT(ComputeItem);
HWY_EXPORT(MergePartials);

float KvDecodeFactor(DType cache_dtype) {
  return cache_dtype == DType::kFloat8E4M3FN ? 256.0f : 1.0f;
}

void RunAttentionKernel(const AttentionKernelArgs& args) {
  const AttentionPlan& plan = *args.plan;
  const int64_t max_m = plan.max_queries_per_item;
  ThreadPool& pool = ThreadPool::Global();
  // Scratch lives per worker thread and only grows, so steady-state calls allocate nothing.
  auto scratch = [&]() -> attention_detail::Scratch& {
    thread_local attention_detail::Scratch sc;
    sc.Prepare(max_m, plan.shape.head_dim);
    return sc;
  };
  {
    std::atomic<size_t> next{0};
    const size_t n = plan.items.size();
    pool.Run(plan.num_workers, [&](int) {
      attention_detail::Scratch& sc = scratch();
      for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
           i = next.fetch_add(1, std::memory_order_relaxed)) {
        HWY_DYNAMIC_DISPATCH(ComputeItem)(args, plan.items[i], sc);
      }
    });
  }
  if (plan.merges.empty()) return;
  std::atomic<size_t> next{0};
  const size_t n = plan.merges.size();
  pool.Run(plan.num_workers, [&](int) {
    attention_detail::Scratch& sc = scratch();
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      HWY_DYNAMIC_DISPATCH(MergePartials)(args, plan.merges[i], sc);
    }
  });
}

}  // namespace rpa
#endif  // HWY_ONCE
