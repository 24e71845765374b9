// Per-target SIMD codecs between f32 vectors and the narrow formats (Highway).
//
// Include after "hwy/foreach_target.h" (or once, without it, for static dispatch), then
// "hwy/highway.h"; everything lives in rpa::HWY_NAMESPACE. Semantics are those of
// numerics/scalar_codec.h, bit for bit (tests/numerics check every target).
//
// `df` is any f32 tag (hn::ScalableTag<float>, a CappedTag, ...). Every function reads or
// writes exactly Lanes(df) elements at the pointer, unaligned; tails are the caller's job
// (DecodeToF32 / EncodeFromF32 below show one way: a stack copy).
//
// Decoding (narrow codes -> one Vec<DF>), all exact:
//   DecodeE4M3FN(df, const uint8_t*)        value; NaN codes 0x7F/0xFF -> +-qNaN
//   DecodeE4M3FNScaled(df, const uint8_t*)  value * 2^-8, the cheapest decode: fold 256
//                                           into the k/v scale. NaN codes are NOT
//                                           special: 0x7F/0xFF give +-1.875 (= 480 * 2^-8,
//                                           as if the code continued the finite range).
//   DecodeE5M2(df, const uint8_t*)          value; 0x7C/0xFC -> +-inf, NaN codes -> +-qNaN
//   DecodeE5M2Finite(df, const uint8_t*)    value for finite codes; inf/NaN codes give an
//                                           unspecified (finite or not) result. Cheapest.
//   DecodeE4M3FNBiased(df, const uint8_t*)  value * 2^-120 (kE4M3FNBiasExp), the code's own
//                                           exponent and fraction fields in an f32: three
//                                           integer ops, no f16 conversion. Subnormal codes
//                                           give f32 subnormals (exact only with DAZ off);
//                                           NaN codes give +-480 * 2^-120.
//   DecodeE5M2Biased(df, const uint8_t*)    value * 2^-112 (kE5M2BiasExp) for finite codes,
//                                           likewise; inf/NaN codes give finite values.
//   DecodeBF16(df, const uint16_t*)         value (NaN payload kept, as BF16ToF32)
//   DecodeF16(df, const uint16_t*)          value; NaN -> +-qNaN
// Encoding (one Vec<DF> -> Lanes(df) codes), round to nearest even in one step:
//   EncodeE4M3FN<kSat>(df, v, uint8_t*)     kSat=false: ml_dtypes astype (overflow -> NaN)
//   EncodeE5M2<kSat>(df, v, uint8_t*)       kSat=false: overflow -> +-inf
//   EncodeF16<kSat>(df, v, uint16_t*)       kSat=true: finite overflow and +-inf -> +-max
//   EncodeBF16<kSat>(df, v, uint16_t*)      NaN -> the canonical quiet NaN with its sign
//   EncodeNarrowBits<Fmt, kSat>(df, v)      the same, returning the codes as i32 lanes
// Compile-time dtype forms (kFrom / kTo a DType; f32 is a plain load / store):
//   DecodeAs<kFrom>(df, const void*) -> Vec<DF>,  EncodeAs<kTo, kSat>(df, v, void*)
// Spans (any n, tails through a stack buffer):
//   ForEachChunk<kSrcSize, kDstSize>(df, src, dst, n, body)  whole vectors + padded tail
//   DecodeToF32(df, DType from, const void* src, float* dst, size_t n)
//   EncodeFromF32(df, const float* src, DType to, void* dst, size_t n, bool saturate)
//
// Example, a dot product against an e4m3fn K row of length D (a multiple of Lanes(df)):
//   const hn::ScalableTag<float> df;
//   auto acc = hn::Zero(df);
//   for (size_t d = 0; d < D; d += hn::Lanes(df))
//     acc = hn::MulAdd(hn::LoadU(df, q + d), DecodeE4M3FNScaled(df, k_row + d), acc);
//   float logit = hn::GetLane(hn::SumOfLanes(df, acc)) * (256.0f * k_scale);
// (Exact only if no K code is NaN; use DecodeE4M3FN where NaN must propagate.)

// Normal include guard for the non-SIMD part.
#ifndef RPA_NUMERICS_SIMD_CODEC_COMMON_H_
#define RPA_NUMERICS_SIMD_CODEC_COMMON_H_
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "numerics/dtype.h"
#include "numerics/scalar_codec.h"

