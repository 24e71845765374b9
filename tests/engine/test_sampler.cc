#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/sampler.h"
#include "util/error.h"

namespace rpa {
namespace {

TEST(Argmax, LowestIndexWinsTiesAndNanIsSkipped) {
  EXPECT_EQ(Argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{NAN, -5, NAN, -1}), 3);
  EXPECT_EQ(Argmax(std::vector<float>{-INFINITY, -INFINITY}), 0);
}

TEST(Sampler, GreedyIsArgmax) {
  Sampler s;
  SamplingParams p;  // temperature 0
  EXPECT_EQ(s.Sample(std::vector<float>{0.5f, 2.0f, -1.0f}, p, 0), 1);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  Sampler s;
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  const std::vector<float> logits{0.1f, 0.3f, 0.2f, 0.29f};
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(s.Sample(logits, p, i), 1);
}

TEST(Sampler, SameSeedAndIndexGiveSameToken) {
  Sampler a, b;
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.7f);
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(a.Sample(logits, p, i), b.Sample(logits, p, i));
}

// Empirical frequencies match softmax(logits / T). With N draws the count of a token with
// probability q is Binomial(N, q): standard deviation sqrt(N q (1-q)) <= sqrt(N)/2 = 100
// for N = 40000; a 6-sigma band (600, i.e. 1.5% of N) makes a false failure ~1e-9.
TEST(Sampler, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<float> logits{1.0f, 2.0f, 0.0f, 1.5f};
  const float t = 0.7f;
  std::vector<double> q(4);
  double z = 0;
  for (int i = 0; i < 4; ++i) z += q[i] = std::exp(logits[i] / t);
  Sampler s;
  SamplingParams p;
  p.temperature = t;
  p.seed = 7;
  const int n = 40000;
  std::vector<int> count(4, 0);
  for (int i = 0; i < n; ++i) ++count[s.Sample(logits, p, i)];
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(count[i], n * q[i] / z, 600) << "token " << i;
}

TEST(Sampler, TopPKeepsTheNucleusOnly) {
  // Probabilities at T=1: token 0 has ~0.84 of the mass, so top_p 0.5 keeps it alone,
  // and top_p 0.9 keeps tokens 0 and 1 but never token 2.
  const std::vector<float> logits{3.0f, 1.0f, -2.0f};
  Sampler s;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(s.Sample(logits, p, i), 0);
  p.top_p = 0.9f;
  bool saw1 = false;
  for (uint64_t i = 0; i < 2000; ++i) {
    const int32_t t = s.Sample(logits, p, i);
    EXPECT_NE(t, 2);
    saw1 |= t == 1;
  }
  EXPECT_TRUE(saw1);
}

TEST(SamplingParams, InvalidValuesAreNamed) {
  auto expect_error = [](SamplingParams p, const char* needle) {
    try {
      ValidateSamplingParams(p, 10);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  SamplingParams p;
  p.temperature = -1;
  expect_error(p, "temperature=-1");
  p = {};
  p.temperature = NAN;
  expect_error(p, "temperature=nan");
  p = {};
  p.top_k = -2;
  expect_error(p, "top_k=-2");
  p = {};
  p.top_p = 0;
  expect_error(p, "top_p=0");
  p = {};
  p.max_tokens = 0;
  expect_error(p, "max_tokens=0");
  p = {};
  p.stop_tokens = {3, 10};
  expect_error(p, "stop token 10");
  EXPECT_NO_THROW(ValidateSamplingParams(SamplingParams{}, 10));
}

}  // namespace
}  // namespace rpa
