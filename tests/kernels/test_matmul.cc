// MatMul against a float64 reference, for both weight formats, on every SIMD target this
// CPU supports, over shapes that exercise every edge: row tails (M % 6, M % 12) and row
// blocks (M > 96), partial panels (N % 32, N % 16, N % 8), K blocks (K = 255, 257, 530 over 128-step blocks) and K = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "tests/numerics/target_loop.h"
#include "util/error.h"

namespace rpa {
namespace {

// bf16 round-to-nearest-even of a finite f32, written here independently of numerics/:
// add half an ulp of the kept part (minus one on a tie with an even result), then truncate.
float RoundToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Checks y against x · w'ᵀ in float64, where w' is w as the format stores it (bf16-rounded or
// exact). Any f32 summation order of k products (FMA or not) errs by at most
// k * 2^-24 * sum |x w'| (first-order bound; k * 2^-24 << 1 here).
void ExpectMatchesReference(const std::vector<float>& x, const std::vector<float>& w,
                            const std::vector<float>& y, size_t m, size_t n, size_t k,
                            WeightFormat format) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (size_t p = 0; p < k; ++p) {
        const float wv = format == WeightFormat::kBFloat16 ? RoundToBf16(w[j * k + p]) : w[j * k + p];
        ref += static_cast<double>(x[i * k + p]) * wv;
        mag += std::fabs(static_cast<double>(x[i * k + p]) * wv);
      }
      ASSERT_NEAR(y[i * n + j], ref, k * 0x1p-24 * mag)
          << WeightFormatName(format) << " m=" << m << " n=" << n << " k=" << k << " at " << i
          << "," << j;
    }
  }
}

TEST(MatMulTest, MatchesFloat64ReferenceOnEveryTarget) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  test::ForEachSupportedTarget([&](int64_t) {
    for (WeightFormat format : {WeightFormat::kFloat32, WeightFormat::kBFloat16}) {
      for (size_t m : {0, 1, 5, 6, 7, 13, 25}) {
        for (size_t n : {1, 8, 9, 17, 32, 33, 70}) {
          for (size_t k : {0, 1, 7, 255, 257}) {
            std::vector<float> x(m * k), w(n * k), y(m * n, -1.0f);
            for (float& v : x) v = dist(rng);
            for (float& v : w) v = dist(rng);
            MatMul(x.data(), PackedWeights(w.data(), n, k, format), y.data(), m);
            ExpectMatchesReference(x, w, y, m, n, k, format);
          }
        }
      }
    }
  });
}

// Large enough to be split over the thread pool and into row and K blocks: each output
// matches the float64 reference, and each row is bit-identical to the same row computed
// alone (m = 1, where tiles, blocks and splits differ) — the property batching invariance of
// the engine rests on.
TEST(MatMulTest, ThreadedBlockedMatchesReferenceAndSingleRows) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t m = 203, n = 1001, k = 530;
  std::vector<float> x(m * k), w(n * k), y(m * n, -1.0f), row(n);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  for (WeightFormat format : {WeightFormat::kFloat32, WeightFormat::kBFloat16}) {
    const PackedWeights packed(w.data(), n, k, format);
    MatMul(x.data(), packed, y.data(), m);
    ExpectMatchesReference(x, w, y, m, n, k, format);
    for (size_t i = 0; i < m; i += 17) {
      MatMul(x.data() + i * k, packed, row.data(), 1);
      for (size_t j = 0; j < n; ++j) ASSERT_EQ(y[i * n + j], row[j]) << i << "," << j;
    }
  }
}

TEST(MatMulTest, PackedBytesAndFormatNames) {
  std::vector<float> w(40 * 3, 1.0f);
  EXPECT_EQ(PackedWeights(w.data(), 40, 3, WeightFormat::kFloat32).bytes(), 2u * 32 * 3 * 4);
  EXPECT_EQ(PackedWeights(w.data(), 40, 3, WeightFormat::kBFloat16).bytes(), 2u * 32 * 3 * 2);
  EXPECT_EQ(ParseWeightFormat("bf16"), WeightFormat::kBFloat16);
  EXPECT_EQ(ParseWeightFormat("f32"), WeightFormat::kFloat32);
  EXPECT_THROW(ParseWeightFormat("q4"), InvalidArgument);
}

}  // namespace
}  // namespace rpa