namespace rpa {
// The biased decodes' scaling: f32 exponent bias 127 minus the format's (7, 15).
constexpr int kE4M3FNBiasExp = 120;
constexpr int kE5M2BiasExp = 112;
}  // namespace rpa
#endif  // RPA_NUMERICS_SIMD_CODEC_COMMON_H_

// Per-target include guard.
#if defined(RPA_NUMERICS_SIMD_CODEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RPA_NUMERICS_SIMD_CODEC_INL_H_
#undef RPA_NUMERICS_SIMD_CODEC_INL_H_
#else
#define RPA_NUMERICS_SIMD_CODEC_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------------------
// Decoding

namespace simd_codec_detail {

// f16 bit patterns (u16 lanes, Lanes(df) of them) -> f32, exact for every f16 value
// including inf; NaN -> the f32 quiet NaN with the sign. Highway's f16 promotion is one
// instruction with F16C / AVX-512 but is emulated elsewhere, where inf/NaN come out as
// finite values >= 65536 (the emulation rebiases exponent 31 like any other); both cases
// are recognized here because every finite f16 is < 65536.
template <class DF, class VU16>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, VU16 bits) {
  const hn::Rebind<hwy::float16_t, DF> df16;
  const auto f = hn::PromoteTo(df, hn::BitCast(df16, bits));
  const auto abs = hn::Abs(f);
  const auto special = hn::Not(hn::Lt(abs, hn::Set(df, 65536.0f)));  // inf, NaN (or emulated)
  const hn::RebindToUnsigned<DF> du32;
  const auto inf = hn::BitCast(df, hn::Set(du32, 0x7F800000u));
  const auto is_inf = hn::Or(hn::Eq(abs, inf), hn::Eq(abs, hn::Set(df, 65536.0f)));
  const auto qnan = hn::BitCast(df, hn::Set(du32, 0x7FC00000u));
  const auto fixed = hn::CopySign(hn::IfThenElse(is_inf, inf, qnan), f);
  return hn::IfThenElse(special, fixed, f);
}

}  // namespace simd_codec_detail

// e4m3fn -> value * 2^-8. (sign << 8) | (magnitude << 7) is the f16 whose exponent field
// equals e4m3's and whose fraction is e4m3's three bits: f16 bias 15 vs e4m3 bias 7 makes
// it value * 2^-8, subnormals included (both formats' subnormals have exponent field 0).
// The code is sign-extended to 16 bits (bits 15..7 all the sign), so one shift left by 7
// puts the magnitude at bits 13..7 and the sign at bits 15 and 14; the mask clears bit 14.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE4M3FNScaled(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, DF> di8;
  const hn::Rebind<int16_t, DF> di16;
  const hn::Rebind<hwy::float16_t, DF> df16;
  const auto b = hn::PromoteTo(di16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p)));
  const auto h = hn::And(hn::ShiftLeft<7>(b), hn::Set(di16, static_cast<int16_t>(0xBF80)));
  return hn::PromoteTo(df, hn::BitCast(df16, h));
}

// The biased decodes: the code sign-extended to 32 bits (bits 31..7 all the sign), shifted
// left so its magnitude bits (exponent, fraction) land at the top of the f32's exponent
// and fraction fields, masked to sign | magnitude. The f32 then has the format's exponent
// field and fraction, read with bias 127 instead of the format's: value * 2^-(127 - bias).
// Subnormal codes (exponent field 0) land on f32 subnormals with the same scaling.
// On x86 this is 3 cheap ops per vector (vpmovsxbd from memory, vpslld, vpand) where the
// f16 route needs unpacks, lane extracts and vcvtph2ps from a register (as costly as an FMA).
template <int kShift, uint32_t kMask, class DF>
HWY_INLINE hn::Vec<DF> DecodeFp8Biased(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<int8_t, DF> di8;
  const hn::RebindToSigned<DF> di32;
  const auto b = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p)));
  return hn::BitCast(df,
                     hn::And(hn::ShiftLeft<kShift>(b), hn::Set(di32, static_cast<int32_t>(kMask))));
}

// e4m3fn s.eeee.mmm -> bits 31 | 26..23 | 22..20: value * 2^-120.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE4M3FNBiased(DF df, const uint8_t* HWY_RESTRICT p) {
  return DecodeFp8Biased<20, 0x87F00000u>(df, p);
}

// e5m2 s.eeeee.mm -> bits 31 | 27..23 | 22..21: value * 2^-112 (finite codes).
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE5M2Biased(DF df, const uint8_t* HWY_RESTRICT p) {
  return DecodeFp8Biased<21, 0x8FE00000u>(df, p);
}

