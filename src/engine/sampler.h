// Token sampling from one row of logits.
//
// Randomness is counter-based: the uniform draw for a request's n-th generated token is a
// pure function of (seed, n). A sequence that is preempted and recomputed, or that runs in
// a different batch, therefore draws the same numbers and, given the same logits, emits the
// same tokens.
//
// Thread-safety: a Sampler holds scratch buffers; use one per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace rpa {

// A uniform double in [0, 1) for draw number `counter` of stream `seed` (splitmix64
// finalizer over the pair; 53 random bits).
double UniformDraw(uint64_t seed, uint64_t counter);

class Sampler {
 public:
  // Returns the chosen token id. `token_index` is the index of the token being generated
  // within its request (0 for the first generated token).
  // REQUIRES: !logits.empty(); params validated.
  int32_t Sample(std::span<const float> logits, const SamplingParams& params,
                 uint64_t token_index);

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };
  std::vector<Candidate> candidates_;  // reused across calls: no per-token allocation
  std::vector<double> probs_;
};

// Index of the largest logit; the lowest index wins ties; NaN logits are never chosen
// unless every logit is NaN (then 0).
int32_t Argmax(std::span<const float> logits);

}  // namespace rpa
