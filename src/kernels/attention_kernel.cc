// The ragged paged attention kernel: one work item (sequence, KV heads, query rows, KV range)
// at a time, SIMD over head_dim, dispatched per target with Highway.
//
// Memory traffic. Decode attention is a stream over the KV cache: every K and V element of
// the context is read once per step and used by the Mh = rows * G queries of its KV head,
// so each byte does 2 * Mh FLOPs. Queries and accumulators (Mh x D f32 per head) and one
// tile of logits stay in L1/L2.
//
// Tiling. The KV range is walked in tiles of kTile = 64 tokens gathered through the page
// table (any page size, 1 included). Per tile and head:
//   S[m, t] = q_m . K_t                        (q_m pre-scaled by sm_scale*k_scale*q_scale)
//   soft cap, causal / window mask, online softmax update (f32, running max and sum)
//   acc[m, :] = acc[m, :] * alpha_m + sum_t P[m, t] V_t
// Two paths share this loop:
//   direct (Mh <= kDirectMaxM: decode, short rows): fp8 / bf16 are decoded to f32 in
//     registers inside the dot products (one horizontal reduction per query and token) and
//     inside P.V; nothing is written to memory. The cache is prefetched in software: the
//     next head's lines in one burst, or for single-head items the next tile spread over
//     the compute (see stream_tiles in ComputeItemT).
//   wide (Mh > kDirectMaxM: prefill row tiles, large G): the tile is decoded once into f32
//     scratch and the queries sit in SIMD lanes (see WideOuterBlock): no reductions.
// An item covers a range of KV heads, so each token's slot (the K and V of those heads,
// adjacent in the cache) is read front to back and a page is one contiguous stream.
//
// Numerics: f32 logits, f32 softmax, f32 P.V, one rounding at the output. The scalar tail
// (D not a multiple of the vector width) uses the same formulas one lane at a time.
// The fast fp8 decodes do not special-case NaN/Inf codes (e4m3fn 0x7F reads as 480, e5m2
// inf/NaN pass through the f16 conversion): the cache holds quantize_kv output, which is
// always finite, and positions at or past kv_len (where tests put NaN) are never read.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention_kernel.h"
#include "numerics/scalar_codec.h"
#include "util/aligned_buffer.h"
#include "util/error.h"
#include "util/float_env.h"
#include "util/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/softmax_exp-inl.h"
#include "numerics/simd_codec-inl.h"

// Per-target non-SIMD helpers live once (outside the per-target guard).
#ifndef RPA_KERNELS_ATTENTION_KERNEL_COMMON_
#define RPA_KERNELS_ATTENTION_KERNEL_COMMON_
namespace rpa {
namespace attention_detail {

constexpr int kTile = kAttentionTileTokens;
constexpr int kDirectMaxM = 8;  // above this many queries, tiles are decoded to f32 once
// Direct items reading at most this many K/V bytes per token stream the next tile into L2
// instead of bursting each next head into L1 (see stream_tiles).
constexpr int64_t kStreamMaxSlotBytes = 1024;
constexpr int kMaxLanes = 64;   // f32 lanes of the widest vector any Highway target has (2048 bits)

// Prefetches a run of cache lines (the next tile's page slots) into L2 a few at a time,
// called from inside the compute loops, so the memory stream overlaps the compute instead
// of arriving in one burst larger than L1.
struct LineStream {
  const uint8_t* const* rows = nullptr;  // the tokens' slots
  int tokens = 0;
  int lines_per_token = 0;
  int per_step = 0;  // lines per Step()
  int t = 0, line = 0;

  // Spreads `count` slots of `lines` lines each over about `steps` calls of Step().
  void Start(const uint8_t* const* slots, int count, int lines, int steps) {
    rows = slots, tokens = count, lines_per_token = lines, t = 0, line = 0;
    per_step = (count * lines + steps - 1) / std::max(steps, 1);
  }
  void Step() {
    for (int i = 0; i < per_step && t < tokens; ++i) {
      __builtin_prefetch(rows[t] + 64 * line, 0, 2);  // into L2 (x86: prefetcht1)
      if (++line == lines_per_token) line = 0, ++t;
    }
  }
  void Finish() {
    while (t < tokens) Step();
  }
};

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
  float* kf;     // [kTile, D] decoded K tile (wide items only)
  float* vf;     // [kTile, D] decoded V tile
  // Wide items (more than kDirectMaxM queries per KV head) keep queries in SIMD lanes: each
  // head's Mh queries are padded to Mp columns, a multiple of the target's vector width.
  float* qt;     // [H, D, Mp] transposed queries
  float* acct;   // [H, D, Mp] transposed output accumulators
  float* st;     // [kTile, Mp] logits of one head, token-major, then softmax weights
  float* wmx;    // [H, Mp] running max
  float* wsum;   // [H, Mp] running denominator
  float* walpha;  // [Mp]
  int32_t* wlo;  // [Mp] visible range per query column (empty for padding columns)
  int32_t* whi;

  // Columns of all heads' padded query blocks: H <= M / (kDirectMaxM + 1) heads of a wide
  // item, each padded by at most kMaxLanes - 1 columns.
  static int64_t WideColumns(int64_t max_m) {
    return max_m + (kMaxLanes - 1) * (max_m / (kDirectMaxM + 1) + 1);
  }

