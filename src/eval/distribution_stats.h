// Statistics of next-token distributions: log-softmax, KL divergence, top-1, percentiles,
// and perplexity with its standard error as llama.cpp's `llama-perplexity` reports it.
//
// Sums run in double: a 262144-entry vocabulary summed in f32 would lose ~2^-24 * 262144
// = 2^-6 relative in the worst case, larger than the KL divergences rpa needs to see.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rpa::eval {

// out[v] = logits[v] - log(sum_w exp(logits[w])); returns that log-sum-exp. out may alias
// logits. REQUIRES: logits non-empty, out.size() == logits.size() (else InvalidArgument).
double LogSoftmax(std::span<const float> logits, std::span<float> out);

// The index of the largest value, the first one on ties. REQUIRES: non-empty.
int32_t ArgMax(std::span<const float> values);

// KL(P || Q) = sum_v p_v (log p_v - log q_v) with p_v = exp(log_p[v]), in nats.
// REQUIRES: both normalized log-probabilities of the same size (LogSoftmax output).
double KlDivergence(std::span<const float> log_p, std::span<const float> log_q);

// KL(P || Q) where P is given by unnormalized log-weights (log p_v + c for an unknown c,
// e.g. log-probabilities after storage rounding): P is renormalized on the fly, in one pass
// of exp instead of LogSoftmax's and KlDivergence's two. REQUIRES: equal, non-zero sizes.
double KlDivergenceUnnormalized(std::span<const float> log_p_unnormalized,
                                std::span<const float> log_q);

// The q-quantile (q in [0, 1]) with linear interpolation between the closest ranks
// (numpy's default): sorted[(n-1)q] interpolated. REQUIRES: values non-empty.
double Percentile(std::vector<double> values, double q);

// Running mean and standard error of a per-token quantity.
class MeanStats {
 public:
  void Add(double x) {
    sum_ += x;
    sum2_ += x * x;
    ++count_;
  }
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  double Mean() const { return count_ ? sum_ / count_ : 0.0; }
  // sqrt(var / (n - 1)) with var = E[x^2] - E[x]^2: llama.cpp's estimate. 0 for n < 2.
  double StandardError() const;

 private:
  double sum_ = 0, sum2_ = 0;
  int64_t count_ = 0;
};

// Perplexity exp(mean NLL), and its standard error by the delta method,
// d exp(m) = exp(m) dm: ppl * StandardError(NLL) (what llama.cpp prints after "+/-").
double Perplexity(const MeanStats& nll);
double PerplexityStandardError(const MeanStats& nll);

}  // namespace rpa::eval
