// Bulk Convert (SIMD, every target this CPU supports) against ConvertScalar, bit for bit:
// every (from, to) pair, both overflow modes, lengths 0..70, misaligned pointers, and
// inputs that hit every rounding / overflow / NaN branch. Also checks that Convert writes
// nothing outside [0, n) and works in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/convert.h"
#include "numerics/dtype.h"
#include "numerics/scalar_codec.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

constexpr Overflow kModes[] = {Overflow::kNonSaturating, Overflow::kSaturate};
constexpr uint8_t kCanary = 0xA5;

// f32 values on the branches of every encoder: exact codes, ties, just-off ties, the
// overflow thresholds of each format, subnormals of each format, f32 subnormals, inf, NaN
// with payloads, and random bit patterns.
std::vector<float> InterestingF32(size_t count, uint32_t seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.0f,
                          0.5f,
                          240.0f,
                          256.0f,
                          288.0f,
                          448.0f,
                          464.0f,
                          464.00003f,
                          465.0f,
                          480.0f,
                          57344.0f,
                          59392.0f,
                          61439.996f,
                          61440.0f,
                          65504.0f,
                          65519.996f,
                          65520.0f,
                          65536.0f,
                          3.0e38f,
                          std::ldexp(1.0f, -9),
                          std::ldexp(1.0f, -10),
                          std::ldexp(3.0f, -10),
                          std::ldexp(1.0f, -16),
                          std::ldexp(1.0f, -17),
                          std::ldexp(3.0f, -17),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25),
                          std::ldexp(1.0f, -126),
                          std::ldexp(1.0f, -149),
                          1.0625f,
                          1.1875f,
                          1.125f,
                          1.375f,
                          0.1f,
                          3.14159265f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          F32FromBits(0x7F800001u),
                          F32FromBits(0xFFA00000u),
                          F32FromBits(0x7F7FFFFFu),
                          F32FromBits(0x477FF000u)};
  std::mt19937 rng(seed);
  while (v.size() < count) {
    const uint32_t r = rng();
    switch (r % 4) {
      case 0:
        v.push_back(F32FromBits(rng()));
        break;   // any bit pattern
      case 1: {  // a tie or near-tie of a coarse grid: few significant bits, +-1 ulp
        const uint32_t bits = (rng() & 0x3F8F0000u) + ((r >> 8) % 3) - 1;
        v.push_back(F32FromBits(bits ^ (r & 0x80000000u)));
        break;
      }
      case 2:
        v.push_back(std::ldexp(static_cast<float>(rng() % 4096) / 64.0f,
                               static_cast<int>(rng() % 60) - 40));
        break;
      default:
        v.push_back(-std::ldexp(static_cast<float>(rng() % 256), static_cast<int>(r % 24) - 20));
    }
  }
  v.resize(count);
  return v;
}

// Source bytes of dtype `from`: the interesting f32 values converted by the scalar path
// (so every narrow code of interest appears), plus raw random codes (NaN payloads too).
std::vector<uint8_t> SourceBytes(DType from, size_t n, uint32_t seed) {
  const size_t size = DTypeSize(from);
  std::vector<uint8_t> bytes(n * size);
  const std::vector<float> f = InterestingF32(n, seed);
  ConvertScalar(DType::kFloat32, f.data(), from, bytes.data(), n);
  std::mt19937 rng(seed + 1);
  for (size_t i = 0; i < n; i += 3) {
    for (size_t b = 0; b < size; ++b) bytes[i * size + b] = static_cast<uint8_t>(rng());
  }
  return bytes;
}