  void Prepare(int64_t max_m, int64_t d) {
    // Each region is rounded up to 16 floats so every one starts 64-byte aligned.
    auto up = [](int64_t n) { return (n + 15) / 16 * 16; };
    const int64_t md = up(max_m * d), ms = up(max_m * kTile), m1 = up(max_m),
                  td = up(kTile * d), wc = up(WideColumns(max_m)),
                  mp = (max_m + kMaxLanes - 1) / kMaxLanes * kMaxLanes;
    buf.Reserve(
        static_cast<size_t>(2 * md + ms + 3 * m1 + 2 * td + 2 * wc * d + kTile * mp + 2 * wc + mp));
    float* p = buf.data();
    q = p, p += md;
    acc = p, p += md;
    s = p, p += ms;
    mx = p, p += m1;
    sum = p, p += m1;
    alpha = p, p += m1;
    kf = p, p += td;
    vf = p, p += td;
    qt = p, p += wc * d;
    acct = p, p += wc * d;
    st = p, p += kTile * mp;
    wmx = p, p += wc;
    wsum = p, p += wc;
    walpha = p;
    range.Reserve(static_cast<size_t>(2 * max_m + 2 * mp));
    lo = range.data();
    hi = lo + max_m;
    wlo = hi + max_m;
    whi = wlo + mp;
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
using attention_detail::kStreamMaxSlotBytes;
using attention_detail::kTile;
using attention_detail::LineStream;
using attention_detail::Scratch;
using DF = hn::ScalableTag<float>;

// How K/V elements are stored where the kernel reads them. fp8 is read by the biased
// decodes (value * 2^-bias, see simd_codec-inl.h); KvDecodeScalesFor undoes the bias.
enum class KvKind { kF32, kBF16, kE4M3Biased, kE5M2Biased };

template <KvKind kKind>
HWY_INLINE hn::Vec<DF> LoadKv(DF df, const uint8_t* row, size_t d) {
  if constexpr (kKind == KvKind::kF32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + d);
  } else if constexpr (kKind == KvKind::kBF16) {
    return DecodeBF16(df, reinterpret_cast<const uint16_t*>(row) + d);
  } else if constexpr (kKind == KvKind::kE4M3Biased) {
    return DecodeE4M3FNBiased(df, row + d);
  } else {
    return DecodeE5M2Biased(df, row + d);
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
  } else if constexpr (kKind == KvKind::kE4M3Biased) {
    static_assert(kE4M3FNBiasExp == 120 && kE5M2BiasExp == 112);
    return E4M3FNToF32(row[d]) * 0x1p-120f;  // exact (a power of two), as the vector decode
  } else {
    return E5M2ToF32(row[d]) * 0x1p-112f;
  }
}

// ---------------------------------------------------------------------------------------
// Group decoding. The hot loops consume head_dim in groups of kGroupVecs = 4 vectors
// (4 * Lanes elements).
//   bf16: InterleaveLower/Upper(0, x) as u32 = x << 16, the f32 itself (1 op per vector).
//         Interleaves work within 128-bit blocks, so a group's lanes come out in a fixed
//         permuted order. Dot products do not care as long as q uses the same order, and
//         P.V accumulates in it; so queries are permuted once on load and accumulators
//         un-permuted once on store (GroupPerm). Elements past the last whole group use the
//         plain per-vector decode, in natural order.
//   fp8:  the biased decode per vector, in natural order: sign-extend each code to 32 bits,
//         shift, mask (DecodeE4M3FNBiased: value * 2^-120). 3 ops per 8 codes on AVX2, all
//         cheap; the f16 route it replaced (byte interleaves, shift, mask, lane extracts,
//         vcvtph2ps from registers) cost ~3.0 vs ~1.9 ns per 32 L1-resident codes here,
//         because vcvtph2ps and vextracti128 from a register run at one per cycle.
// The scalar target uses the plain decode throughout.
// Measured and not kept: an AVX3_DL decode of fp8 through two 128-byte tables (vpermi2b
// for the high and low bytes of each value's bf16, then bf16 -> f32 by shift / mask: 9
// instructions per 64 codes instead of 12, exact for every code). A decode+FMA loop ran
// 10-25% faster, but the kernel only 0-11% on cache-resident KV and within noise on
// DRAM: the kernel runs at 50-70% of such a loop's speed (reductions, softmax, prefetch),
// so the decode's instruction count is not its only limit.
// Nor AVX512-BF16 logits: vdpbf16ps does two products per lane, but on this CPU one costs
// as much as four f32 FMAs (12 independent chains: 0.82 vs 0.20 ns per instruction), so
// per product it is 2x slower. QK on it (bf16 queries, fp8 K table-decoded to bf16) made
// the cache-resident 32/8/128 fp8 decode 9% slower, 8/8/128 ~11% faster (one run).
// Nor staging each fp8 tile as f16 in the scratch (6 uops and two stores per 64 codes)
// for the loops to read with vcvtph2ps from memory, which costs next to nothing on the
// vector ports here (one conversion plus one FMA: 0.19 ns per pair, as an FMA alone): a
// G = 1 decode+FMA loop ran 14% faster (4.34 -> 3.75 ns per 64 L1-resident codes), the
// kernel slower (8/8/128 ctx 16K 20.5 -> 23.4 ms, resident 16.1 -> 19.0; 4/1/256 ctx
// 16K 6.5 -> 7.8; 9/3/64 within noise).
constexpr int kGroupVecs = 4;
#if HWY_TARGET == HWY_SCALAR
constexpr bool kInterleaved = false;
#else
constexpr bool kInterleaved = true;
#endif

template <KvKind kKind>
HWY_INLINE void DecodeGroup(DF df, const uint8_t* row, size_t d, hn::Vec<DF> (&out)[kGroupVecs]) {
  const size_t N = hn::Lanes(df);
  if constexpr (kKind != KvKind::kBF16 || !kInterleaved) {
    for (int v = 0; v < kGroupVecs; ++v) out[v] = LoadKv<kKind>(df, row, d + v * N);
  }
#if HWY_TARGET != HWY_SCALAR
  else if constexpr (kKind == KvKind::kBF16) {
    const hn::Repartition<uint16_t, DF> du16;
    const auto z = hn::Zero(du16);
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + d;
    for (int h = 0; h < 2; ++h) {
      const auto x = hn::LoadU(du16, p + h * 2 * N);
      out[2 * h] = hn::BitCast(df, hn::InterleaveLower(du16, z, x));
      out[2 * h + 1] = hn::BitCast(df, hn::InterleaveUpper(du16, z, x));
    }
  }
#endif
}

// perm[i] = the natural index (within a group) of the element DecodeGroup puts at position
// i, found by decoding a probe group whose element j decodes to a value that identifies j;
// inverse[perm[i]] = i. Both as int32 lane indices, for gathers.
template <KvKind kKind>
struct GroupPerm {
  static constexpr size_t kMaxGroup = kGroupVecs * HWY_MAX_BYTES / sizeof(float);
  alignas(HWY_MAX_BYTES) int32_t perm[kMaxGroup];
  alignas(HWY_MAX_BYTES) int32_t inverse[kMaxGroup];
  bool identity = true;
  GroupPerm() {
    const DF df;
    const size_t G = kGroupVecs * hn::Lanes(df);
    alignas(64) uint8_t probe[kGroupVecs * HWY_MAX_BYTES];
    float probe_value[kMaxGroup];
    for (size_t j = 0; j < G; ++j) {
      if constexpr (kKind == KvKind::kF32) {
        const float f = static_cast<float>(j);
        std::memcpy(probe + 4 * j, &f, 4);
      } else if constexpr (kKind == KvKind::kBF16) {
        const uint16_t b = F32ToBF16(static_cast<float>(j));  // exact: j < 256
        std::memcpy(probe + 2 * j, &b, 2);
      } else {
        probe[j] = static_cast<uint8_t>(j);  // codes 0..63: distinct, finite values
      }
      probe_value[j] = LoadKvScalar<kKind>(probe, j);
    }
    hn::Vec<DF> out[kGroupVecs];
    DecodeGroup<kKind>(df, probe, 0, out);
    alignas(64) float got[kMaxGroup];
    for (int v = 0; v < kGroupVecs; ++v) hn::StoreU(out[v], df, got + v * hn::Lanes(df));
    for (size_t i = 0; i < G; ++i) {
      size_t j = 0;
      while (j + 1 < G && probe_value[j] != got[i]) ++j;
      perm[i] = static_cast<int32_t>(j);
      inverse[j] = static_cast<int32_t>(i);
      identity = identity && j == i;
    }
  }
};

template <KvKind kKind>
const GroupPerm<kKind>& Perm() {
  static const GroupPerm<kKind> perm;
  return perm;
}

// dst[i] = src[index[i]] over the whole groups of a row of D floats (a gather per vector:
// once per query row and per output row, a scalar loop here was ~10% of a short prefill);
// the rest is copied.
HWY_INLINE void GatherGroups(DF df, const int32_t* index, bool identity, const float* src,
                             size_t D, float* dst) {
  const size_t N = hn::Lanes(df);
  const hn::RebindToSigned<DF> di;
  size_t d = 0;
  if (!identity) {
    for (; d + kGroupVecs * N <= D; d += kGroupVecs * N) {
      for (int v = 0; v < kGroupVecs; ++v) {
        hn::StoreU(hn::GatherIndex(df, src + d, hn::Load(di, index + v * N)), df, dst + d + v * N);
      }
    }
  }
  for (; d < D; ++d) dst[d] = src[d];
}

// dst[i] = src[perm(i)]: a natural-order row into DecodeGroup's order.
template <KvKind kKind>
HWY_INLINE void PermuteRow(DF df, const float* src, size_t D, float* dst) {
  const GroupPerm<kKind>& p = Perm<kKind>();
  GatherGroups(df, p.perm, p.identity, src, D, dst);
}

// The natural index of the element PermuteRow puts at position d of a row of D floats.
template <KvKind kKind>
HWY_INLINE size_t PermutedSource(DF df, size_t d, size_t D) {
  const GroupPerm<kKind>& p = Perm<kKind>();
  const size_t G = kGroupVecs * hn::Lanes(df);
  if (p.identity || d >= D / G * G) return d;
  return d / G * G + static_cast<size_t>(p.perm[d % G]);
}

// The inverse: dst[perm(i)] = src[i].
template <KvKind kKind>
HWY_INLINE void UnpermuteRow(DF df, const float* src, size_t D, float* dst) {
  const GroupPerm<kKind>& p = Perm<kKind>();
  GatherGroups(df, p.inverse, p.identity, src, D, dst);
}

#if HWY_TARGET != HWY_SCALAR
// Per 128-bit block, the partial sums [a, b, c, d]: lane i of every block holds part of the
// i-th argument's sum (the first half of Sum4).
HWY_INLINE hn::Vec<DF> BlockSums4(DF df, hn::Vec<DF> a, hn::Vec<DF> b, hn::Vec<DF> c,
                                  hn::Vec<DF> d) {
  // Per block: ab = [a0+a2, b0+b2, a1+a3, b1+b3], likewise cd.
  const auto ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));
  const auto cd = hn::Add(hn::InterleaveLower(df, c, d), hn::InterleaveUpper(df, c, d));
  const hn::Repartition<uint64_t, DF> du64;
  const auto ab64 = hn::BitCast(du64, ab), cd64 = hn::BitCast(du64, cd);
  return hn::Add(hn::BitCast(df, hn::InterleaveLower(du64, ab64, cd64)),
                 hn::BitCast(df, hn::InterleaveUpper(du64, ab64, cd64)));
}
#endif

