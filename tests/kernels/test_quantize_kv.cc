// quantize_kv (rpa-contract.md §4): the contract's end-to-end vectors, clipping (finite or
// infinite input never yields NaN/Inf), bit-exactness against the scalar formulation
// cast(clip(x / scale, -max, max)) for every source dtype, fp8 format, a range of scales
// and every SIMD target, and the validation messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/quantize_kv.h"
#include "numerics/convert.h"
#include "numerics/scalar_codec.h"
#include "tests/numerics/target_loop.h"
#include "util/error.h"

namespace rpa {
namespace {

// The contract's formula, written out: f32 division, clip (NaN passes: both comparisons
// are false for NaN), one non-saturating RNE cast. Clipping first means the cast never
// overflows, so the non-saturating scalar encoder is the right reference.
uint8_t ReferenceQuantize(float x, float scale, DType fp8) {
  const float max = static_cast<float>(GetFInfo(fp8).max);
  float y = x / scale;
  if (y > max) y = max;
  if (y < -max) y = -max;
  return fp8 == DType::kFloat8E4M3FN ? F32ToE4M3FN(y) : F32ToE5M2(y);
}

std::vector<float> TestInputs(size_t n, uint32_t seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          448.0f,
                          464.0f,
                          465.0f,
                          1000.0f,
                          -1e30f,
                          57344.0f,
                          61440.0f,
                          1e38f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          std::ldexp(1.0f, -10),
                          std::ldexp(3.0f, -17),
                          1e-40f};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  while (v.size() < n) {
    const uint32_t r = rng();
    v.push_back(r % 5 == 0 ? F32FromBits(rng())
                           : std::ldexp(normal(rng), static_cast<int>(r % 40) - 20));
  }
  v.resize(n);
  return v;
}

TEST(QuantizeKvTest, ContractEndToEndVectors) {
  // bf16 input, scale 1, e4m3fn: 1000 -> 0x7E, -1e30 -> 0xFE, NaN -> 0x7F.
  const float f32[3] = {1000.0f, -1e30f, NAN};
  uint16_t bf16[3];
  Convert(DType::kFloat32, f32, DType::kBFloat16, bf16, 3);
  uint8_t k[3], v[3];
  const auto key = TensorView::Contiguous(bf16, DType::kBFloat16, {1, 1, 3});
  QuantizeKv(DType::kFloat8E4M3FN, key, key, 1.0f, 1.0f,
             TensorView::Contiguous(k, DType::kFloat8E4M3FN, {1, 1, 3}),
             TensorView::Contiguous(v, DType::kFloat8E4M3FN, {1, 1, 3}));
  EXPECT_EQ(k[0], 0x7E);
  EXPECT_EQ(k[1], 0xFE);
  EXPECT_EQ(k[2], 0x7F);
  EXPECT_EQ(std::vector<uint8_t>(k, k + 3), std::vector<uint8_t>(v, v + 3));
}

TEST(QuantizeKvTest, NoNaNOrInfFromNonNaNInput) {
  const std::vector<float> in = TestInputs(5000, 1);
  for (DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    for (float scale : {1.0f, 1e-30f, 0.5f}) {  // tiny scales push everything past max
      std::vector<uint8_t> out(in.size());
      QuantizeSpan(DType::kFloat32, in.data(), fp8, out.data(), in.size(), scale);
      for (size_t i = 0; i < in.size(); ++i) {
        const float back = LoadAsF32(fp8, &out[i]);
        if (std::isnan(in[i])) {
          EXPECT_TRUE(std::isnan(back)) << i;
          EXPECT_EQ(std::signbit(back), std::signbit(in[i])) << i;
        } else {
          ASSERT_TRUE(std::isfinite(back))
              << DTypeName(fp8) << " input " << in[i] << " scale " << scale;
          EXPECT_LE(std::fabs(back), GetFInfo(fp8).max);
        }
      }
    }
  }
}

TEST(QuantizeKvTest, InfinityBecomesMax) {
  const float in[2] = {INFINITY, -INFINITY};
  uint8_t out[2];
  QuantizeSpan(DType::kFloat32, in, DType::kFloat8E5M2, out, 2, 1.0f);
  EXPECT_EQ(out[0], 0x7B);
  EXPECT_EQ(out[1], 0xFB);
  QuantizeSpan(DType::kFloat32, in, DType::kFloat8E4M3FN, out, 2, 2.0f);
  EXPECT_EQ(out[0], 0x7E);
  EXPECT_EQ(out[1], 0xFE);
}

TEST(QuantizeKvTest, ScaleDividesBeforeCasting) {
  // 896 / 2 = 448 exactly (0x7E); 3 / 0.5 = 6 (0x4C); 1 / 3 in f32 then RNE -> 0x2B (0.34375
  // is nearer to f32(1/3) = 0.33333334 than 0.3125).
  const float in[3] = {896.0f, 3.0f, 1.0f};
  uint8_t out[3];
  QuantizeSpan(DType::kFloat32, in, DType::kFloat8E4M3FN, out, 1, 2.0f);
  QuantizeSpan(DType::kFloat32, in + 1, DType::kFloat8E4M3FN, out + 1, 1, 0.5f);
  QuantizeSpan(DType::kFloat32, in + 2, DType::kFloat8E4M3FN, out + 2, 1, 3.0f);
  EXPECT_EQ(out[0], 0x7E);
  EXPECT_EQ(out[1], 0x4C);
  EXPECT_EQ(out[2], 0x2B);
}

TEST(QuantizeKvTest, BitExactWithScalarFormulationOnEveryTarget) {
  const std::vector<float> f32 = TestInputs(1037, 2);  // odd: every target has a tail
  test::ForEachSupportedTarget([&](int64_t) {
    for (DType src_dtype : kAllDTypes) {
      std::vector<uint8_t> src(f32.size() * DTypeSize(src_dtype));
      ConvertScalar(DType::kFloat32, f32.data(), src_dtype, src.data(), f32.size());
      for (DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
        for (float scale : {1.0f, 0.5f, 3.7f, 1e-3f, 123.456f, 1e-40f, 3e38f}) {
          std::vector<uint8_t> got(f32.size());
          QuantizeSpan(src_dtype, src.data(), fp8, got.data(), f32.size(), scale);
          for (size_t i = 0; i < f32.size(); ++i) {
            const float x = LoadAsF32(src_dtype, &src[i * DTypeSize(src_dtype)]);
            ASSERT_EQ(got[i], ReferenceQuantize(x, scale, fp8))
                << DTypeName(src_dtype) << "->" << DTypeName(fp8) << " x=" << x
                << " scale=" << scale;
          }
        }
      }
    }
  });
}

TEST(QuantizeKvTest, KeyAndValueUseTheirOwnScales) {
  const int64_t t = 3, h = 2, d = 5;  // [T, Hkv, D]
  std::vector<float> k = TestInputs(t * h * d, 3), v = TestInputs(t * h * d, 4);
  std::vector<uint8_t> ko(k.size()), vo(v.size());
  QuantizeKv(DType::kFloat8E5M2, TensorView::Contiguous(k.data(), DType::kFloat32, {t, h, d}),
             TensorView::Contiguous(v.data(), DType::kFloat32, {t, h, d}), 0.25f, 8.0f,
             TensorView::Contiguous(ko.data(), DType::kFloat8E5M2, {t, h, d}),
             TensorView::Contiguous(vo.data(), DType::kFloat8E5M2, {t, h, d}));
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(ko[i], ReferenceQuantize(k[i], 0.25f, DType::kFloat8E5M2)) << i;
    EXPECT_EQ(vo[i], ReferenceQuantize(v[i], 8.0f, DType::kFloat8E5M2)) << i;
  }
}

