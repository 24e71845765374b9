// The per-target helpers of numerics/simd_codec-inl.h, called directly (as the attention
// kernel calls them) on every SIMD target: each decoder on every code it accepts, the
// scaled e4m3fn decode's documented value·2^-8 (NaN codes -> +-1.875), and each encoder on
// a spread of f32 inputs, all against the scalar codec bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/dtype.h"
#include "numerics/scalar_codec.h"
#include "tests/numerics/target_loop.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/numerics/test_simd_codec.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "numerics/simd_codec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {

// Applies a Lanes(df)-at-a-time decoder to n codes (n a multiple of Lanes(df)).
template <class Decode>
std::vector<float> DecodeAll(const void* codes, size_t code_size, size_t n, const Decode& decode) {
  const hn::ScalableTag<float> df;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    hn::StoreU(decode(df, static_cast<const uint8_t*>(codes) + i * code_size), df, &out[i]);
  }
  return out;
}

void TestDecoders() {
  std::vector<uint8_t> codes8(256);
  for (int c = 0; c < 256; ++c) codes8[c] = static_cast<uint8_t>(c);
  std::vector<uint16_t> codes16(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes16[c] = static_cast<uint16_t>(c);

  const auto e4m3 = DecodeAll(codes8.data(), 1, 256,
                              [](auto df, const uint8_t* p) { return DecodeE4M3FN(df, p); });
  const auto e4m3_scaled = DecodeAll(
      codes8.data(), 1, 256, [](auto df, const uint8_t* p) { return DecodeE4M3FNScaled(df, p); });
  const auto e5m2 =
      DecodeAll(codes8.data(), 1, 256, [](auto df, const uint8_t* p) { return DecodeE5M2(df, p); });
  const auto e5m2_finite = DecodeAll(
      codes8.data(), 1, 256, [](auto df, const uint8_t* p) { return DecodeE5M2Finite(df, p); });
  const auto e4m3_biased = DecodeAll(
      codes8.data(), 1, 256, [](auto df, const uint8_t* p) { return DecodeE4M3FNBiased(df, p); });
  const auto e5m2_biased = DecodeAll(
      codes8.data(), 1, 256, [](auto df, const uint8_t* p) { return DecodeE5M2Biased(df, p); });
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    EXPECT_EQ(F32Bits(e4m3[c]), F32Bits(E4M3FNToF32(code))) << "e4m3fn code " << c;
    EXPECT_EQ(F32Bits(e5m2[c]), F32Bits(E5M2ToF32(code))) << "e5m2 code " << c;
    if ((c & 0x7F) == 0x7F) {  // documented: NaN codes decode as +-480 * 2^-8
      EXPECT_EQ(e4m3_scaled[c], (c & 0x80) ? -1.875f : 1.875f) << c;
    } else {
      // value * 2^-8 is exact (the smallest, 2^-17, is a normal f32), so compare exactly.
      EXPECT_EQ(F32Bits(e4m3_scaled[c]), F32Bits(std::ldexp(E4M3FNToF32(code), -8))) << c;
    }
    if ((c & 0x7F) < 0x7C) {
      EXPECT_EQ(F32Bits(e5m2_finite[c]), F32Bits(E5M2ToF32(code))) << "e5m2 finite code " << c;
    }
    // The biased decodes: value * 2^-bias, exact in f32 (subnormals included: the smallest,
    // 2^-9 * 2^-120 and 2^-16 * 2^-112, are multiples of 2^-149). ldexp in double, then one
    // exact conversion, is independent of the bit manipulation under test.
    if ((c & 0x7F) == 0x7F) {  // documented: NaN codes decode as +-480 * 2^-120
      EXPECT_EQ(e4m3_biased[c], static_cast<float>(std::ldexp((c & 0x80) ? -480.0 : 480.0, -120)));
    } else {
      EXPECT_EQ(F32Bits(e4m3_biased[c]),
                F32Bits(static_cast<float>(std::ldexp(double{E4M3FNToF32(code)}, -kE4M3FNBiasExp))))
          << "e4m3fn biased code " << c;
    }
    if ((c & 0x7F) < 0x7C) {
      EXPECT_EQ(F32Bits(e5m2_biased[c]),
                F32Bits(static_cast<float>(std::ldexp(double{E5M2ToF32(code)}, -kE5M2BiasExp))))
          << "e5m2 biased code " << c;
    } else {  // documented: inf / NaN codes give finite values
      EXPECT_TRUE(std::isfinite(e5m2_biased[c])) << c;
    }
  }

  const auto bf16 = DecodeAll(codes16.data(), 2, 65536, [](auto df, const uint8_t* p) {
    return DecodeBF16(df, reinterpret_cast<const uint16_t*>(p));
  });
  const auto f16 = DecodeAll(codes16.data(), 2, 65536, [](auto df, const uint8_t* p) {
    return DecodeF16(df, reinterpret_cast<const uint16_t*>(p));
  });
  int failures = 0;
  for (uint32_t c = 0; c < 65536 && failures < 10; ++c) {
    const auto code = static_cast<uint16_t>(c);
    if (F32Bits(bf16[c]) != F32Bits(BF16ToF32(code))) ++failures, ADD_FAILURE() << "bf16 " << c;
    if (F32Bits(f16[c]) != F32Bits(F16ToF32(code))) ++failures, ADD_FAILURE() << "f16 " << c;
  }
}