// out[0..3] = the lane sums of a, b, c, d. A transposing add tree: 3.25 ops per sum instead
// of a full reduction (and broadcast) per vector.
HWY_INLINE void Sum4(DF df, hn::Vec<DF> a, hn::Vec<DF> b, hn::Vec<DF> c, hn::Vec<DF> d,
                     float* out) {
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  out[0] = hn::GetLane(a), out[1] = hn::GetLane(b), out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(d);
#else
  const auto v = BlockSums4(df, a, b, c, d);
#if HWY_TARGET <= HWY_AVX3
  const hn::Half<DF> d8;
  const auto v8 = hn::Add(hn::LowerHalf(d8, v), hn::UpperHalf(d8, v));
  const hn::Half<decltype(d8)> d4;
  hn::StoreU(hn::Add(hn::LowerHalf(d4, v8), hn::UpperHalf(d4, v8)), d4, out);
#elif HWY_TARGET == HWY_AVX2
  const hn::Half<DF> d4;
  hn::StoreU(hn::Add(hn::LowerHalf(d4, v), hn::UpperHalf(d4, v)), d4, out);
#else
  // The remaining targets have one 128-bit block (NEON, SSE4, EMU128; the scalable SVE and
  // RVV targets are disabled, see CMakeLists.txt): v is the four sums.
  static_assert(HWY_MAX_BYTES == 16, "Sum4: add the blocks of wider vectors first");
  hn::StoreU(v, df, out);
#endif
#endif
}

// s[j * kTile + t] = the lane sum of acc[j][t], j < kQ <= 4, t < 4: Sum4 for up to four
// queries at once. Their per-block partials are added across blocks by block shuffles of
// all queries together instead of halving one query's vector at a time, and stored four
// logits per instruction; the sums are added in Sum4's order, so the logits are the same.
// One query keeps Sum4 (halving its own vector is cheaper than shuffling three zeros).
template <int kQ>
HWY_INLINE void Sum4Queries(DF df, const hn::Vec<DF> (&acc)[kQ][4], float* s) {
  static_assert(kQ >= 1 && kQ <= 4);
  if constexpr (kQ == 1) {
    Sum4(df, acc[0][0], acc[0][1], acc[0][2], acc[0][3], s);
  } else {
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
    hn::Vec<DF> v[4];
    for (int j = 0; j < kQ; ++j) v[j] = BlockSums4(df, acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
    for (int j = kQ; j < 4; ++j) v[j] = hn::Zero(df);
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // Blocks 0+2 and 1+3 of two queries side by side, then the two halves of each.
    const __m512 p01 = _mm512_add_ps(_mm512_shuffle_f32x4(v[0].raw, v[1].raw, 0x44),
                                     _mm512_shuffle_f32x4(v[0].raw, v[1].raw, 0xEE));
    const __m512 p23 = _mm512_add_ps(_mm512_shuffle_f32x4(v[2].raw, v[3].raw, 0x44),
                                     _mm512_shuffle_f32x4(v[2].raw, v[3].raw, 0xEE));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, 0x88),
                                   _mm512_shuffle_f32x4(p01, p23, 0xDD));
    _mm_storeu_ps(s, _mm512_castps512_ps128(r));
    _mm_storeu_ps(s + kTile, _mm512_extractf32x4_ps(r, 1));
    if constexpr (kQ > 2) _mm_storeu_ps(s + 2 * kTile, _mm512_extractf32x4_ps(r, 2));
    if constexpr (kQ > 3) _mm_storeu_ps(s + 3 * kTile, _mm512_extractf32x4_ps(r, 3));
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
    const hn::Half<DF> d4;
    for (int j = 0; j < kQ; j += 2) {
      const auto r = hn::Add(hn::ConcatLowerLower(df, v[j + 1], v[j]),
                             hn::ConcatUpperUpper(df, v[j + 1], v[j]));
      hn::StoreU(hn::LowerHalf(d4, r), d4, s + j * kTile);
      if (j + 1 < kQ) hn::StoreU(hn::UpperHalf(d4, r), d4, s + (j + 1) * kTile);
    }
#else
    for (int j = 0; j < kQ; ++j) {
      Sum4(df, acc[j][0], acc[j][1], acc[j][2], acc[j][3], s + j * kTile);
    }
#endif
  }
}

// sum over e in [d, D) of q[e] * K[e]: the elements past the last whole vector. Out of line:
// inlined, its loop setup ran (and cost ~20% of QK at D = 128) even when the range is empty.
template <KvKind kKind>
HWY_NOINLINE float TailDot(const float* q, const uint8_t* row, size_t d, size_t D) {
  float dot = 0.0f;
  for (size_t e = d; e < D; ++e) dot += q[e] * LoadKvScalar<kKind>(row, e);
  return dot;
}