// e4m3fn -> value, exact; 0x7F/0xFF -> +-qNaN. Their scaled decode is exactly +-1.875 and
// no other code's is (448 * 2^-8 = 1.75 is the largest finite), so the NaN test is a float
// compare.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE4M3FN(DF df, const uint8_t* HWY_RESTRICT p) {
  const auto scaled = DecodeE4M3FNScaled(df, p);
  const auto qnan = hn::BitCast(df, hn::Set(hn::RebindToUnsigned<DF>(), 0x7FC00000u));
  return hn::IfThenElse(hn::Eq(hn::Abs(scaled), hn::Set(df, 1.875f)), hn::CopySign(qnan, scaled),
                        hn::Mul(scaled, hn::Set(df, 256.0f)));
}

// e5m2 -> value for finite codes: byte << 8 is exactly the f16 with the same value.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE5M2Finite(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<hwy::float16_t, DF> df16;
  const auto h = hn::ShiftLeft<8>(hn::PromoteTo(du16, hn::LoadU(du8, p)));
  return hn::PromoteTo(df, hn::BitCast(df16, h));
}

// e5m2 -> value, exact; inf stays inf, NaN codes -> +-qNaN.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeE5M2(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Rebind<uint16_t, DF> du16;
  const auto h = hn::ShiftLeft<8>(hn::PromoteTo(du16, hn::LoadU(du8, p)));
  return simd_codec_detail::F16BitsToF32(df, h);
}

// f16 -> value, exact; NaN -> +-qNaN.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  return simd_codec_detail::F16BitsToF32(df, hn::LoadU(du16, p));
}

// bf16 -> value, exact: bf16 is the top half of an f32.
template <class DF>
HWY_INLINE hn::Vec<DF> DecodeBF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// ---------------------------------------------------------------------------------------
// Encoding

// f32 -> codes of the narrow format Fmt (codec_detail::E4M3FN / E5M2 / F16), as i32 lanes.
// The same single rounding as codec_detail::EncodeFromF32, computed differently:
//  - normal results: round to nearest even on the raw f32 bits (add half-ulp - 1 plus the
//    lowest kept bit, shift), then rebias the exponent; a carry out of the fraction lands
//    in the exponent by itself, and rounding past max shows up as code > max_code.
//  - subnormal results (|x| < the format's min normal): the hardware f32 add |x| + C,
//    with C a power of two whose ulp is the format's subnormal spacing, rounds to nearest
//    even exactly once; the low bits of the sum are the code (reaching the min-normal
//    code is correct too). f32 subnormal inputs simply round to 0 this way.
//  - NaN -> nan_code, +-inf and overflow -> overflow_code (or max_code when saturating).
template <class Fmt, bool kSaturate, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> EncodeNarrowBits(DF df, hn::Vec<DF> v) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  constexpr int kDrop = 23 - Fmt::man;  // fraction bits dropped for normal results
  const auto bits = hn::BitCast(du, v);
  const auto abs = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));

  const auto lsb = hn::And(hn::ShiftRight<kDrop>(abs), hn::Set(du, 1u));
  const auto rounded =
      hn::ShiftRight<kDrop>(hn::Add(abs, hn::Add(hn::Set(du, (1u << (kDrop - 1)) - 1u), lsb)));
  const auto normal = hn::Sub(hn::BitCast(di, rounded), hn::Set(di, (127 - Fmt::bias) << Fmt::man));

  // C = 2^(emin - man + 23) has ulp 2^(emin - man), the format's subnormal spacing.
  constexpr int kEmin = 1 - Fmt::bias;
  const uint32_t c_bits = static_cast<uint32_t>(kEmin - Fmt::man + 23 + 127) << 23;
  const auto c = hn::BitCast(df, hn::Set(du, c_bits));
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, abs), c)), hn::BitCast(di, c));
  const uint32_t min_normal_bits = static_cast<uint32_t>(kEmin + 127) << 23;
  const auto abs_i = hn::BitCast(di, abs);
  auto code = hn::IfThenElse(hn::Lt(abs_i, hn::Set(di, static_cast<int32_t>(min_normal_bits))), sub,
                             normal);

  // NaN and +-inf took the normal path and came out above max_code (their exponent field
  // is all ones), so overflow handling covers them; NaN then needs its own code unless it
  // equals the overflow code (e4m3fn, non-saturating).
  const auto max_code = hn::Set(di, static_cast<int32_t>(Fmt::max_code));
  if constexpr (kSaturate) {
    code = hn::Min(code, max_code);
  } else {
    code = hn::IfThenElse(hn::Gt(code, max_code),
                          hn::Set(di, static_cast<int32_t>(Fmt::overflow_code)), code);
  }
  if constexpr (kSaturate || Fmt::overflow_code != Fmt::nan_code) {
    code = hn::IfThenElse(hn::Gt(abs_i, hn::Set(di, 0x7F800000)),
                          hn::Set(di, static_cast<int32_t>(Fmt::nan_code)), code);
  }
  // The f32 sign bit moved down to the format's sign bit.
  constexpr int kSignDown = 31 - (Fmt::sign_bit == 0x80u ? 7 : 15);
  const auto sign = hn::ShiftRight<kSignDown>(hn::And(bits, hn::Set(du, 0x80000000u)));
  return hn::Or(code, hn::BitCast(di, sign));
}

