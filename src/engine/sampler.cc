#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace rpa {

double UniformDraw(uint64_t seed, uint64_t counter) {
  // splitmix64 finalizer applied to a mix of the two words: cheap, well distributed, and
  // stateless, which is what makes sampling reproducible under preemption.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -INFINITY;
  bool found = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) continue;
    if (!found || v > best_value) {
      best = static_cast<int32_t>(i);
      best_value = v;
      found = true;
    }
  }
  return best;
}

int32_t Sampler::Sample(std::span<const float> logits, const SamplingParams& params,
                        uint64_t token_index) {
  if (params.greedy()) return Argmax(logits);

  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isnan(logits[i])) candidates_.push_back({logits[i], static_cast<int32_t>(i)});
  }
  if (candidates_.empty()) return 0;
  // Most likely first; ties by id so the order (and thus the draw) is deterministic.
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t keep = candidates_.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(),
                      by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }

  // Softmax at the temperature over the kept candidates, in double for a stable mass.
  const double inv_t = 1.0 / params.temperature;
  const double top = candidates_[0].logit;
  probs_.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((candidates_[i].logit - top) * inv_t);
    total += probs_[i];
  }
  // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < keep) {
      mass += probs_[n++] / total;
      if (mass >= params.top_p) break;
    }
    keep = n;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs_[i];
  }
  const double u = UniformDraw(params.seed, token_index) * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return candidates_[i].id;
  }
  return candidates_[keep - 1].id;  // u rounded to the very top of the mass
}

}  // namespace rpa
