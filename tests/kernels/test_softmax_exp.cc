// The softmax's exp (kernels/softmax_exp-inl.h) on every SIMD target this CPU supports,
// against the float64 exp: every float of [ln 2^-126, -2^-24] (its whole useful domain but
// the arguments so close to 0 that exp rounds to 1, which are sampled), and the edges:
// exactly 1 at +-0, exactly 0 at -inf and below ln 2^-126, NaN in -> NaN out.
// Built twice: test_softmax_exp_exhaustive takes every float (~16 s here, label
// `exhaustive`); test_softmax_exp every RPA_EXP_STEP-th (for qemu and sanitizer runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/numerics/target_loop.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/kernels/test_softmax_exp.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/softmax_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {

// y[i] = ExpNonPositive(x[i]); n a multiple of the lane count (callers use 4096).
void EvalExp(const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> df;
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    hn::StoreU(ExpNonPositive(df, hn::LoadU(df, x + i)), df, y + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {
namespace {

HWY_EXPORT(EvalExp);

#ifndef RPA_EXP_STEP
#define RPA_EXP_STEP 1
#endif
constexpr uint32_t kStep = RPA_EXP_STEP;
// The two builds' tests need distinct names: ctest keys tests (and their labels) by name.
#if RPA_EXP_STEP == 1
#define RPA_EXP_SUITE SoftmaxExpExhaustiveTest
#else
#define RPA_EXP_SUITE SoftmaxExpTest
#endif
constexpr size_t kChunk = 4096;  // a multiple of every target's lane count

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Evaluates the bit patterns [first, last] with the given step (negative floats: larger
// patterns are more negative) on every target and returns the largest error in ulps of the
// exact result (the float64 exp, computed once per chunk for all targets). The ulp of a
// result below the smallest normal is taken as that of the smallest normal.
double MaxUlpError(uint32_t first, uint32_t last, uint32_t step) {
  std::vector<float> x(kChunk), y(kChunk);
  std::vector<double> ref(kChunk), ulp(kChunk);
  double worst = 0.0;
  for (uint64_t b = first; b <= last;) {
    size_t n = 0;
    for (; n < kChunk && b <= last; ++n, b += step) {
      x[n] = FromBits(static_cast<uint32_t>(b));
      ref[n] = std::exp(static_cast<double>(x[n]));
      ulp[n] = std::ldexp(1.0, std::ilogb(std::max(ref[n], 0x1p-126)) - 23);
    }
    std::fill(x.begin() + n, x.end(), 0.0f);
    bool failed = false;
    test::ForEachSupportedTarget([&](int64_t) {
      HWY_DYNAMIC_DISPATCH(EvalExp)(x.data(), y.data(), kChunk);
      for (size_t i = 0; i < n; ++i) {
        const double err = std::fabs(y[i] - ref[i]) / ulp[i];
        if (!(err <= worst)) worst = err;
        if (!(err <= 2.0) && !failed) {
          ADD_FAILURE() << "exp(" << x[i] << ") = " << y[i] << ", want " << ref[i];
          failed = true;
        }
      }
    });
    if (failed) break;
  }
  return worst;
}

// Every kStep-th float of the domain (all of them in the exhaustive build).
TEST(RPA_EXP_SUITE, WithinTwoUlpOverItsDomain) {
  // ln 2^-126 as a float, and its bit pattern: the most negative argument that is computed.
  const float lowest = -87.3365447505531f;
  uint32_t lowest_bits;
  std::memcpy(&lowest_bits, &lowest, 4);
  const uint32_t tiny_bits = 0xB3800000u;  // -2^-24: closer to 0, exp(x) rounds to 1
  const double every = MaxUlpError(tiny_bits, lowest_bits, kStep);
  const double near_zero = MaxUlpError(0x80000000u, tiny_bits, 4099);  // -0 ... -2^-24
  EXPECT_LE(every, 2.0);
  EXPECT_LE(near_zero, 2.0);
  std::printf("largest error: %.3f ulp (near 0: %.3f)\n", every, near_zero);
}

TEST(RPA_EXP_SUITE, EdgesAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  test::ForEachSupportedTarget([&](int64_t) {
    std::vector<float> x(kChunk, -inf), y(kChunk);
    const float edges[] = {0.0f, -0.0f, -87.34f, -88.0f, -103.9f, -104.0f, -1e30f,
                           -std::numeric_limits<float>::max(), nan};
    std::copy(std::begin(edges), std::end(edges), x.begin());
    HWY_DYNAMIC_DISPATCH(EvalExp)(x.data(), y.data(), kChunk);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 1.0f);
    for (int i = 2; i < 8; ++i) EXPECT_EQ(y[i], 0.0f) << "x = " << x[i];
    EXPECT_TRUE(std::isnan(y[8]));
    for (size_t i = 9; i < kChunk; ++i) ASSERT_EQ(y[i], 0.0f) << "exp(-inf) at " << i;
  });
}

}  // namespace
}  // namespace rpa
#endif  // HWY_ONCE