// f32 -> bf16 codes as i32 lanes: round to nearest even on the top 16 bits (overflow
// carries into inf by itself); NaN -> 0x7FC0 | sign; saturating maps +-inf to +-0x7F7F.
template <bool kSaturate, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> EncodeBF16Bits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  auto code =
      hn::BitCast(di, hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFu), lsb))));
  const auto sign16 = hn::BitCast(di, hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u)));
  const auto abs_i = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu)));
  if (kSaturate) {
    const auto is_inf = hn::Eq(hn::And(code, hn::Set(di, 0x7FFF)), hn::Set(di, 0x7F80));
    code = hn::IfThenElse(is_inf, hn::Or(sign16, hn::Set(di, 0x7F7F)), code);
  }
  return hn::IfThenElse(hn::Gt(abs_i, hn::Set(di, 0x7F800000)), hn::Or(sign16, hn::Set(di, 0x7FC0)),
                        code);
}

template <bool kSaturate, class DF>
HWY_INLINE void EncodeE4M3FN(DF df, hn::Vec<DF> v, uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> du8;
  hn::StoreU(hn::DemoteTo(du8, EncodeNarrowBits<codec_detail::E4M3FN, kSaturate>(df, v)), du8, p);
}

template <bool kSaturate, class DF>
HWY_INLINE void EncodeE5M2(DF df, hn::Vec<DF> v, uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> du8;
  hn::StoreU(hn::DemoteTo(du8, EncodeNarrowBits<codec_detail::E5M2, kSaturate>(df, v)), du8, p);
}

template <bool kSaturate, class DF>
HWY_INLINE void EncodeF16(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  hn::StoreU(hn::DemoteTo(du16, EncodeNarrowBits<codec_detail::F16, kSaturate>(df, v)), du16, p);
}

template <bool kSaturate, class DF>
HWY_INLINE void EncodeBF16(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  hn::StoreU(hn::DemoteTo(du16, EncodeBF16Bits<kSaturate>(df, v)), du16, p);
}

// ---------------------------------------------------------------------------------------
// Generic (dtype known at compile time) forms, used by the span helpers and bulk Convert.

// Decodes Lanes(df) elements of dtype kFrom at `src`.
template <DType kFrom, class DF>
HWY_INLINE hn::Vec<DF> DecodeAs(DF df, const void* HWY_RESTRICT src) {
  if constexpr (kFrom == DType::kFloat32) {
    return hn::LoadU(df, static_cast<const float*>(src));
  } else if constexpr (kFrom == DType::kBFloat16) {
    return DecodeBF16(df, static_cast<const uint16_t*>(src));
  } else if constexpr (kFrom == DType::kFloat16) {
    return DecodeF16(df, static_cast<const uint16_t*>(src));
  } else if constexpr (kFrom == DType::kFloat8E4M3FN) {
    return DecodeE4M3FN(df, static_cast<const uint8_t*>(src));
  } else {
    static_assert(kFrom == DType::kFloat8E5M2);
    return DecodeE5M2(df, static_cast<const uint8_t*>(src));
  }
}

// Encodes one vector into Lanes(df) elements of dtype kTo at `dst`.
template <DType kTo, bool kSaturate, class DF>
HWY_INLINE void EncodeAs(DF df, hn::Vec<DF> v, void* HWY_RESTRICT dst) {
  if constexpr (kTo == DType::kFloat32) {
    hn::StoreU(v, df, static_cast<float*>(dst));
  } else if constexpr (kTo == DType::kBFloat16) {
    EncodeBF16<kSaturate>(df, v, static_cast<uint16_t*>(dst));
  } else if constexpr (kTo == DType::kFloat16) {
    EncodeF16<kSaturate>(df, v, static_cast<uint16_t*>(dst));
  } else if constexpr (kTo == DType::kFloat8E4M3FN) {
    EncodeE4M3FN<kSaturate>(df, v, static_cast<uint8_t*>(dst));
  } else {
    static_assert(kTo == DType::kFloat8E5M2);
    EncodeE5M2<kSaturate>(df, v, static_cast<uint8_t*>(dst));
  }
}

