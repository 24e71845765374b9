// RoPE and RMSNorm against float64 references written from the formulas (complex rotation
// for RoPE), sharing no code with src/layers.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "layers/rms_norm.h"
#include "layers/rope.h"
#include "util/error.h"

namespace rpa {
namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff

// Rotates one head as complex numbers z_i = x[a_i] + j x[b_i] times e^{j pos w_i}.
std::vector<double> RopeReference(const std::vector<float>& head, int32_t pos, RopeStyle style,
                                  double theta, double position_scale) {
  const size_t d = head.size(), half = d / 2;
  std::vector<double> out(d);
  for (size_t i = 0; i < half; ++i) {
    const size_t a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
    const size_t b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
    const double w = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(d));
    const std::complex<double> z(head[a], head[b]);
    const std::complex<double> r = z * std::polar(1.0, pos / position_scale * w);
    out[a] = r.real();
    out[b] = r.imag();
  }
  return out;
}

TEST(RopeTest, MatchesComplexRotationForBothLayouts) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const int64_t t = 5, h = 3;
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kNeoxHalves}) {
    for (int64_t d : {2, 16, 80}) {
      const RopeConfig config{style, 10000.0f, 8.0f};
      std::vector<int32_t> positions = {0, 1, 7, 1000, 131071};
      std::vector<float> x(t * h * d);
      for (float& v : x) v = u(rng);
      std::vector<float> y = x;
      ApplyRope(config, positions, y.data(), t, h, d);
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < h; ++j) {
          const std::vector<float> head(x.begin() + (i * h + j) * d,
                                        x.begin() + (i * h + j + 1) * d);
          const std::vector<double> ref = RopeReference(head, positions[i], style, 10000.0, 8.0);
          for (int64_t e = 0; e < d; ++e) {
            // cos and sin rounded to f32 (u each), then two f32 products and a sum (3u):
            // |error| <= 5u (|a| + |b|) <= 20u for |a|, |b| <= 2. Doubled for the angle:
            // both sides compute it in double, but in a different order, which differs
            // by < 1e-11 rad even at position 131071 -- far below u.
            EXPECT_NEAR(y[(i * h + j) * d + e], ref[e], 40 * kU)
                << "style " << static_cast<int>(style) << " d " << d << " t " << i;
          }
        }
      }
    }
  }
}

TEST(RopeTest, LayoutsDifferAndPositionZeroIsIdentity) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> a = x, b = x, z = x;
  const int32_t p = 3, zero = 0;
  ApplyRope({RopeStyle::kAdjacentPairs}, std::span(&p, 1), a.data(), 1, 1, 8);
  ApplyRope({RopeStyle::kNeoxHalves}, std::span(&p, 1), b.data(), 1, 1, 8);
  ApplyRope({RopeStyle::kNeoxHalves}, std::span(&zero, 1), z.data(), 1, 1, 8);
  EXPECT_NE(a, b);
  EXPECT_EQ(z, x);
}

TEST(RopeTest, RejectsOddHeadDimAndWrongPositionCount) {
  std::vector<float> x(6);
  const int32_t p[2] = {0, 1};
  EXPECT_THROW(ApplyRope({}, std::span(p, 2), x.data(), 2, 1, 3), InvalidArgument);
  EXPECT_THROW(ApplyRope({}, std::span(p, 1), x.data(), 2, 1, 2), InvalidArgument);
}

TEST(RmsNormTest, MatchesFloat64Reference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (float offset : {0.0f, 1.0f}) {
    const int64_t rows = 7, dim = 24;
    std::vector<float> x(rows * dim), w(dim);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    std::vector<float> y = x;
    const RmsNormConfig config{1e-6f, offset};
    RmsNormRows(config, w.data(), y.data(), rows, dim);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + static_cast<double>(config.eps));
      for (int64_t i = 0; i < dim; ++i) {
        const double ref = x[r * dim + i] * inv * (offset + static_cast<double>(w[i]));
        // inv rounded to f32 (u), two f32 products (2u), offset + w rounded (u): 4u
        // relative to |x * inv * (offset + w)| computed in magnitudes.
        const double mag = std::fabs(x[r * dim + i] * inv) * (std::fabs(offset) + std::fabs(w[i]));
        EXPECT_NEAR(y[r * dim + i], ref, 4 * kU * mag + 1e-30) << r << "," << i;
      }
    }
  }
}

}  // namespace
}  // namespace rpa
