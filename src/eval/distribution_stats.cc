#include "eval/distribution_stats.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace rpa::eval {

double LogSoftmax(std::span<const float> logits, std::span<float> out) {
  if (logits.empty() || out.size() != logits.size()) {
    throw InvalidArgument(Concat("LogSoftmax: logits has ", logits.size(), " entries and out ",
                                 out.size(), " (need equal, non-zero)"));
  }
  const float max = *std::max_element(logits.begin(), logits.end());
  // Shifting by the max keeps every exp in (0, 1]; the sum is >= 1, so its log is exact to
  // double rounding.
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double lse = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(logits[i] - lse);
  return lse;
}

int32_t ArgMax(std::span<const float> values) {
  RPA_CHECK(!values.empty());
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

double KlDivergence(std::span<const float> log_p, std::span<const float> log_q) {
  if (log_p.size() != log_q.size() || log_p.empty()) {
    throw InvalidArgument(
        Concat("KlDivergence: distributions of ", log_p.size(), " and ", log_q.size(), " entries"));
  }
  double kl = 0;
  for (size_t i = 0; i < log_p.size(); ++i) {
    const double lp = log_p[i];
    kl += std::exp(lp) * (lp - static_cast<double>(log_q[i]));
  }
  return kl;
}

double KlDivergenceUnnormalized(std::span<const float> log_p_unnormalized,
                                std::span<const float> log_q) {
  if (log_p_unnormalized.size() != log_q.size() || log_q.empty()) {
    throw InvalidArgument(Concat("KlDivergenceUnnormalized: distributions of ",
                                 log_p_unnormalized.size(), " and ", log_q.size(), " entries"));
  }
  // With w_v = exp(x_v - m), Z = sum w, p_v = w_v / Z and log p_v = x_v - m - log Z:
  //   KL = sum p_v (x_v - log q_v) - (m + log Z) = S / Z - (m + log Z),  S = sum w_v (x_v - log
  //   q_v).
  const float m = *std::max_element(log_p_unnormalized.begin(), log_p_unnormalized.end());
  double z = 0, s = 0;
  for (size_t i = 0; i < log_q.size(); ++i) {
    const double x = log_p_unnormalized[i];
    const double w = std::exp(x - m);
    z += w;
    s += w * (x - static_cast<double>(log_q[i]));
  }
  return s / z - (m + std::log(z));
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty() || !(q >= 0 && q <= 1)) {
    throw InvalidArgument(Concat("Percentile: q=", q, " over ", values.size(),
                                 " values (need q in [0, 1], values non-empty)"));
  }
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

double MeanStats::StandardError() const {
  if (count_ < 2) return 0.0;
  const double mean = sum_ / count_;
  const double var = sum2_ / count_ - mean * mean;
  return var > 0 ? std::sqrt(var / static_cast<double>(count_ - 1)) : 0.0;
}

double Perplexity(const MeanStats& nll) { return std::exp(nll.Mean()); }

double PerplexityStandardError(const MeanStats& nll) {
  return Perplexity(nll) * nll.StandardError();
}

}  // namespace rpa::eval
