// Statistics of next-token distributions against values derived by hand or computed here
// independently in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "eval/distribution_stats.h"
#include "util/error.h"

namespace rpa::eval {
namespace {

std::vector<long double> ReferenceLogSoftmax(const std::vector<float>& x) {
  long double max = x[0];
  for (float v : x) max = std::max<long double>(max, v);
  long double sum = 0;
  for (float v : x) sum += std::exp(static_cast<long double>(v) - max);
  std::vector<long double> out;
  for (float v : x) out.push_back(v - max - std::log(sum));
  return out;
}

TEST(LogSoftmax, MatchesLongDoubleAndIsShiftInvariant) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> logits(5000);
  for (float& v : logits) v = dist(rng);
  const std::vector<long double> ref = ReferenceLogSoftmax(logits);
  std::vector<float> out(logits.size());
  LogSoftmax(logits, out);
  // The result is rounded once to f32 from a double computation: |error| <= 2^-24 |r| plus
  // ~1e-15 from the double sum, so 2^-23 |r| + 1e-12 is a safe bound.
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NEAR(out[i], ref[i], std::ldexp(std::fabs(static_cast<double>(ref[i])), -23) + 1e-12);
  }
  // Logits near f32's overflow region do not overflow: the max is subtracted first.
  std::vector<float> shifted(logits);
  for (float& v : shifted) v += 1e4f;
  std::vector<float> out2(logits.size());
  LogSoftmax(shifted, out2);
  for (size_t i = 0; i < out.size(); ++i) {
    // Adding 1e4 in f32 rounds each logit by up to ulp(1e4)/2 = 2^-11.
    EXPECT_NEAR(out2[i], out[i], 2 * std::ldexp(1.0, -11));
  }
}

TEST(LogSoftmax, InPlaceAndSizeChecked) {
  std::vector<float> x = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  LogSoftmax(x, x);
  EXPECT_NEAR(x[0], std::log(0.25), 1e-7);
  EXPECT_NEAR(x[1], std::log(0.75), 1e-7);
  std::vector<float> out(1);
  EXPECT_THROW(LogSoftmax(x, out), InvalidArgument);
}

TEST(KlDivergence, KnownDistributions) {
  // p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4):
  // KL = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2) / 4.
  const std::vector<float> p = {std::log(0.5f), std::log(0.25f), std::log(0.25f)};
  const std::vector<float> q = {std::log(0.25f), std::log(0.5f), std::log(0.25f)};
  EXPECT_NEAR(KlDivergence(p, q), std::log(2.0) / 4, 1e-7);
  // Reverse: 1/4 ln(1/2) + 1/2 ln 2 = ln(2) / 4 too (a symmetric pair), and KL(p||p) = 0.
  EXPECT_NEAR(KlDivergence(q, p), std::log(2.0) / 4, 1e-7);
  EXPECT_EQ(KlDivergence(p, p), 0.0);
}

TEST(KlDivergence, RandomDistributionsMatchLongDouble) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> a(4096), b(4096);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = dist(rng);
      b[i] = a[i] + 0.3f * dist(rng);
    }
    const auto la = ReferenceLogSoftmax(a), lb = ReferenceLogSoftmax(b);
    long double kl = 0;
    for (size_t i = 0; i < a.size(); ++i) kl += std::exp(la[i]) * (la[i] - lb[i]);
    std::vector<float> pa(a.size()), pb(b.size());
    LogSoftmax(a, pa);
    LogSoftmax(b, pb);
    // Inputs carry f32 rounding (2^-24 relative on |log p| <= ~40): the KL moves by at most
    // sum p |e| ~ 40 * 2^-23 ~ 5e-6.
    EXPECT_NEAR(KlDivergence(pa, pb), static_cast<double>(kl), 5e-6) << "trial " << trial;
    EXPECT_GT(KlDivergence(pa, pb), 0.0);
  }
}

// Renormalizing on the fly equals LogSoftmax then KlDivergence, whatever the offset.
TEST(KlDivergence, UnnormalizedInputIsRenormalized) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> a(4096), b(4096);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = dist(rng);
    b[i] = a[i] + 0.2f * dist(rng);
  }
  std::vector<float> pa(a.size()), pb(b.size());
  LogSoftmax(a, pa);
  LogSoftmax(b, pb);
  const double kl = KlDivergence(pa, pb);
  for (float offset : {0.0f, -7.5f, 3.25f}) {
    std::vector<float> shifted(pa);
    for (float& v : shifted) v += offset;
    // The two paths round differently (f32 log-probs vs double inside): 2^-23 per term of
    // size |log p| <= ~40, weighted by p: < 1e-5.
    EXPECT_NEAR(KlDivergenceUnnormalized(shifted, pb), kl, 1e-5) << "offset " << offset;
  }
  EXPECT_NEAR(KlDivergenceUnnormalized(pb, pb), 0.0, 1e-6);
  EXPECT_THROW(KlDivergenceUnnormalized(pa, std::vector<float>(3)), InvalidArgument);
}

TEST(ArgMax, FirstOnTies) {
  EXPECT_EQ(ArgMax(std::vector<float>{1, 3, 2}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{-1, 5, 5, 4}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{7}), 0);
}

TEST(Percentile, LinearInterpolationBetweenRanks) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.5), 2.5);  // numpy.percentile(.., 50)
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 1.0), 4.0);
  std::vector<double> v;
  for (int i = 100; i >= 0; --i) v.push_back(i);  // 0..100, reversed
  EXPECT_DOUBLE_EQ(Percentile(v, 0.99), 99.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.995), 99.5);
  EXPECT_THROW(Percentile({}, 0.5), InvalidArgument);
  EXPECT_THROW(Percentile({1}, 1.5), InvalidArgument);
}

TEST(Perplexity, HandMadeCase) {
  // Target probabilities 1/2, 1/4, 1/8: NLL = ln2 * {1, 2, 3}, mean 2 ln 2, PPL = 4.
  // Standard error: var = ln2^2 * (14/3 - 4) = ln2^2 * 2/3, sqrt(var / 2) = ln2 / sqrt(3),
  // times PPL (delta method).
  MeanStats nll;
  for (int k = 1; k <= 3; ++k) nll.Add(k * std::log(2.0));
  EXPECT_EQ(nll.count(), 3);
  EXPECT_NEAR(Perplexity(nll), 4.0, 1e-12);
  EXPECT_NEAR(PerplexityStandardError(nll), 4.0 * std::log(2.0) / std::sqrt(3.0), 1e-12);
  MeanStats one;
  one.Add(1.0);
  EXPECT_EQ(one.StandardError(), 0.0);
}

}  // namespace
}  // namespace rpa::eval
