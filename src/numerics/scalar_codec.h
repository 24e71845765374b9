// Scalar conversions between f32 and the narrow float formats, bit-exact with ml_dtypes.
//
// Semantics (../shared/docs/rpa-contract.md §5):
//  - Encoding from f32 rounds once, to nearest, ties to even; subnormals are kept.
//  - Non-saturating (the default, as ml_dtypes' astype): a finite value that rounds past the
//    largest finite code becomes NaN for e4m3fn (it has no inf) and +-inf for e5m2 / f16 /
//    bf16. Saturating variants clamp every out-of-range value, +-inf included, to +-max.
//  - NaN stays NaN with its sign, as the format's canonical quiet NaN (e4m3fn 0x7F,
//    e5m2 0x7E, f16 0x7E00, bf16 0x7FC0; sign bit added for negative NaN).
//  - Decoding to f32 is exact; NaN codes decode to the f32 quiet NaN with the same sign.
// Conversions between two narrow formats go through f32, which holds every value of every
// narrow format exactly, so they too round exactly once.
//
// These are the reference semantics; numerics/convert.h holds the bulk (SIMD) versions,
// which must agree with these to the bit.
#pragma once

#include <bit>
#include <cstdint>

namespace rpa {

inline uint32_t F32Bits(float x) { return std::bit_cast<uint32_t>(x); }
inline float F32FromBits(uint32_t b) { return std::bit_cast<float>(b); }

namespace codec_detail {

// A narrow binary float format: kMan fraction bits, exponent bias kBias, the largest
// finite magnitude code kMaxCode, the code produced on non-saturating overflow
// (kOverflowCode: inf, or NaN where there is no inf) and the canonical quiet NaN.
template <int kMan, int kBias, uint32_t kMaxCode, uint32_t kOverflowCode, uint32_t kNanCode,
          int kBits>
struct NarrowFormat {
  static constexpr int man = kMan;
  static constexpr int bias = kBias;
  static constexpr uint32_t max_code = kMaxCode;
  static constexpr uint32_t overflow_code = kOverflowCode;
  static constexpr uint32_t nan_code = kNanCode;
  static constexpr uint32_t sign_bit = 1u << (kBits - 1);
};

using E4M3FN = NarrowFormat<3, 7, 0x7E, 0x7F, 0x7F, 8>;
using E5M2 = NarrowFormat<2, 15, 0x7B, 0x7C, 0x7E, 8>;
using F16 = NarrowFormat<10, 15, 0x7BFF, 0x7C00, 0x7E00, 16>;

// f32 -> narrow format with one round-to-nearest-even step. Works on the magnitude as an
// integer significand: sig * 2^(e - 23) with sig in [2^23, 2^24) for normal inputs.
template <typename Fmt, bool kSaturate>
inline uint32_t EncodeFromF32(float x) {
  const uint32_t bits = F32Bits(x);
  const uint32_t sign = (bits >> 31) ? Fmt::sign_bit : 0u;
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | Fmt::nan_code;                        // NaN
  if (abs == 0x7F800000u) return sign | (kSaturate ? Fmt::max_code : Fmt::overflow_code);
  const int exp = static_cast<int>(abs >> 23);
  // f32 subnormals are below 2^-126, far under half the smallest subnormal of every
  // narrow format handled here (f16's is 2^-24): they round to zero.
  if (exp == 0) return sign;
  const uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
  const int e = exp - 127;          // unbiased exponent of x
  const int emin = 1 - Fmt::bias;   // exponent of the smallest normal
  // Bits to drop from the 24-bit significand: 23 - man for normals, more below emin.
  int shift = 23 - Fmt::man + (e < emin ? emin - e : 0);
  if (shift > 25) return sign;  // below a quarter of the smallest subnormal: rounds to 0
  // Round to nearest, ties to even: add half-ulp minus one plus the lowest kept bit.
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded = (sig + half - 1 + ((sig >> shift) & 1u)) >> shift;
  // For normals code = (biased_exp << man) + (rounded - 2^man); a carry out of the
  // significand (rounded == 2^(man+1)) lands in the exponent field by itself. For
  // subnormals the exponent field is 0 and code == rounded (reaching 2^man means it
  // rounded up to the smallest normal, which is again the right code).
  const int64_t code = e < emin
                           ? static_cast<int64_t>(rounded)
                           : (static_cast<int64_t>(e + Fmt::bias - 1) << Fmt::man) + rounded;
  if (code > static_cast<int64_t>(Fmt::max_code)) {
    return sign | (kSaturate ? Fmt::max_code : Fmt::overflow_code);
  }
  return sign | static_cast<uint32_t>(code);
}

// Narrow format -> f32, exact. inf / NaN handling is done by the callers that know the
// format's special codes.
template <typename Fmt>
inline float DecodeFiniteToF32(uint32_t code) {
  const uint32_t sign = (code & Fmt::sign_bit) ? 0x80000000u : 0u;
  uint32_t mag = code & (Fmt::sign_bit - 1);
  if (mag == 0) return F32FromBits(sign);
  int exp = static_cast<int>(mag >> Fmt::man);
  uint32_t frac = mag & ((1u << Fmt::man) - 1);
  if (exp == 0) {  // subnormal: normalize so the leading 1 becomes implicit
    exp = 1;
    while ((frac & (1u << Fmt::man)) == 0) {
      frac <<= 1;
      --exp;
    }
    frac &= (1u << Fmt::man) - 1;
  }
  const uint32_t f32_exp = static_cast<uint32_t>(exp - Fmt::bias + 127);
  return F32FromBits(sign | (f32_exp << 23) | (frac << (23 - Fmt::man)));
}

inline float QuietNanF32(bool negative) {
  return F32FromBits(negative ? 0xFFC00000u : 0x7FC00000u);
}

}  // namespace codec_detail

// ---- float8_e4m3fn ----
inline uint8_t F32ToE4M3FN(float x) {
  return static_cast<uint8_t>(codec_detail::EncodeFromF32<codec_detail::E4M3FN, false>(x));
}
inline uint8_t F32ToE4M3FNSaturate(float x) {
  return static_cast<uint8_t>(codec_detail::EncodeFromF32<codec_detail::E4M3FN, true>(x));
}
inline float E4M3FNToF32(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return codec_detail::QuietNanF32(code & 0x80);
  return codec_detail::DecodeFiniteToF32<codec_detail::E4M3FN>(code);
}

// ---- float8_e5m2 ----
inline uint8_t F32ToE5M2(float x) {
  return static_cast<uint8_t>(codec_detail::EncodeFromF32<codec_detail::E5M2, false>(x));
}
inline uint8_t F32ToE5M2Saturate(float x) {
  return static_cast<uint8_t>(codec_detail::EncodeFromF32<codec_detail::E5M2, true>(x));
}
inline float E5M2ToF32(uint8_t code) {
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7C) return F32FromBits((code & 0x80) ? 0xFF800000u : 0x7F800000u);
  if (mag > 0x7C) return codec_detail::QuietNanF32(code & 0x80);
  return codec_detail::DecodeFiniteToF32<codec_detail::E5M2>(code);
}

