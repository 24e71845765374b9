// HadamardRotateRows against an explicit matrix built here from its closed form, plus the
// properties the attention rotation relies on: orthogonality (dot products and norms are
// preserved) and involution (rotating twice is the identity).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "layers/hadamard.h"
#include "util/error.h"

namespace rpa {
namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff

// Sylvester's Hadamard matrix in closed form: H[i][j] = (-1)^popcount(i & j) / sqrt(d).
double HadamardEntry(int64_t i, int64_t j, int64_t d) {
  const double sign = (std::popcount(static_cast<uint64_t>(i & j)) % 2) ? -1.0 : 1.0;
  return sign / std::sqrt(static_cast<double>(d));
}

std::vector<float> RandomRows(int64_t rows, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(rows * d);
  for (float& v : x) v = dist(rng);
  // A few outlier channels, like post-RoPE keys.
  for (int64_t r = 0; r < rows; ++r) x[r * d + (d > 1 ? 1 : 0)] *= 40.0f;
  return x;
}

// log2 of a power of two.
int Log2(int64_t d) { return std::countr_zero(static_cast<uint64_t>(d)); }

TEST(Hadamard, MatchesExplicitMatrix) {
  for (int64_t d : {1, 2, 4, 8, 64, 128, 256}) {
    const int64_t rows = 3;
    const std::vector<float> x = RandomRows(rows, d, 7 + static_cast<uint32_t>(d));
    std::vector<float> y = x;
    HadamardRotateRows(y.data(), rows, d);
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0;
      for (int64_t i = 0; i < d; ++i) abs_sum += std::fabs(x[r * d + i]);
      // hadamard.h: (log2 d + 2)·u·Σ|x|/sqrt(d) to first order; one more u for slack on the
      // second-order terms.
      const double bound = (Log2(d) + 3) * kU * abs_sum / std::sqrt(static_cast<double>(d));
      for (int64_t j = 0; j < d; ++j) {
        double ref = 0;  // row vector times H (symmetric, so row or column order agree)
        for (int64_t i = 0; i < d; ++i) ref += x[r * d + i] * HadamardEntry(i, j, d);
        EXPECT_NEAR(y[r * d + j], ref, bound) << "d=" << d << " row " << r << " col " << j;
      }
    }
  }
}

TEST(Hadamard, PreservesDotProductsAndIsAnInvolution) {
  const int64_t d = 64, rows = 8;
  const std::vector<float> a = RandomRows(rows, d, 1), b = RandomRows(rows, d, 2);
  std::vector<float> ha = a, hb = b;
  HadamardRotateRows(ha.data(), rows, d);
  HadamardRotateRows(hb.data(), rows, d);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0, hdot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < d; ++i) {
      dot += static_cast<double>(a[r * d + i]) * b[r * d + i];
      hdot += static_cast<double>(ha[r * d + i]) * hb[r * d + i];
      na += static_cast<double>(a[r * d + i]) * a[r * d + i];
      nb += static_cast<double>(b[r * d + i]) * b[r * d + i];
    }
    // Each rotated element has an error <= (log2 d + 3)·u·Σ|x|/sqrt(d) <= (log2 d + 3)·u·|x|₂
    // (Cauchy-Schwarz), so the dot of the rotated rows is off by at most
    // 2·(log2 d + 3)·u·sqrt(d)·|a|₂|b|₂ (sum over d elements of |Ha_j|·err(Hb_j) + ..., with
    // Σ_j|Ha_j| <= sqrt(d)·|a|₂).
    const double bound =
        2 * (Log2(d) + 3) * kU * std::sqrt(static_cast<double>(d)) * std::sqrt(na) * std::sqrt(nb);
    EXPECT_NEAR(hdot, dot, bound) << "row " << r;
    EXPECT_GT(std::fabs(dot), 100 * bound);  // the check is not vacuous
  }
  // Involution: H(Hx) = x, each element within twice the one-pass bound (errors of the first
  // pass pass through the orthogonal second one without growth in norm).
  std::vector<float> back = ha;
  HadamardRotateRows(back.data(), rows, d);
  for (int64_t r = 0; r < rows; ++r) {
    double norm = 0;
    for (int64_t i = 0; i < d; ++i) norm += static_cast<double>(a[r * d + i]) * a[r * d + i];
    const double bound = 2 * (Log2(d) + 3) * kU * std::sqrt(d * norm);
    for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(back[r * d + i], a[r * d + i], bound);
  }
}

TEST(Hadamard, SpreadsAnOutlierChannel) {
  // e_k is mapped to a row of H: every entry ±1/sqrt(d).
  const int64_t d = 256;
  std::vector<float> x(d, 0.0f);
  x[37] = 1.0f;
  HadamardRotateRows(x.data(), 1, d);
  for (int64_t j = 0; j < d; ++j) EXPECT_EQ(std::fabs(x[j]), 1.0f / 16.0f) << j;
}

TEST(Hadamard, RejectsNonPowerOfTwo) {
  std::vector<float> x(48);
  EXPECT_THROW(HadamardRotateRows(x.data(), 1, 48), InvalidArgument);
  EXPECT_THROW(HadamardRotateRows(x.data(), 1, 0), InvalidArgument);
  EXPECT_THROW(HadamardRotateRows(x.data(), -1, 16), InvalidArgument);
  EXPECT_NO_THROW(HadamardRotateRows(x.data(), 0, 16));
}

}  // namespace
}  // namespace rpa