// S[j, t] = q_j . K_t for kQ queries (rows of q, stride D, permuted like the K groups) and
// kT tokens. kQ * kT accumulators are independent FMA chains that hide the FMA latency.
// Measured and not kept: for the natural-order decodes (fp8, f32), one vector at a time
// across the kT tokens (one decoded vector live instead of a group, so kQ = kT = 4 fits
// AVX2's registers but for one): 0.95-0.98x on cache-resident 32/8/128, 4/1/256 and
// 9/3/64 fp8, 1.00-1.02x at 8/8/128 (1 thread, calls alternated). Nor, at G = 1 (four
// chains, each four FMAs deep per group), two accumulators per token (eight chains) here
// and per token parity in PvGroup: cache-resident 8/8/128 ctx 4K 0.97x (fp8), 0.91x (bf16).
template <KvKind kKind, int kQ, int kT>
HWY_INLINE void DotBlock(DF df, const float* HWY_RESTRICT q, size_t D,
                         const uint8_t* const* rows, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> acc[kQ][kT];
  for (int j = 0; j < kQ; ++j)
    for (int t = 0; t < kT; ++t) acc[j][t] = hn::Zero(df);
  size_t d = 0;
  for (; d + kGroupVecs * N <= D; d += kGroupVecs * N) {
    for (int t = 0; t < kT; ++t) {
      hn::Vec<DF> k[kGroupVecs];
      DecodeGroup<kKind>(df, rows[t], d, k);
      for (int j = 0; j < kQ; ++j) {
        for (int v = 0; v < kGroupVecs; ++v) {
          acc[j][t] = hn::MulAdd(hn::LoadU(df, q + j * D + d + v * N), k[v], acc[j][t]);
        }
      }
    }
  }
  for (; d + N <= D; d += N) {
    for (int t = 0; t < kT; ++t) {
      const auto k = LoadKv<kKind>(df, rows[t], d);
      for (int j = 0; j < kQ; ++j) acc[j][t] = hn::MulAdd(hn::LoadU(df, q + j * D + d), k, acc[j][t]);
    }
  }
  if constexpr (kT == 4) {
    Sum4Queries<kQ>(df, acc, s);
  } else {
    for (int j = 0; j < kQ; ++j)
      for (int t = 0; t < kT; ++t) s[j * kTile + t] = hn::GetLane(hn::SumOfLanes(df, acc[j][t]));
  }
  if (d < D) {
    for (int j = 0; j < kQ; ++j)
      for (int t = 0; t < kT; ++t) s[j * kTile + t] += TailDot<kKind>(q + j * D, rows[t], d, D);
  }
}

template <KvKind kKind, int kQ>
HWY_INLINE void DotTile(DF df, const float* q, size_t D, const uint8_t* const* rows, int n,
                        float* s, LineStream* ls) {
  int t = 0;
  for (; t + 4 <= n; t += 4) {
    DotBlock<kKind, kQ, 4>(df, q, D, rows + t, s + t);
    if (ls != nullptr) ls->Step();
  }
  for (; t < n; ++t) DotBlock<kKind, kQ, 1>(df, q, D, rows + t, s + t);
}

// S[m, 0:n) for all M queries.
template <KvKind kKind>
HWY_INLINE void QkTile(DF df, const float* q, int64_t M, size_t D, const uint8_t* const* rows,
                       int n, float* s, LineStream* ls) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) DotTile<kKind, 4>(df, q + m * D, D, rows, n, s + m * kTile, ls);
  switch (M - m) {
    case 3: DotTile<kKind, 3>(df, q + m * D, D, rows, n, s + m * kTile, ls); break;
    case 2: DotTile<kKind, 2>(df, q + m * D, D, rows, n, s + m * kTile, ls); break;
    case 1: DotTile<kKind, 1>(df, q + m * D, D, rows, n, s + m * kTile, ls); break;
    default: break;
  }
}

// acc[j, d : d + kGroupVecs*N) += sum_t P[j, t] V_t[same] for kQ queries, one group;
// P[j, t] = p[j * kTile + t].
// On 16-register targets kQ = 4 needs 16 accumulators + 4 decoded + 1 weight, so GCC
// spills five accumulators. Measured and not kept: the group in two half passes (8
// accumulators, each V row read twice, weights broadcast twice), 0.91-0.98x on
// cache-resident 32/8/128 and 4/1/256, bf16 and fp8 (1 thread, calls alternated); nor,
// for the natural-order decodes, groups of 3 vectors (12 accumulators, no spill):
// 0.88-0.97x there, 1.00x at 9/3/64 (fp8).
template <KvKind kKind, int kQ>
HWY_INLINE void PvGroup(DF df, const float* HWY_RESTRICT p, const uint8_t* const* rows, int n,
                        float* HWY_RESTRICT acc, size_t D, size_t d, LineStream* ls) {
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> a[kQ][kGroupVecs];
  for (int j = 0; j < kQ; ++j)
    for (int v = 0; v < kGroupVecs; ++v) a[j][v] = hn::LoadU(df, acc + j * D + d + v * N);
  for (int t = 0; t < n; ++t) {
    hn::Vec<DF> x[kGroupVecs];
    DecodeGroup<kKind>(df, rows[t], d, x);
    for (int j = 0; j < kQ; ++j) {
      const auto w = hn::Set(df, p[j * kTile + t]);
      for (int v = 0; v < kGroupVecs; ++v) a[j][v] = hn::MulAdd(w, x[v], a[j][v]);
    }
    if (ls != nullptr && (t & 3) == 3) ls->Step();
  }
  for (int j = 0; j < kQ; ++j)
    for (int v = 0; v < kGroupVecs; ++v) hn::StoreU(a[j][v], df, acc + j * D + d + v * N);
}

template <KvKind kKind, int kQ>
HWY_INLINE void PvRows(DF df, const float* p, const uint8_t* const* rows, int n, float* acc,
                       size_t D, LineStream* ls) {
  const size_t N = hn::Lanes(df);
  size_t d = 0;
  for (; d + kGroupVecs * N <= D; d += kGroupVecs * N) {
    PvGroup<kKind, kQ>(df, p, rows, n, acc, D, d, ls);
  }
  for (; d + N <= D; d += N) {
    hn::Vec<DF> a[kQ];
    for (int j = 0; j < kQ; ++j) a[j] = hn::LoadU(df, acc + j * D + d);
    for (int t = 0; t < n; ++t) {
      const auto x = LoadKv<kKind>(df, rows[t], d);
      for (int j = 0; j < kQ; ++j) a[j] = hn::MulAdd(hn::Set(df, p[j * kTile + t]), x, a[j]);
    }
    for (int j = 0; j < kQ; ++j) hn::StoreU(a[j], df, acc + j * D + d);
  }
  for (; d < D; ++d) {
    for (int t = 0; t < n; ++t) {
      const float x = LoadKvScalar<kKind>(rows[t], d);
      for (int j = 0; j < kQ; ++j) acc[j * D + d] += p[j * kTile + t] * x;
    }
  }
}

template <KvKind kKind>
HWY_INLINE void PvTile(DF df, const float* p, int64_t M, const uint8_t* const* rows, int n,
                       float* acc, size_t D, LineStream* ls = nullptr) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    PvRows<kKind, 4>(df, p + m * kTile, rows, n, acc + m * D, D, ls);
  }
  switch (M - m) {
    case 3: PvRows<kKind, 3>(df, p + m * kTile, rows, n, acc + m * D, D, ls); break;
    case 2: PvRows<kKind, 2>(df, p + m * kTile, rows, n, acc + m * D, D, ls); break;
    case 1: PvRows<kKind, 1>(df, p + m * kTile, rows, n, acc + m * D, D, ls); break;
    default: break;
  }
}

// Decodes n rows of D elements into f32 rows of the scratch (stride D), in the same
// (permuted) order the direct path uses, so either path pairs with the permuted queries.
template <KvKind kKind>
HWY_INLINE void DecodeTile(DF df, const uint8_t* const* rows, int n, size_t D, float* out) {
  const size_t N = hn::Lanes(df);
  for (int t = 0; t < n; ++t) {
    size_t d = 0;
    for (; d + kGroupVecs * N <= D; d += kGroupVecs * N) {
      hn::Vec<DF> x[kGroupVecs];
      DecodeGroup<kKind>(df, rows[t], d, x);
      for (int v = 0; v < kGroupVecs; ++v) hn::StoreU(x[v], df, out + t * D + d + v * N);
    }
    for (; d + N <= D; d += N) hn::StoreU(LoadKv<kKind>(df, rows[t], d), df, out + t * D + d);
    for (; d < D; ++d) out[t * D + d] = LoadKvScalar<kKind>(rows[t], d);
  }
}

