// Every one of the 65,536 bf16 and 65,536 f16 inputs, converted to e4m3fn, e5m2 and the
// other 16-bit format, in both overflow modes, by the scalar path and by bulk Convert on
// every SIMD target, against an independent reference.
//
// The reference shares nothing with scalar_codec.h: it decodes codes from their bit
// fields with std::ldexp, finds the two neighbouring representable magnitudes of |x| by
// binary search over the target's codes, and picks the nearer one, ties to the even code.
// All comparisons are exact in double: inputs and target values have at most 11
// significant bits, and the midpoint of two adjacent target values has one bit more.
// Overflow follows rpa-contract.md §5: the code just past the largest finite one is given
// its pattern's value (e4m3fn 0x7F -> 480, e5m2 0x7C -> 65536, f16 0x7C00 -> 65536, bf16
// 0x7F80 -> 2^128) and rounding to it means overflow: NaN for e4m3fn, inf for the others
// (ties go to it when it is the even code, hence e4m3fn 464 -> 448 and e5m2 61440 -> inf).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "numerics/convert.h"
#include "numerics/dtype.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

struct RefFormat {
  int man;  // fraction bits
  int bias;
  uint32_t max_code;  // largest finite magnitude code
  uint32_t inf_code;  // 0 when the format has no inf
  uint32_t nan_code;  // canonical quiet NaN magnitude
  uint32_t sign_bit;
};

RefFormat RefFormatOf(DType d) {
  switch (d) {
    case DType::kFloat8E4M3FN:
      return {3, 7, 0x7E, 0, 0x7F, 0x80};
    case DType::kFloat8E5M2:
      return {2, 15, 0x7B, 0x7C, 0x7E, 0x80};
    case DType::kFloat16:
      return {10, 15, 0x7BFF, 0x7C00, 0x7E00, 0x8000};
    case DType::kBFloat16:
      return {7, 127, 0x7F7F, 0x7F80, 0x7FC0, 0x8000};
    default:
      ADD_FAILURE() << "no reference format";
      return {};
  }
}

// Magnitude of a finite code (also of max_code + 1, the "overflow" pattern).
double RefMagnitude(const RefFormat& f, uint32_t mag_code) {
  const int e = static_cast<int>(mag_code >> f.man);
  const uint32_t m = mag_code & ((1u << f.man) - 1);
  return e == 0 ? std::ldexp(m, 1 - f.bias - f.man)
                : std::ldexp(static_cast<double>((1u << f.man) + m), e - f.bias - f.man);
}

// Decodes a 16-bit input; nan/inf reported separately.
double RefDecode16(DType d, uint32_t code, bool* is_nan) {
  const RefFormat f = RefFormatOf(d);
  const uint32_t mag = code & (f.sign_bit - 1);
  const bool neg = code & f.sign_bit;
  *is_nan = mag > f.inf_code;
  if (mag == f.inf_code) return neg ? -INFINITY : INFINITY;
  const double v = RefMagnitude(f, mag);
  return neg ? -v : v;
}

uint32_t RefEncode(DType to, double x, bool is_nan, bool saturate) {
  const RefFormat f = RefFormatOf(to);
  const uint32_t sign = std::signbit(x) ? f.sign_bit : 0;
  const uint32_t overflow = saturate ? f.max_code : (f.inf_code ? f.inf_code : f.nan_code);
  if (is_nan) return sign | f.nan_code;
  const double a = std::fabs(x);
  const uint32_t past = f.max_code + 1;
  if (a >= RefMagnitude(f, past)) return sign | overflow;  // inf included
  // Largest lo in [0, past) with magnitude(lo) <= a.
  uint32_t lo = 0, hi = past;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (RefMagnitude(f, mid) <= a ? lo : hi) = mid;
  }
  uint32_t r = lo;
  if (RefMagnitude(f, lo) != a) {
    const double midpoint = (RefMagnitude(f, lo) + RefMagnitude(f, lo + 1)) / 2;
    if (a > midpoint || (a == midpoint && (lo & 1))) r = lo + 1;
  }
  return sign | (r == past ? overflow : r);
}

uint32_t ReadCode(const std::vector<uint8_t>& bytes, size_t i, size_t size) {
  return size == 1 ? bytes[i] : (bytes[2 * i] | (bytes[2 * i + 1] << 8));
}

