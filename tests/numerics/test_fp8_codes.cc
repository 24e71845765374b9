// The fp8 / bf16 formats code by code: every one of the 256 codes of each fp8 format
// decodes to the value computed from its bit fields with std::ldexp (independent of
// scalar_codec.h), encode(decode(c)) == c for every non-NaN code, NaN codes decode to NaN
// with the code's sign, and the test vectors of rpa-contract.md §5 hold for the scalar
// codec and for bulk Convert on every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "numerics/convert.h"
#include "numerics/dtype.h"
#include "numerics/scalar_codec.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

// Value of an fp8 code from the OCP definition: sign, exponent field e, fraction m;
// e == 0: m * 2^(1 - bias - man) (subnormal); else (2^man + m) * 2^(e - bias - man).
double Fp8Value(int code, int man, int bias) {
  const int exp_field = (code & 0x7F) >> man;
  const int m = code & ((1 << man) - 1);
  const double mag = exp_field == 0 ? std::ldexp(m, 1 - bias - man)
                                    : std::ldexp((1 << man) + m, exp_field - bias - man);
  return (code & 0x80) ? -mag : mag;
}

bool IsE4M3NanCode(int c) { return (c & 0x7F) == 0x7F; }
bool IsE5M2InfCode(int c) { return (c & 0x7F) == 0x7C; }
bool IsE5M2NanCode(int c) { return (c & 0x7F) > 0x7C; }

TEST(Fp8CodesTest, E4M3FNDecodesEveryCodeFromItsBitFields) {
  for (int c = 0; c < 256; ++c) {
    const float got = E4M3FNToF32(static_cast<uint8_t>(c));
    if (IsE4M3NanCode(c)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), Fp8Value(c, 3, 7)) << "code " << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;  // -0 included
    }
  }
  EXPECT_EQ(Fp8Value(0x7E, 3, 7), 448.0);
  EXPECT_EQ(Fp8Value(0x01, 3, 7), std::ldexp(1.0, -9));
  EXPECT_EQ(Fp8Value(0x08, 3, 7), std::ldexp(1.0, -6));
}

TEST(Fp8CodesTest, E5M2DecodesEveryCodeFromItsBitFields) {
  for (int c = 0; c < 256; ++c) {
    const float got = E5M2ToF32(static_cast<uint8_t>(c));
    if (IsE5M2NanCode(c)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
    } else if (IsE5M2InfCode(c)) {
      EXPECT_EQ(got, c >= 0x80 ? -INFINITY : INFINITY) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), Fp8Value(c, 2, 15)) << "code " << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
    }
  }
  EXPECT_EQ(Fp8Value(0x7B, 2, 15), 57344.0);
  EXPECT_EQ(Fp8Value(0x01, 2, 15), std::ldexp(1.0, -16));
  EXPECT_EQ(Fp8Value(0x04, 2, 15), std::ldexp(1.0, -14));
}

TEST(Fp8CodesTest, EncodeOfDecodeIsIdentityOnNonNaNCodes) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if (!IsE4M3NanCode(c)) {
      EXPECT_EQ(F32ToE4M3FN(E4M3FNToF32(code)), code) << c;
      EXPECT_EQ(F32ToE4M3FNSaturate(E4M3FNToF32(code)), code) << c;
    }
    if (!IsE5M2NanCode(c)) {
      EXPECT_EQ(F32ToE5M2(E5M2ToF32(code)), code) << c;
      if (!IsE5M2InfCode(c)) {
        EXPECT_EQ(F32ToE5M2Saturate(E5M2ToF32(code)), code) << c;
      }
    }
  }
}

TEST(Fp8CodesTest, BulkDecodeAndRoundTripMatchOnEveryTarget) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  test::ForEachSupportedTarget([&](int64_t) {
    for (DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      const int man = fp8 == DType::kFloat8E4M3FN ? 3 : 2;
      const int bias = fp8 == DType::kFloat8E4M3FN ? 7 : 15;
      std::vector<float> f(256);
      Convert(fp8, codes.data(), DType::kFloat32, f.data(), 256);
      std::vector<uint8_t> back(256);
      Convert(DType::kFloat32, f.data(), fp8, back.data(), 256);
      for (int c = 0; c < 256; ++c) {
        const bool nan = fp8 == DType::kFloat8E4M3FN ? IsE4M3NanCode(c) : IsE5M2NanCode(c);
        const bool inf = fp8 == DType::kFloat8E5M2 && IsE5M2InfCode(c);
        if (nan) {
          EXPECT_TRUE(std::isnan(f[c])) << c;
          EXPECT_EQ(std::signbit(f[c]), c >= 0x80) << c;
        } else if (inf) {
          EXPECT_EQ(f[c], c >= 0x80 ? -INFINITY : INFINITY);
          EXPECT_EQ(back[c], c);
        } else {
          EXPECT_EQ(static_cast<double>(f[c]), Fp8Value(c, man, bias)) << DTypeName(fp8) << c;
          EXPECT_EQ(back[c], c) << DTypeName(fp8) << c;
        }
      }
    }
  });
}