// ---------------------------------------------------------------------------------------
// The soft cap of §2: cap * tanh(x / cap).
HWY_INLINE hn::Vec<DF> SoftCap(DF df, hn::Vec<DF> x, float cap) {
  const auto c = hn::Set(df, cap);
  return hn::Mul(c, hn::Tanh(df, hn::Div(x, c)));
}

// What the softmax does to the raw logits q'.k' on the way in and to the weights it leaves
// for P.V (see KvDecodeScales: factors that undo the K and V decodes' bias, 1 for bf16).
// Without a cap the raw logits stay as they are in the tile (masked ones -inf): their max
// is scaled once, and exp takes raw * logit - max in one fused step, so the factor costs no
// pass over the tile (bf16: factor 1, the same roundings as x - max).
struct SoftmaxScales {
  float logit = 1.0f;  // logit = raw * logit, then the soft cap
  bool has_cap = false;
  float cap = 0.0f;
  float weight = 1.0f;  // weight left for P.V = p * weight; the running sum adds p
  // The factor from what the tile holds after masking to logits: 1 once capped.
  float stored() const { return has_cap ? 1.0f : logit; }
};

// Online softmax over one tile: masks S[m, 0:kTile) to the query's visible positions
// [lo[m], hi[m]) (absolute), updates the running max / sum and leaves the weights P in s.
// alpha[m] is the factor the accumulator row must be multiplied by (1 when the max did not
// move, 0 before the first visible token).
HWY_INLINE void SoftmaxTile(DF df, int64_t M, int32_t t0, int n, const int32_t* lo,
                            const int32_t* hi, const SoftmaxScales& sc, float* s, float* mx,
                            float* sum, float* alpha) {
  const size_t N = hn::Lanes(df);
  const auto logit = hn::Set(df, sc.logit), weight = hn::Set(df, sc.weight);
  const auto stored = hn::Set(df, sc.stored());
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
    // A tile visible whole (most tiles of a long context) needs no mask: S stays as
    // computed unless capped.
    const bool whole = l == t0 && h == t0 + kTile;
    auto vmax = neg_inf;
    for (int t = 0; t < kTile; t += static_cast<int>(N)) {
      auto x = hn::LoadU(df, sm + t);
      if (sc.has_cap) x = SoftCap(df, hn::Mul(x, logit), sc.cap);
      if (!whole) {
        const auto pos = hn::Iota(di, t0 + t);
        const auto vis = hn::And(hn::Lt(hn::Set(di, l - 1), pos), hn::Lt(pos, hn::Set(di, h)));
        x = hn::IfThenElse(hn::RebindMask(df, vis), x, neg_inf);
      }
      if (sc.has_cap || !whole) hn::StoreU(x, df, sm + t);
      vmax = hn::Max(vmax, x);
    }
    const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax)) * sc.stored();
    const float new_max = std::max(mx[m], tile_max);
    // exp(-inf) = 0: the first visible tile zeroes the (empty) accumulator.
    alpha[m] = mx[m] == new_max ? 1.0f : std::exp(mx[m] - new_max);
    const auto vnew = hn::Set(df, new_max);
    auto vsum = hn::Zero(df);
    for (int t = 0; t < kTile; t += static_cast<int>(N)) {
      // Masked lanes are -inf, which ExpNonPositive maps to exactly 0.
      const auto p = ExpNonPositive(df, hn::MulSub(hn::LoadU(df, sm + t), stored, vnew));
      hn::StoreU(hn::Mul(p, weight), df, sm + t);
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
// Wide items: queries in SIMD lanes. With more than kDirectMaxM queries per KV head (prefill
// row tiles, large G) each K/V tile is decoded to f32 once and the logits are computed
// token-major, S^T[t, :] = sum_d K[t, d] * Q^T[d, :]: a broadcast K element times a vector of
// queries, so no dot product needs a horizontal reduction (the direct path pays one per
// query and token). The softmax then runs down the token rows one vector of queries at a
// time, and P.V is transposed too: O^T[d, :] += V[t, d] * P^T[t, :], a broadcast V element
// times a vector of weights, into accumulators [D, Mp] that go back to rows once per item.
// Against P.V on rows (PvTile over the decoded tile, broadcasting P^T[t, j]; on AVX2 its
// 4 x 4 accumulators spill) the prefill ran 1.08-1.24x faster (q_len 512, ctx 512 / 2K,
// bf16 and fp8, 2 cores, calls alternated), with the same bits (same operations in the
// same order per output element).

// Register blocks: kWideT rows (tokens of S^T, head_dim elements of O^T) x kWideV vectors of
// query columns, plus kWideV loaded vectors and one broadcast, fill the register file:
// 4 x 3 + 3 + 1 = 16 on SSE/AVX2, 8 x 2 + 2 + 1 of AVX-512's and NEON's 32. On AVX2 the
// 12 independent FMA chains of 4 x 3 beat 4 x 2's eight (two FMAs per cycle of latency 4
// leave no slack at eight): prefill 1.03-1.10x (q_len 512, ctx 512 / 2K / 8K, bf16 and fp8).
static_assert(HWY_MAX_BYTES / sizeof(float) <= attention_detail::kMaxLanes);
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kWideT = 4;
constexpr int kWideV = 3;
#else
constexpr int kWideT = 8;
constexpr int kWideV = 2;
#endif

// Calls block(c, kV) for column blocks [c, c + kV * N) covering [0, Mp) (Mp a multiple of
// N): blocks of kWideV vectors, then the remainder in one block.
template <class Block>
HWY_INLINE void ForColumnBlocks(size_t N, size_t Mp, const Block& block) {
  size_t c = 0;
  for (; c + kWideV * N <= Mp; c += kWideV * N) block(c, std::integral_constant<int, kWideV>());
  if constexpr (kWideV > 2) {
    if (c + 2 * N <= Mp) {
      block(c, std::integral_constant<int, 2>());
      c += 2 * N;
    }
  }
  if (c < Mp) block(c, std::integral_constant<int, 1>());
}

// The wide path's register block, an outer-product update of kR rows by kV vectors of query
// columns over K steps: c[r, :] = c0[r, :] + sum_{k < K} A[r, k] * b[k, :], where A[r, k] =
// a[r * a_r + k * a_k] is broadcast and b[k, :] (stride Mp) loaded; every (r, v) is one FMA
// chain in k order. c0 = 0 without `scale`, else c[r, :] * scale[:] (the online softmax's
// rescale of the accumulators before a tile's tokens are added).
template <int kR, int kV>
HWY_INLINE void WideOuterBlock(DF df, const float* HWY_RESTRICT a, size_t a_r, size_t a_k,
                               const float* HWY_RESTRICT b, size_t Mp, size_t K,
                               const float* HWY_RESTRICT scale, float* HWY_RESTRICT c) {
  const size_t N = hn::Lanes(df);
  hn::Vec<DF> acc[kR][kV];
  for (int v = 0; v < kV; ++v) {
    const auto sv = scale != nullptr ? hn::Load(df, scale + v * N) : hn::Zero(df);
    for (int r = 0; r < kR; ++r) {
      acc[r][v] = scale != nullptr ? hn::Mul(hn::Load(df, c + r * Mp + v * N), sv) : hn::Zero(df);
    }
  }
  for (size_t k = 0; k < K; ++k) {
    hn::Vec<DF> bv[kV];
    for (int v = 0; v < kV; ++v) bv[v] = hn::Load(df, b + k * Mp + v * N);
    for (int r = 0; r < kR; ++r) {
      const auto x = hn::Set(df, a[r * a_r + k * a_k]);
      for (int v = 0; v < kV; ++v) acc[r][v] = hn::MulAdd(x, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < kR; ++r)
    for (int v = 0; v < kV; ++v) hn::Store(acc[r][v], df, c + r * Mp + v * N);
}

// Logits of tokens [0, n) of the decoded tile against one head's Mp query columns. Rows up to
// the next multiple of kWideT are computed too (kf holds zeros there) and never read.
HWY_INLINE void WideQkTile(DF df, const float* kf, size_t D, const float* qt, size_t Mp, int n,
                           float* st) {
  const size_t N = hn::Lanes(df);
  // st[t, :] = sum_d kf[t, d] * qt[d, :] for kWideT tokens at a time.
  for (int t = 0; t < n; t += kWideT) {
    ForColumnBlocks(N, Mp, [&](size_t c, auto kv) {
      WideOuterBlock<kWideT, decltype(kv)::value>(df, kf + t * D, D, 1, qt + c, Mp, D, nullptr,
                                                  st + t * Mp + c);
    });
  }
}

// acct[d + i, :] = acct[d + i, :] * alpha + sum_{t < n} vf[t, d + i] * st[t, :] for i < kD:
// the running rescale, then one FMA per token in token order, as PvGroup does on rows.
template <int kD>
HWY_INLINE void WidePvRows(DF df, const float* st, size_t Mp, const float* vf, size_t D, int n,
                           const float* alpha, float* acct) {
  ForColumnBlocks(hn::Lanes(df), Mp, [&](size_t c, auto kv) {
    WideOuterBlock<kD, decltype(kv)::value>(df, vf, 1, D, st + c, Mp, static_cast<size_t>(n),
                                            alpha + c, acct + c);
  });
}

// One head's transposed accumulators acct [D, Mp]: rescaled by the tile's alpha and
// advanced by its n tokens (weights st [n, Mp], decoded V rows vf [n, D]).
HWY_INLINE void WidePvTile(DF df, const float* st, size_t Mp, const float* vf, size_t D, int n,
                           const float* alpha, float* acct) {
  size_t d = 0;
  for (; d + kWideT <= D; d += kWideT) {
    WidePvRows<kWideT>(df, st, Mp, vf + d, D, n, alpha, acct + d * Mp);
  }
  for (; d < D; ++d) WidePvRows<1>(df, st, Mp, vf + d, D, n, alpha, acct + d * Mp);
}

// The online softmax of SoftmaxTile, vectorized over query columns: st[t, c] for t < n is
// masked to each column's visible range [lo[c], hi[c]), the running max / sum of every column
// updated, and the weights left in st; alpha[c] rescales the accumulator row of column c.
// A column that has seen nothing yet keeps max -inf and takes 0 as its exponent reference,
// so exp never sees inf - inf.
HWY_INLINE void WideSoftmax(DF df, size_t Mp, int32_t t0, int n, const int32_t* lo,
                            const int32_t* hi, const SoftmaxScales& sc, float* st, float* mx,
                            float* sum, float* alpha) {
  const size_t N = hn::Lanes(df);
  const auto logit = hn::Set(df, sc.logit), weight = hn::Set(df, sc.weight);
  const auto stored = hn::Set(df, sc.stored());
  const hn::RebindToSigned<DF> di;
  const auto neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const auto one = hn::Set(df, 1.0f);
  for (size_t c = 0; c < Mp; c += N) {
    const auto lo_m1 = hn::Sub(hn::LoadU(di, lo + c), hn::Set(di, 1));
    const auto vhi = hn::LoadU(di, hi + c);
    const auto old = hn::Load(df, mx + c);
    // Columns that all see the whole tile (below the causal diagonal) need no mask.
    const bool whole = hn::AllTrue(di, hn::Lt(lo_m1, hn::Set(di, t0))) &&
                       hn::AllTrue(di, hn::Lt(hn::Set(di, t0 + n - 1), vhi));
    auto vmax = neg_inf;  // of the stored values
    for (int t = 0; t < n; ++t) {
      auto x = hn::Load(df, st + t * Mp + c);
      if (sc.has_cap) x = SoftCap(df, hn::Mul(x, logit), sc.cap);
      if (!whole) {
        const auto pos = hn::Set(di, t0 + t);
        const auto vis = hn::And(hn::Lt(lo_m1, pos), hn::Lt(pos, vhi));
        x = hn::IfThenElse(hn::RebindMask(df, vis), x, neg_inf);
      }
      if (sc.has_cap || !whole) hn::Store(x, df, st + t * Mp + c);
      vmax = hn::Max(vmax, x);
    }
    vmax = hn::Max(old, hn::Mul(vmax, stored));
    const auto ref = hn::IfThenZeroElse(hn::Eq(vmax, neg_inf), vmax);
    const auto a = hn::IfThenElse(hn::Eq(old, vmax), one, ExpNonPositive(df, hn::Sub(old, ref)));
    auto vsum = hn::Zero(df);
    for (int t = 0; t < n; ++t) {
      const auto p = ExpNonPositive(df, hn::MulSub(hn::Load(df, st + t * Mp + c), stored, ref));
      hn::Store(hn::Mul(p, weight), df, st + t * Mp + c);
      vsum = hn::Add(vsum, p);
    }
    hn::Store(hn::MulAdd(hn::Load(df, sum + c), a, vsum), df, sum + c);
    hn::Store(vmax, df, mx + c);
    hn::Store(a, df, alpha + c);
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
  const SoftmaxScales softmax_scales{a.logit_factor, a.has_soft_cap, a.soft_cap, a.weight_factor};

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
  // Wide items (many queries per KV head) keep queries in SIMD lanes; see below.
  const bool wide = Mh > kDirectMaxM;
  const TensorView& qv = a.queries;
  const int64_t qes = static_cast<int64_t>(DTypeSize(qv.dtype));
  for (int64_t m = 0; m < M; ++m) {
    const int64_t mh = m % Mh;
    const int64_t r = it.row_begin + mh / G, head = (it.head_begin + m / Mh) * G + mh % G;
    const uint8_t* src = static_cast<const uint8_t*>(qv.data) +
                         (r * qv.strides[0] + head * qv.strides[1]) * qes;
    if (wide) {  // natural order: the transposition into lanes applies the permutation
      LoadQuery(df, a, src, static_cast<size_t>(D), sc.q + m * D);
    } else {
      LoadQuery(df, a, src, static_cast<size_t>(D), sc.kf);  // kf: free until the tiles
      PermuteRow<kKind>(df, sc.kf, static_cast<size_t>(D), sc.q + m * D);
    }
    sc.mx[m] = -std::numeric_limits<float>::infinity();
    sc.sum[m] = 0.0f;
  }
  // Wide items accumulate in acct and write every acc row once at the end.
  if (!wide) std::fill(sc.acc, sc.acc + M * D, 0.0f);

  const int32_t kv_lo = *std::min_element(lo, lo + Mh);
  const int32_t kv_hi = *std::max_element(hi, hi + Mh);
  const uint8_t* cache = static_cast<const uint8_t*>(a.kv_cache.data);
  const int64_t es = static_cast<int64_t>(DTypeSize(a.kv_cache.dtype));
  const int64_t slot_bytes = 2 * sh.num_kv_heads * D * es;  // all heads of one token
  const int64_t head_bytes = 2 * D * es;                    // K and V of one head
  const int32_t* pages = plan.page_indices.data() + it.seq * plan.pages_per_seq;
  const uint8_t* item_base = cache + it.head_begin * head_bytes;
  // out[i] = start of the item's heads in the page slot of position t + i, i < count. One
  // division per tile; then the slot walks along the page and jumps at page ends.
  auto fill_slots = [&](int32_t t, int count, const uint8_t** out) {
    int64_t entry = t / PS, slot = t % PS;
    const uint8_t* page = item_base + static_cast<int64_t>(pages[entry]) * PS * slot_bytes;
    for (int i = 0; i < count; ++i) {
      out[i] = page + slot * slot_bytes;
      if (++slot == PS && i + 1 < count) {  // only read table entries of used positions
        slot = 0;
        page = item_base + static_cast<int64_t>(pages[++entry]) * PS * slot_bytes;
      }
    }
  };
  const uint8_t* slot_buf[2][kTile];  // this tile's and the next tile's slots
  const uint8_t* krows[kTile];
  const uint8_t* vrows[kTile];
  // Items stream the cache and prefetch it in software; without that the hardware
  // prefetchers leave an fp8 decode at 3.5-4.5 GB/s per core (its slots are 2 KiB: two
  // tokens, read interleaved, share each 4 KiB page). Three schemes, chosen by measurement
  // (decode, 8 sequences, ctx 16K, 2 cores, medians of 3 interleaved runs):
  //  - items of several heads: every K/V line of the next head of this tile (or of the
  //    next tile's first head) is prefetched into L1 in one burst, one head's compute
  //    ahead. 8/8/128 fp8 at ctx 8K: 20.7 -> 11.3 ms; 32/8/128 bf16: 28 -> 19.5 ms.
  //  - items of one head (Hkv = 1 models, e.g. Gemma 3 270M) or of a few heads with at
  //    most kStreamMaxSlotBytes of K/V per token (e.g. SmolLM2's 3 heads of 64): the next
  //    tile is streamed into L2 a few lines per compute step (LineStream). 4/1/256: bf16
  //    11.8 -> 9.9 ms, fp8 10.3 -> 6.8 ms. Against the burst, calls alternated in one
  //    process (three medians of 41 each, ctx 4K / 16K): bf16 9/3/64 1.02-1.06x / 1.06-1.09x,
  //    12/4/64 1.01-1.04x / 1.03-1.07x, 16/2/128 1.03-1.20x / 1.15-1.25x; fp8 0.98-1.06x
  //    at those shapes but 12/4/128 (0.94-0.96x at 4K, 1.06-1.08x at 16K); shapes above the
  //    limit unchanged (0.95-1.02x). Earlier the same stream made 8-head items slower
  //    (8/8/128 bf16 26 -> 33 ms, 32/8/128 bf16 38 -> 44 ms); spreading the per-head
  //    burst over the compute was slower too.
  //  - wide items (prefill row tiles) use the per-head burst too, into L2 only: their
  //    compute per byte is ~Mh/8 times the direct path's, so the lines have time to
  //    arrive, and lines pulled into L1 would evict the queries and decoded tiles first.
  //    Against prefetching only each slot's first line (calls alternated in one process,
  //    medians of 7-15, 2 cores): prefill q_len 512 ctx 8K 1.08x (bf16) and 1.21x (fp8)
  //    faster, ctx 2K 1.02x and 0.98x, ctx 512 within +-1.5%; with T0 instead of T2
  //    1.05x / 1.07x at ctx 8K and 0.98x / 0.99x at ctx 512.
  const bool stream_tiles = !wide && (H == 1 || H * head_bytes <= kStreamMaxSlotBytes);
  LineStream stream;
  const size_t ud = static_cast<size_t>(D);

  // Wide items: each head's queries transposed into Mp columns (zero padding, empty ranges).
  const size_t N = hn::Lanes(df);
  const size_t Mp = (static_cast<size_t>(Mh) + N - 1) / N * N;
  if (wide) {
    // A gather per column vector and d (a strided scalar copy here was ~6% of a short
    // prefill). Lane i reads query c + i (natural order, so row d of qt gathers element
    // PermutedSource(d): qt comes out permuted like the K groups); padding columns read
    // query 0 and are zeroed.
    const hn::RebindToSigned<DF> di;
    for (int64_t hh = 0; hh < H; ++hh) {
      const float* qh = sc.q + hh * Mh * D;
      float* qt = sc.qt + hh * D * Mp;
      for (size_t c = 0; c < Mp; c += N) {
        const auto col = hn::Iota(di, static_cast<int32_t>(c));
        const auto real = hn::Lt(col, hn::Set(di, static_cast<int32_t>(Mh)));
        const auto offsets =
            hn::IfThenElseZero(real, hn::Mul(col, hn::Set(di, static_cast<int32_t>(D))));
        const auto keep = hn::RebindMask(df, real);
        for (int64_t d = 0; d < D; ++d) {
          const float* column = qh + PermutedSource<kKind>(df, static_cast<size_t>(d), ud);
          hn::StoreU(hn::IfThenElseZero(keep, hn::GatherIndex(df, column, offsets)), df,
                     qt + d * Mp + c);
        }
      }
    }
    for (size_t c = 0; c < Mp; ++c) {
      const bool real = c < static_cast<size_t>(Mh);
      sc.wlo[c] = real ? lo[c] : 0;
      sc.whi[c] = real ? hi[c] : 0;
    }
    std::fill(sc.acct, sc.acct + H * D * Mp, 0.0f);
    std::fill(sc.wmx, sc.wmx + H * Mp, -std::numeric_limits<float>::infinity());
    std::fill(sc.wsum, sc.wsum + H * Mp, 0.0f);
  }

  // Tiles sit on a grid of kTile absolute positions.
  // Positions of the first tile before kv_lo are valid (< kv_len) and masked for every query.
  const int32_t first = kv_lo / kTile * kTile;
  if (first < kv_hi) fill_slots(first, std::min<int32_t>(kTile, kv_hi - first), slot_buf[0]);
  for (int32_t t0 = first, cur = 0; t0 < kv_hi; t0 += kTile, cur ^= 1) {
    const int n = static_cast<int>(std::min<int32_t>(kTile, kv_hi - t0));
    const uint8_t* const* slots = slot_buf[cur];
    // The next tile's slots, for the prefetches (see stream_tiles).
    const int next_n = static_cast<int>(std::min<int32_t>(kTile, kv_hi - t0 - kTile));
    if (next_n > 0) fill_slots(t0 + kTile, next_n, slot_buf[cur ^ 1]);
    if (stream_tiles) {
      const int chunks = static_cast<int>((Mh + 3) / 4);
      const int steps = static_cast<int>(H) * (n / 4) * chunks *
                        (1 + static_cast<int>(D / (kGroupVecs * N)));
      stream.Start(slot_buf[cur ^ 1], std::max(next_n, 0),
                   static_cast<int>((H * head_bytes + 63) / 64), steps);
    }
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int t = 0; t < n; ++t) {
        krows[t] = slots[t] + hh * head_bytes;
        vrows[t] = krows[t] + D * es;
      }
      if (!stream_tiles) {
        const bool last_head = hh + 1 == H;
        const uint8_t* const* next_slots = last_head ? slot_buf[cur ^ 1] : slots;
        const int64_t offset = last_head ? 0 : (hh + 1) * head_bytes;
        // Measured: without this burst DRAM-bound decode runs ~2x slower (32/8/128 bf16
        // ctx 4K 8.3 -> 18.3 ms, 8/8/128 fp8 ctx 16K 22 -> 43 ms), while cache-resident runs
        // get 7-24% faster (most at G = 1; ~13% of perf samples at 32/8/128 bf16 ctx 4K).
        // By the cache geometry (no counters here to confirm it) the burst fills L2 more
        // than L1: one head's lines of consecutive slots are slot_bytes apart (2-4 KiB), so
        // a tile's lines of one head share a few of L1's 64 sets and evict each other.
        // Slower or no better (2 cores, interleaved medians): four per loop step (same);
        // spread over the head's compute, T0 or T1 (17-32% slower at 8/8/128 fp8 and
        // 32/8/128 bf16 ctx 4K, up to 12% faster at 32/8/128 fp8); prefetcht2 (same when
        // quiet, 8/8/128 fp8 ctx 16K 23.0 vs 22.0 ms; 4-12% faster when busy); two heads
        // ahead (8/8/128 bf16 ctx 16K 25.8 -> 31.3 ms); every other line (~2x slower);
        // 32-token tiles with a T2 burst (0.84-1.12x over the decode matrix, fp8 unchanged).
        // Re-measured with calls alternated in one process (medians of 11-15, ctx 4K/16K):
        // prefetcht2 0.89-1.04x (worst at 32/8/128 bf16). And a token-major QK (every head
        // of four slots at a time, so the cache is read in address order for the hardware
        // prefetchers), PV per head as here: with only each next slot's first line
        // prefetched 0.58-0.84x, with the next tile streamed into L2 during the QK
        // (LineStream) 0.70-0.88x (8/8/128, 32/8/128, 9/3/64). In a DRAM-bound run (8/8/128
        // fp8 ctx 16K, 1 thread) ~30% of the kernel's samples sit on this loop's prefetch;
        // presumably each miss holds one of the core's few fill buffers for a DRAM latency
        // and the burst waits for free ones (inferred, no counters here): per-core memory
        // parallelism, not instructions, bounds it there.
        for (int t = 0, tn = last_head ? next_n : n; t < tn; ++t) {
          for (int64_t b = 0; b < head_bytes; b += 64) {
            const uint8_t* line = next_slots[t] + offset + b;
            if (wide) {  // into L2 only (prefetcht2 on x86), see stream_tiles
              __builtin_prefetch(line, /*rw=*/0, /*locality=*/1);
            } else {
              hwy::Prefetch(line);
            }
          }
        }
      }
      if (wide) {
        DecodeTile<kKind>(df, krows, n, ud, sc.kf);
        const int n_up = (n + kWideT - 1) / kWideT * kWideT;
        std::fill(sc.kf + n * D, sc.kf + n_up * D, 0.0f);  // rows WideQkTile computes unused
        WideQkTile(df, sc.kf, ud, sc.qt + hh * D * Mp, Mp, n, sc.st);
        WideSoftmax(df, Mp, t0, n, sc.wlo, sc.whi, softmax_scales, sc.st, sc.wmx + hh * Mp,
                    sc.wsum + hh * Mp, sc.walpha);
        DecodeTile<kKind>(df, vrows, n, ud, sc.vf);
        WidePvTile(df, sc.st, Mp, sc.vf, ud, n, sc.walpha, sc.acct + hh * D * Mp);
      } else {
        float* mx = sc.mx + hh * Mh;
        float* sum = sc.sum + hh * Mh;
        LineStream* ls = stream_tiles ? &stream : nullptr;
        QkTile<kKind>(df, sc.q + hh * Mh * D, Mh, ud, krows, n, sc.s, ls);
        SoftmaxTile(df, Mh, t0, n, lo, hi, softmax_scales, sc.s, mx, sum, sc.alpha);
        float* acc = sc.acc + hh * Mh * D;
        ScaleRows(df, Mh, ud, sc.alpha, acc);
        PvTile<kKind>(df, sc.s, Mh, vrows, n, acc, ud, ls);
      }
    }
    if (stream_tiles) stream.Finish();
  }
  if (wide) {  // back to the per-query state layout the finalization below reads
    for (int64_t hh = 0; hh < H; ++hh) {
      const float* src = sc.acct + hh * D * Mp;
      float* dst = sc.acc + hh * Mh * D;
      for (int64_t m = 0; m < Mh; ++m)
        for (int64_t d = 0; d < D; ++d) dst[m * D + d] = src[d * Mp + m];
    }
    for (int64_t hh = 0; hh < H; ++hh) {
      std::copy(sc.wmx + hh * Mp, sc.wmx + hh * Mp + Mh, sc.mx + hh * Mh);
      std::copy(sc.wsum + hh * Mp, sc.wsum + hh * Mp + Mh, sc.sum + hh * Mh);
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
    UnpermuteRow<kKind>(df, sc.acc + m * D, ud, sc.vf);
    StoreOutput(df, sc.vf, f, a.output.dtype, ud, OutputRow(a, r, head));
  }
}

}  // namespace

void ComputeItem(const AttentionKernelArgs& a, const AttentionWorkItem& it, Scratch& sc) {
  switch (a.kv_cache.dtype) {
    case DType::kFloat32: return ComputeItemT<KvKind::kF32>(a, it, sc);
    case DType::kBFloat16: return ComputeItemT<KvKind::kBF16>(a, it, sc);
    case DType::kFloat8E4M3FN: return ComputeItemT<KvKind::kE4M3Biased>(a, it, sc);
    case DType::kFloat8E5M2: return ComputeItemT<KvKind::kE5M2Biased>(a, it, sc);
    case DType::kFloat16: break;  // rejected by validation
  }
  RPA_CHECK(false && "unsupported kv_cache dtype");
}

namespace {

// Combines the partial states of one split (seq, head range, rows) into the output. A chunk
// that saw no visible token has max -inf and weight 0; it is skipped, so an empty chunk
// never turns the result into NaN.
template <KvKind kKind>
void MergePartialsT(const AttentionKernelArgs& a, const AttentionMerge& mg, Scratch& sc) {
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
    UnpermuteRow<kKind>(df, acc, static_cast<size_t>(D), sc.q);
    StoreOutput(df, sc.q, f, a.output.dtype, static_cast<size_t>(D), OutputRow(a, r, head));
  }
}

}  // namespace

void MergePartials(const AttentionKernelArgs& a, const AttentionMerge& mg, Scratch& sc) {
  switch (a.kv_cache.dtype) {
    case DType::kFloat32: return MergePartialsT<KvKind::kF32>(a, mg, sc);
    case DType::kBFloat16: return MergePartialsT<KvKind::kBF16>(a, mg, sc);
    case DType::kFloat8E4M3FN: return MergePartialsT<KvKind::kE4M3Biased>(a, mg, sc);
    case DType::kFloat8E5M2: return MergePartialsT<KvKind::kE5M2Biased>(a, mg, sc);
    case DType::kFloat16: break;  // rejected by validation
  }
  RPA_CHECK(false && "unsupported kv_cache dtype");
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {

HWY_EXPORT(ComputeItem);
HWY_EXPORT(MergePartials);

KvDecodeScales KvDecodeScalesFor(DType cache_dtype) {
  int bias = 0;
  if (cache_dtype == DType::kFloat8E4M3FN) bias = kE4M3FNBiasExp;
  if (cache_dtype == DType::kFloat8E5M2) bias = kE5M2BiasExp;
  if (bias == 0) return {};
  constexpr int kQueryExp = 64;
  return {std::ldexp(1.0f, kQueryExp), std::ldexp(1.0f, bias - kQueryExp), std::ldexp(1.0f, bias)};
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
      const ExactSubnormals exact;  // fp8 subnormals decode to f32 subnormals
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