class Exhaustive16Test : public ::testing::TestWithParam<std::pair<DType, DType>> {};

TEST_P(Exhaustive16Test, AllInputsMatchTheReferenceScalarAndBulkOnEveryTarget) {
  const auto [from, to] = GetParam();
  std::vector<uint16_t> src(65536);
  for (uint32_t c = 0; c < 65536; ++c) src[c] = static_cast<uint16_t>(c);
  const size_t ds = DTypeSize(to);
  for (Overflow mode : {Overflow::kNonSaturating, Overflow::kSaturate}) {
    const bool sat = mode == Overflow::kSaturate;
    std::vector<uint32_t> want(65536);
    for (uint32_t c = 0; c < 65536; ++c) {
      bool nan = false;
      const double x = RefDecode16(from, c, &nan);
      want[c] = RefEncode(to, x, nan, sat);
    }
    std::vector<uint8_t> scalar(65536 * ds);
    ConvertScalar(from, src.data(), to, scalar.data(), 65536, mode);
    int failures = 0;
    for (uint32_t c = 0; c < 65536 && failures < 10; ++c) {
      if (ReadCode(scalar, c, ds) != want[c]) {
        ++failures;
        ADD_FAILURE() << "scalar " << DTypeName(from) << " 0x" << std::hex << c << " -> 0x"
                      << ReadCode(scalar, c, ds) << ", reference 0x" << want[c];
      }
    }
    test::ForEachSupportedTarget([&](int64_t) {
      std::vector<uint8_t> bulk(65536 * ds);
      Convert(from, src.data(), to, bulk.data(), 65536, mode);
      int bulk_failures = 0;
      for (uint32_t c = 0; c < 65536 && bulk_failures < 10; ++c) {
        if (ReadCode(bulk, c, ds) != want[c]) {
          ++bulk_failures;
          ADD_FAILURE() << "bulk " << DTypeName(from) << " 0x" << std::hex << c << " -> 0x"
                        << ReadCode(bulk, c, ds) << ", reference 0x" << want[c];
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, Exhaustive16Test,
                         ::testing::Values(std::pair{DType::kBFloat16, DType::kFloat8E4M3FN},
                                           std::pair{DType::kBFloat16, DType::kFloat8E5M2},
                                           std::pair{DType::kFloat16, DType::kFloat8E4M3FN},
                                           std::pair{DType::kFloat16, DType::kFloat8E5M2},
                                           std::pair{DType::kBFloat16, DType::kFloat16},
                                           std::pair{DType::kFloat16, DType::kBFloat16}),
                         [](const auto& info) {
                           return std::string(DTypeName(info.param.first)) + "_to_" +
                                  std::string(DTypeName(info.param.second));
                         });

// The reference itself, on facts stated in rpa-contract.md §5 (so a reference bug that
// mirrors a codec bug cannot hide).
TEST(Exhaustive16ReferenceTest, AgreesWithTheContractThresholds) {
  EXPECT_EQ(RefEncode(DType::kFloat8E4M3FN, 464.0, false, false), 0x7Eu);
  EXPECT_EQ(RefEncode(DType::kFloat8E4M3FN, 465.0, false, false), 0x7Fu);
  EXPECT_EQ(RefEncode(DType::kFloat8E4M3FN, -500.0, false, true), 0xFEu);
  EXPECT_EQ(RefEncode(DType::kFloat8E5M2, 61440.0, false, false), 0x7Cu);
  EXPECT_EQ(RefEncode(DType::kFloat8E5M2, 61439.99609375, false, false), 0x7Bu);
  EXPECT_EQ(RefEncode(DType::kFloat8E5M2, std::ldexp(3.0, -17), false, false), 0x02u);
  EXPECT_EQ(RefEncode(DType::kFloat8E4M3FN, std::ldexp(1.0, -10), false, false), 0x00u);
  EXPECT_EQ(RefEncode(DType::kBFloat16, 65504.0, false, false), 0x4780u);
  EXPECT_EQ(RefEncode(DType::kFloat16, 65520.0, false, false), 0x7C00u);
  EXPECT_EQ(RefEncode(DType::kFloat16, 65519.0, false, false), 0x7BFFu);
}

}  // namespace
}  // namespace rpa