bool Contains(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

// Runs `f` and returns the InvalidArgument message ("" if nothing was thrown).
template <class F>
std::string ErrorOf(const F& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(QuantizeKvTest, ValidationMessagesNameTheOffendingValues) {
  float k[24] = {}, v[24] = {};
  uint8_t ko[24], vo[24];
  const auto key = TensorView::Contiguous(k, DType::kFloat32, {2, 3, 4});
  const auto value = TensorView::Contiguous(v, DType::kFloat32, {2, 3, 4});
  const auto ko_v = TensorView::Contiguous(ko, DType::kFloat8E4M3FN, {2, 3, 4});
  const auto vo_v = TensorView::Contiguous(vo, DType::kFloat8E4M3FN, {2, 3, 4});

  EXPECT_PRED2(Contains,
               ErrorOf([&] { QuantizeKv(DType::kBFloat16, key, value, 1, 1, ko_v, vo_v); }),
               std::string("cache_dtype=bfloat16 is not an fp8 dtype"));
  EXPECT_PRED2(Contains,
               ErrorOf([&] { QuantizeSpan(DType::kFloat32, k, DType::kFloat16, ko, 1, 1.0f); }),
               std::string("cache_dtype=float16"));
  for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    EXPECT_PRED2(Contains,
                 ErrorOf([&] { QuantizeKv(DType::kFloat8E4M3FN, key, value, bad, 1, ko_v, vo_v); }),
                 std::string("k_scale="))
        << bad;
    EXPECT_PRED2(Contains,
                 ErrorOf([&] { QuantizeKv(DType::kFloat8E4M3FN, key, value, 1, bad, ko_v, vo_v); }),
                 std::string("must be finite and > 0"))
        << bad;
  }
  const auto value_short = TensorView::Contiguous(v, DType::kFloat32, {2, 3, 3});
  EXPECT_PRED2(Contains, ErrorOf([&] {
                 QuantizeKv(DType::kFloat8E4M3FN, key, value_short, 1, 1, ko_v, vo_v);
               }),
               std::string("Expected k.shape=(2, 3, 4) to be equal to v.shape=(2, 3, 3)"));
  const auto ko_wrong_dtype = TensorView::Contiguous(ko, DType::kFloat8E5M2, {2, 3, 4});
  EXPECT_PRED2(Contains, ErrorOf([&] {
                 QuantizeKv(DType::kFloat8E4M3FN, key, value, 1, 1, ko_wrong_dtype, vo_v);
               }),
               std::string("key_out=float8_e5m2"));
  const auto ko_wrong_shape = TensorView::Contiguous(ko, DType::kFloat8E4M3FN, {3, 2, 4});
  EXPECT_PRED2(Contains, ErrorOf([&] {
                 QuantizeKv(DType::kFloat8E4M3FN, key, value, 1, 1, ko_wrong_shape, vo_v);
               }),
               std::string("key_out=(3, 2, 4)"));
  TensorView strided = key;
  strided.shape = {2, 3, 2, 0};
  strided.strides = {12, 4, 2, 0};  // every other element of the last axis
  TensorView strided_v = value;
  strided_v.shape = strided.shape;
  strided_v.strides = strided.strides;
  auto ko_small = TensorView::Contiguous(ko, DType::kFloat8E4M3FN, {2, 3, 2});
  auto vo_small = TensorView::Contiguous(vo, DType::kFloat8E4M3FN, {2, 3, 2});
  EXPECT_PRED2(Contains, ErrorOf([&] {
                 QuantizeKv(DType::kFloat8E4M3FN, strided, strided_v, 1, 1, ko_small, vo_small);
               }),
               std::string("key with shape (2, 3, 2) must be contiguous"));
  // And nothing is thrown for valid input.
  EXPECT_EQ(ErrorOf([&] { QuantizeKv(DType::kFloat8E4M3FN, key, value, 1, 1, ko_v, vo_v); }), "");
}

}  // namespace
}  // namespace rpa