TEST(ConvertBulkTest, MatchesScalarForAllPairsLengthsOffsetsAndTargets) {
  test::ForEachSupportedTarget([&](int64_t) {
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        const size_t ss = DTypeSize(from), ds = DTypeSize(to);
        for (Overflow mode : kModes) {
          for (size_t n = 0; n <= 70; ++n) {
            for (size_t offset : {0u, 1u, 3u}) {  // byte offsets: misaligned for every size
              SCOPED_TRACE(::testing::Message() << DTypeName(from) << "->" << DTypeName(to)
                                                << " n=" << n << " offset=" << offset
                                                << " saturate=" << (mode == Overflow::kSaturate));
              const std::vector<uint8_t> src = SourceBytes(from, n, static_cast<uint32_t>(n));
              std::vector<uint8_t> src_buf(offset + src.size() + 1);
              if (!src.empty()) std::memcpy(src_buf.data() + offset, src.data(), src.size());
              std::vector<uint8_t> want(n * ds);
              ConvertScalar(from, src.data(), to, want.data(), n, mode);
              // Canaries on both sides catch writes outside [0, n).
              std::vector<uint8_t> got(offset + n * ds + 64, kCanary);
              Convert(from, src_buf.data() + offset, to, got.data() + offset, n, mode);
              for (size_t i = 0; i < offset; ++i) ASSERT_EQ(got[i], kCanary) << "before, i=" << i;
              for (size_t i = offset + n * ds; i < got.size(); ++i) {
                ASSERT_EQ(got[i], kCanary) << "after, i=" << i;
              }
              for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(0, std::memcmp(got.data() + offset + i * ds, want.data() + i * ds, ds))
                    << "element " << i << ", source bytes at " << i * ss;
              }
            }
          }
        }
      }
    }
  });
}

TEST(ConvertBulkTest, LongRandomSpansMatchScalar) {
  constexpr size_t kN = 100'003;  // odd, so every target has a tail
  test::ForEachSupportedTarget([&](int64_t) {
    for (DType from : kAllDTypes) {
      const std::vector<uint8_t> src = SourceBytes(from, kN, 7);
      for (DType to : kAllDTypes) {
        for (Overflow mode : kModes) {
          SCOPED_TRACE(::testing::Message() << DTypeName(from) << "->" << DTypeName(to));
          std::vector<uint8_t> want(kN * DTypeSize(to)), got(kN * DTypeSize(to));
          ConvertScalar(from, src.data(), to, want.data(), kN, mode);
          Convert(from, src.data(), to, got.data(), kN, mode);
          ASSERT_EQ(want, got);
        }
      }
    }
  });
}

TEST(ConvertBulkTest, InPlaceForEqualElementSizes) {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::kBFloat16, DType::kFloat16},        {DType::kFloat16, DType::kBFloat16},
      {DType::kFloat8E4M3FN, DType::kFloat8E5M2}, {DType::kFloat8E5M2, DType::kFloat8E4M3FN},
      {DType::kFloat32, DType::kFloat32},         {DType::kBFloat16, DType::kBFloat16}};
  test::ForEachSupportedTarget([&](int64_t) {
    for (const auto& [from, to] : pairs) {
      const size_t n = 1001;
      std::vector<uint8_t> buf = SourceBytes(from, n, 3);
      std::vector<uint8_t> want(buf.size());
      ConvertScalar(from, buf.data(), to, want.data(), n);
      Convert(from, buf.data(), to, buf.data(), n);
      EXPECT_EQ(want, buf) << DTypeName(from) << "->" << DTypeName(to);
    }
  });
}

TEST(ConvertBulkTest, SameDTypeIsACopyInBothPaths) {
  // bf16 0x7F81 (a signalling NaN payload) and e5m2 0x7D (a non-canonical NaN) are kept,
  // as numpy's astype to the same dtype keeps them.
  const uint16_t src[3] = {0x7F81, 0xFF81, 0x3F80};
  uint16_t bulk[3], scalar[3];
  Convert(DType::kBFloat16, src, DType::kBFloat16, bulk, 3, Overflow::kSaturate);
  ConvertScalar(DType::kBFloat16, src, DType::kBFloat16, scalar, 3, Overflow::kSaturate);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bulk[i], src[i]) << i;
    EXPECT_EQ(scalar[i], src[i]) << i;
  }
  const uint8_t e5[2] = {0x7D, 0x7C};  // NaN, inf: saturation does not apply to a copy
  uint8_t e5_out[2];
  Convert(DType::kFloat8E5M2, e5, DType::kFloat8E5M2, e5_out, 2, Overflow::kSaturate);
  EXPECT_EQ(e5_out[0], 0x7D);
  EXPECT_EQ(e5_out[1], 0x7C);
}

TEST(ConvertBulkTest, NullPointerWithElementsThrows) {
  uint8_t b[4] = {};
  EXPECT_THROW(Convert(DType::kFloat32, nullptr, DType::kFloat8E4M3FN, b, 1),
               std::invalid_argument);
  EXPECT_NO_THROW(Convert(DType::kFloat32, nullptr, DType::kFloat8E4M3FN, nullptr, 0));
}

}  // namespace
}  // namespace rpa