void TestEncoders() {
  // Random bit patterns plus values on a fine grid near each format's interesting range.
  std::mt19937 rng(42);
  std::vector<float> in;
  for (int i = 0; i < 1 << 16; ++i) in.push_back(F32FromBits(rng()));
  for (int i = 0; i < 1 << 16; ++i) {
    in.push_back(std::ldexp(static_cast<float>(static_cast<int>(rng() % 8192) - 4096) / 128.0f,
                            static_cast<int>(rng() % 48) - 30));
  }
  for (float v : {INFINITY, -INFINITY, NAN, -NAN, 464.0f, 61440.0f, 65520.0f, 0.0f, -0.0f}) {
    in.push_back(v);
  }
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  while (in.size() % lanes) in.push_back(1.0f);
  const size_t n = in.size();
  std::vector<uint8_t> e4(n), e4s(n), e5(n), e5s(n);
  std::vector<uint16_t> h(n), hs(n), b(n), bs(n);
  for (size_t i = 0; i < n; i += lanes) {
    const auto v = hn::LoadU(df, &in[i]);
    EncodeE4M3FN<false>(df, v, &e4[i]);
    EncodeE4M3FN<true>(df, v, &e4s[i]);
    EncodeE5M2<false>(df, v, &e5[i]);
    EncodeE5M2<true>(df, v, &e5s[i]);
    EncodeF16<false>(df, v, &h[i]);
    EncodeF16<true>(df, v, &hs[i]);
    EncodeBF16<false>(df, v, &b[i]);
    EncodeBF16<true>(df, v, &bs[i]);
  }
  int failures = 0;
  for (size_t i = 0; i < n && failures < 10; ++i) {
    const float x = in[i];
    const bool ok = e4[i] == F32ToE4M3FN(x) && e4s[i] == F32ToE4M3FNSaturate(x) &&
                    e5[i] == F32ToE5M2(x) && e5s[i] == F32ToE5M2Saturate(x) &&
                    h[i] == F32ToF16(x) && hs[i] == F32ToF16Saturate(x) && b[i] == F32ToBF16(x) &&
                    bs[i] == F32ToBF16Saturate(x);
    if (!ok) ++failures, ADD_FAILURE() << "input bits 0x" << std::hex << F32Bits(x);
  }
}

void TestSpans() {
  const hn::ScalableTag<float> df;
  for (size_t n : {0u, 1u, 5u, 16u, 17u, 33u, 100u}) {
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = std::ldexp(static_cast<float>(i) - 50.0f, -3) * 37.0f;
    std::vector<uint8_t> codes(n + 1, 0xEE), want(n);
    EncodeFromF32(df, in.data(), DType::kFloat8E4M3FN, codes.data(), n, /*saturate=*/true);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(codes[i], F32ToE4M3FNSaturate(in[i])) << n << " " << i;
    EXPECT_EQ(codes[n], 0xEE) << "wrote past the end, n=" << n;
    std::vector<float> back(n + 1, -7.0f);
    DecodeToF32(df, DType::kFloat8E4M3FN, codes.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(back[i], E4M3FNToF32(codes[i])) << n << " " << i;
    EXPECT_EQ(back[n], -7.0f) << "wrote past the end, n=" << n;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {
namespace {

HWY_EXPORT(TestDecoders);
HWY_EXPORT(TestEncoders);
HWY_EXPORT(TestSpans);

TEST(SimdCodecTest, DecodersMatchScalarOnEveryCodeAndTarget) {
  test::ForEachSupportedTarget([](int64_t) { HWY_DYNAMIC_DISPATCH(TestDecoders)(); });
}

TEST(SimdCodecTest, EncodersMatchScalarOnEveryTarget) {
  test::ForEachSupportedTarget([](int64_t) { HWY_DYNAMIC_DISPATCH(TestEncoders)(); });
}

TEST(SimdCodecTest, SpanHelpersHandleTails) {
  test::ForEachSupportedTarget([](int64_t) { HWY_DYNAMIC_DISPATCH(TestSpans)(); });
}

}  // namespace
}  // namespace rpa
#endif  // HWY_ONCE