// Applies `body(src_chunk, dst_chunk)` to whole vectors of n elements, and to the tail
// through zero-padded stack copies so no byte outside [0, n) is read or written.
// kSrcSize / kDstSize: element sizes in bytes.
template <size_t kSrcSize, size_t kDstSize, class DF, class Body>
HWY_INLINE void ForEachChunk(DF df, const void* src, void* dst, size_t n, const Body& body) {
  const size_t lanes = hn::Lanes(df);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) body(s + i * kSrcSize, d + i * kDstSize);
  if (i < n) {
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
    alignas(64) uint8_t s_buf[kMaxLanes * kSrcSize] = {};
    alignas(64) uint8_t d_buf[kMaxLanes * kDstSize];
    std::memcpy(s_buf, s + i * kSrcSize, (n - i) * kSrcSize);
    body(s_buf, d_buf);
    std::memcpy(d + i * kDstSize, d_buf, (n - i) * kDstSize);
  }
}

// n elements of dtype kFrom -> n f32 at dst, exact.
template <DType kFrom, class DF>
HWY_INLINE void DecodeSpanAs(DF df, const void* src, float* dst, size_t n) {
  ForEachChunk<DTypeSize(kFrom), sizeof(float)>(
      df, src, dst, n, [df](const uint8_t* s, uint8_t* d) {
        hn::StoreU(DecodeAs<kFrom>(df, s), df, reinterpret_cast<float*>(d));
      });
}

// n f32 at src -> n elements of dtype kTo, one rounding each.
template <DType kTo, bool kSaturate, class DF>
HWY_INLINE void EncodeSpanAs(DF df, const float* src, void* dst, size_t n) {
  ForEachChunk<sizeof(float), DTypeSize(kTo)>(df, src, dst, n, [df](const uint8_t* s, uint8_t* d) {
    EncodeAs<kTo, kSaturate>(df, hn::LoadU(df, reinterpret_cast<const float*>(s)), d);
  });
}

// Runtime-dtype span forms: a switch, then the loops above.
template <class DF>
HWY_INLINE void DecodeToF32(DF df, DType from, const void* src, float* dst, size_t n) {
  switch (from) {
    case DType::kFloat32:
      return DecodeSpanAs<DType::kFloat32>(df, src, dst, n);
    case DType::kBFloat16:
      return DecodeSpanAs<DType::kBFloat16>(df, src, dst, n);
    case DType::kFloat16:
      return DecodeSpanAs<DType::kFloat16>(df, src, dst, n);
    case DType::kFloat8E4M3FN:
      return DecodeSpanAs<DType::kFloat8E4M3FN>(df, src, dst, n);
    case DType::kFloat8E5M2:
      return DecodeSpanAs<DType::kFloat8E5M2>(df, src, dst, n);
  }
}

template <class DF>
HWY_INLINE void EncodeFromF32(DF df, const float* src, DType to, void* dst, size_t n,
                              bool saturate) {
  switch (to) {
    case DType::kFloat32:
      return EncodeSpanAs<DType::kFloat32, false>(df, src, dst, n);
    case DType::kBFloat16:
      return saturate ? EncodeSpanAs<DType::kBFloat16, true>(df, src, dst, n)
                      : EncodeSpanAs<DType::kBFloat16, false>(df, src, dst, n);
    case DType::kFloat16:
      return saturate ? EncodeSpanAs<DType::kFloat16, true>(df, src, dst, n)
                      : EncodeSpanAs<DType::kFloat16, false>(df, src, dst, n);
    case DType::kFloat8E4M3FN:
      return saturate ? EncodeSpanAs<DType::kFloat8E4M3FN, true>(df, src, dst, n)
                      : EncodeSpanAs<DType::kFloat8E4M3FN, false>(df, src, dst, n);
    case DType::kFloat8E5M2:
      return saturate ? EncodeSpanAs<DType::kFloat8E5M2, true>(df, src, dst, n)
                      : EncodeSpanAs<DType::kFloat8E5M2, false>(df, src, dst, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#endif  // RPA_NUMERICS_SIMD_CODEC_INL_H_ per-target guard
