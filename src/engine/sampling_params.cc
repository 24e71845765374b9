#include "engine/sampling_params.h"

#include <cmath>

#include "util/error.h"

namespace rpa {

void ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    throw InvalidArgument(Concat("temperature=", p.temperature, " must be finite and >= 0"));
  }
  if (p.top_k < 0) throw InvalidArgument(Concat("top_k=", p.top_k, " must be >= 0 (0 = off)"));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    throw InvalidArgument(Concat("top_p=", p.top_p, " must be in (0, 1]"));
  }
  if (p.max_tokens < 1) throw InvalidArgument(Concat("max_tokens=", p.max_tokens, " must be >= 1"));
  for (int32_t t : p.stop_tokens) {
    if (t < 0 || t >= vocab_size) {
      throw InvalidArgument(Concat("stop token ", t, " is outside the vocabulary [0, ",
                                   vocab_size, ")"));
    }
  }
}

}  // namespace rpa
