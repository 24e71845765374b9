// GatedActivation against float64 formulas, on every SIMD target this CPU supports, for
// lengths that cover the vector tail and the multi-chunk (threaded) split.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/gated_activation.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

double SiluRef(double x) { return x / (1.0 + std::exp(-x)); }
double GeluTanhRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Tolerance. Both activations are act(x) = x * h(x) with 0 <= h <= 1 (SiLU: the sigmoid;
// GELU: 0.5 (1 + tanh u)). Highway's exp and tanh err by a few ULP (<= 4 * 2^-24 relative,
// and tanh's absolute error near +-1 is <= 4 * 2^-24); the f32 arithmetic around them adds
// <= 6 roundings of quantities bounded by |x| (x^3 terms only enter through tanh's argument,
// whose relative error moves tanh by at most |u| * sech^2(u) * 2^-21 <= 2^-21). So
// |act_f32 - act| <= |x| * 2^-19 covers it with margin, and the product with up adds one
// rounding: |out - ref| <= |x| |up| 2^-19 + |ref| 2^-23 (+ the smallest normal for x = 0).
void Check(GateActivation act, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f), narrow(-3.0f, 3.0f);
  std::vector<float> gate(n), up(n);
  for (size_t i = 0; i < n; ++i) {
    gate[i] = i % 3 == 0 ? wide(rng) : narrow(rng);
    up[i] = narrow(rng);
  }
  // Extremes: exp(-x) overflowing (SiLU -> -0), large |x| (GELU -> x or 0), and zero.
  const float extremes[] = {-100.0f, 100.0f, -88.5f, 89.0f, 0.0f, -1e-20f, 1e-20f, -10.0f};
  for (size_t i = 0; i < n && i < std::size(extremes); ++i) gate[i * 7 % n] = extremes[i];
  test::ForEachSupportedTarget([&](int64_t) {
    std::vector<float> out(n, -12345.0f);
    GatedActivation(act, gate.data(), up.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double x = gate[i];
      const double ref = (act == GateActivation::kSilu ? SiluRef(x) : GeluTanhRef(x)) * up[i];
      const double tol = std::fabs(x * up[i]) * std::ldexp(1.0, -19) +
                         std::fabs(ref) * std::ldexp(1.0, -23) + 1e-38;
      ASSERT_NEAR(out[i], ref, tol) << "i=" << i << " x=" << x << " up=" << up[i] << " n=" << n;
    }
  });
}

TEST(GatedActivation, SiluMatchesFloat64) {
  for (size_t n : {1, 7, 16, 17, 1000, 40000}) Check(GateActivation::kSilu, n, 1);
}

TEST(GatedActivation, GeluTanhMatchesFloat64) {
  for (size_t n : {1, 7, 16, 17, 1000, 40000}) Check(GateActivation::kGeluTanh, n, 2);
}

TEST(GatedActivation, InPlaceOverGate) {
  std::vector<float> gate = {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f}, up = {1, 2, 3, 4, 5};
  std::vector<float> expected(gate.size());
  GatedActivation(GateActivation::kSilu, gate.data(), up.data(), expected.data(), gate.size());
  GatedActivation(GateActivation::kSilu, gate.data(), up.data(), gate.data(), gate.size());
  EXPECT_EQ(gate, expected);
}

}  // namespace
}  // namespace rpa
