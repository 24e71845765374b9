// MatMul against a float64 reference, on every SIMD target this CPU supports, over shapes
// that exercise every tile edge (rows % 2, cols % 4) and K tail (K % lanes).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

TEST(MatMulTest, MatchesFloat64ReferenceOnEveryTarget) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  test::ForEachSupportedTarget([&](int64_t) {
    for (size_t m : {0, 1, 2, 3, 5}) {
      for (size_t n : {1, 3, 4, 7, 9}) {
        for (size_t k : {0, 1, 7, 16, 17, 33, 64, 100}) {
          std::vector<float> x(m * k), w(n * k), y(m * n, -1.0f);
          for (float& v : x) v = dist(rng);
          for (float& v : w) v = dist(rng);
          MatMul(x.data(), w.data(), y.data(), m, n, k);
          for (size_t i = 0; i < m; ++i) {
            for (size_t j = 0; j < n; ++j) {
              double ref = 0, mag = 0;
              for (size_t p = 0; p < k; ++p) {
                ref += static_cast<double>(x[i * k + p]) * w[j * k + p];
                mag += std::fabs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
              }
              // Any f32 summation order of k products (FMA or not) errs by at most
              // k * 2^-24 * sum |x w| (first-order bound; k * 2^-24 << 1 here).
              EXPECT_NEAR(y[i * n + j], ref, k * 0x1p-24 * mag)
                  << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
            }
          }
        }
      }
    }
  });
}

// Large enough to be split over the thread pool (n not a multiple of the column block): each
// output matches the float64 reference, and each row is bit-identical to the same row
// computed alone (m = 1, where tiles and splits differ) — the property batching invariance
// of the engine rests on.
TEST(MatMulTest, ThreadedSplitMatchesReferenceAndSingleRows) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t m = 5, n = 1001, k = 130;
  std::vector<float> x(m * k), w(n * k), y(m * n, -1.0f), row(n);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  MatMul(x.data(), w.data(), y.data(), m, n, k);
  for (size_t i = 0; i < m; ++i) {
    MatMul(x.data() + i * k, w.data(), row.data(), 1, n, k);
    for (size_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (size_t p = 0; p < k; ++p) {
        ref += static_cast<double>(x[i * k + p]) * w[j * k + p];
        mag += std::fabs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
      }
      // Same first-order bound as above.
      ASSERT_NEAR(y[i * n + j], ref, k * 0x1p-24 * mag) << i << "," << j;
      ASSERT_EQ(y[i * n + j], row[j]) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace rpa