// ---- float16 (IEEE binary16) ----
inline uint16_t F32ToF16(float x) {
  return static_cast<uint16_t>(codec_detail::EncodeFromF32<codec_detail::F16, false>(x));
}
inline uint16_t F32ToF16Saturate(float x) {
  return static_cast<uint16_t>(codec_detail::EncodeFromF32<codec_detail::F16, true>(x));
}
inline float F16ToF32(uint16_t code) {
  const uint32_t mag = code & 0x7FFFu;
  if (mag == 0x7C00) return F32FromBits((code & 0x8000) ? 0xFF800000u : 0x7F800000u);
  if (mag > 0x7C00) return codec_detail::QuietNanF32(code & 0x8000);
  return codec_detail::DecodeFiniteToF32<codec_detail::F16>(code);
}

// ---- bfloat16: the top half of an f32 ----
inline uint16_t F32ToBF16(float x) {
  const uint32_t b = F32Bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) & 0x8000u) | 0x7FC0u;
  // Round to nearest even on the 16 dropped bits; a carry may roll into the exponent,
  // and a value that rounds past the largest finite bf16 becomes inf, as IEEE says.
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
inline uint16_t F32ToBF16Saturate(float x) {
  const uint16_t r = F32ToBF16(x);
  if ((r & 0x7FFFu) == 0x7F80u) return static_cast<uint16_t>((r & 0x8000u) | 0x7F7Fu);
  return r;
}
// Exact, payload included (a NaN stays the same NaN, as in numpy / ml_dtypes).
inline float BF16ToF32(uint16_t code) { return F32FromBits(static_cast<uint32_t>(code) << 16); }

}  // namespace rpa