struct Vector {
  float input;
  uint32_t code;
};

// rpa-contract.md §5, verbatim.
const Vector kE4M3Vectors[] = {
    {1.0f, 0x38},
    {-2.0f, 0xC0},
    {0.5f, 0x30},
    {240.0f, 0x77},
    {256.0f, 0x78},
    {288.0f, 0x79},
    {448.0f, 0x7E},
    {-448.0f, 0xFE},
    {464.0f, 0x7E},
    {465.0f, 0x7F},
    {480.0f, 0x7F},
    {500.0f, 0x7F},
    {INFINITY, 0x7F},
    {NAN, 0x7F},
    {-500.0f, 0xFF},
    {-INFINITY, 0xFF},
    {std::ldexp(1.0f, -9), 0x01},
    {std::ldexp(1.0f, -10), 0x00},
    {std::ldexp(3.0f, -10), 0x02},
    {std::ldexp(15.0f, -10), 0x08},
    {0.013671875f, 0x07},
    {0.015625f, 0x08},
    {1.0625f, 0x38},
    {1.1875f, 0x3A},
    {0.1f, 0x1D},
    {std::numbers::pi_v<float>, 0x45},
    {1.0625f + std::ldexp(1.0f, -20), 0x39},
};
const Vector kE5M2Vectors[] = {
    {1.0f, 0x3C},
    {-1.0f, 0xBC},
    {0.5f, 0x38},
    {2.0f, 0x40},
    {448.0f, 0x5F},
    {57344.0f, 0x7B},
    {60000.0f, 0x7B},
    {61439.996f, 0x7B},
    {61440.0f, 0x7C},
    {65536.0f, 0x7C},
    {INFINITY, 0x7C},
    {-INFINITY, 0xFC},
    {NAN, 0x7E},
    {std::ldexp(1.0f, -14), 0x04},
    {std::ldexp(1.0f, -16), 0x01},
    {std::ldexp(1.0f, -17), 0x00},
    {std::ldexp(3.0f, -17), 0x02},
    {1.125f, 0x3C},
    {1.375f, 0x3E},
    {0.1f, 0x2E},
    {1.125f + std::ldexp(1.0f, -20), 0x3D},
};
const Vector kBF16Vectors[] = {
    {1.0f, 0x3F80},
    {0.1f, 0x3DCD},
    {1.0f + std::ldexp(1.0f, -8), 0x3F80},
    {1.0f + 3 * std::ldexp(1.0f, -8), 0x3F82},
    {-2.5f, 0xC020},
    {65504.0f, 0x4780},
    {std::numeric_limits<float>::max(), 0x7F80},
};

TEST(ContractVectorsTest, ScalarCodec) {
  // 61439.996 must be the f32 just below 61440, or the vector would test nothing new.
  ASSERT_EQ(F32Bits(61439.996f), F32Bits(61440.0f) - 1);
  for (const auto& v : kE4M3Vectors) EXPECT_EQ(F32ToE4M3FN(v.input), v.code) << v.input;
  for (const auto& v : kE5M2Vectors) EXPECT_EQ(F32ToE5M2(v.input), v.code) << v.input;
  for (const auto& v : kBF16Vectors) EXPECT_EQ(F32ToBF16(v.input), v.code) << v.input;
}

template <size_t N>
void ExpectBulk(const Vector (&vectors)[N], DType to) {
  std::vector<float> in;
  for (const auto& v : vectors) in.push_back(v.input);
  std::vector<uint8_t> out(N * DTypeSize(to));
  Convert(DType::kFloat32, in.data(), to, out.data(), N);
  for (size_t i = 0; i < N; ++i) {
    const uint32_t got = DTypeSize(to) == 1 ? out[i] : (out[2 * i] | (out[2 * i + 1] << 8));
    EXPECT_EQ(got, vectors[i].code) << DTypeName(to) << " input " << vectors[i].input;
  }
}

TEST(ContractVectorsTest, BulkConvertOnEveryTarget) {
  test::ForEachSupportedTarget([&](int64_t) {
    ExpectBulk(kE4M3Vectors, DType::kFloat8E4M3FN);
    ExpectBulk(kE5M2Vectors, DType::kFloat8E5M2);
    ExpectBulk(kBF16Vectors, DType::kBFloat16);
  });
}

TEST(ContractVectorsTest, NegativeNaNKeepsItsSign) {
  EXPECT_EQ(F32ToE4M3FN(-NAN), 0xFF);
  EXPECT_EQ(F32ToE5M2(-NAN), 0xFE);
  EXPECT_EQ(F32ToBF16(-NAN), 0xFFC0);
}

}  // namespace
}  // namespace rpa
