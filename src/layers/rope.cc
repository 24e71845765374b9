#include "layers/rope.h"

#include <cmath>
#include <vector>

#include "util/error.h"

namespace rpa {

void ApplyRope(const RopeConfig& config, std::span<const int32_t> positions, float* x,
               int64_t num_tokens, int64_t num_heads, int64_t head_dim) {
  if (head_dim % 2 != 0)
    throw InvalidArgument(Concat("RoPE head_dim=", head_dim, " must be even."));
  if (static_cast<int64_t>(positions.size()) != num_tokens) {
    throw InvalidArgument(Concat("RoPE positions.size()=", positions.size(),
                                 " must equal num_tokens=", num_tokens, "."));
  }
  const int64_t half = head_dim / 2;
  // Angles in double: position * frequency reaches 1e5+ radians at long contexts, where an
  // f32 product would already be off by whole ulps of the angle before cos/sin.
  std::vector<double> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(config.theta),
                           -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  std::vector<float> cos_t(half), sin_t(half);
  // Element offsets of the two members of pair i.
  const bool adjacent = config.style == RopeStyle::kAdjacentPairs;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const double pos = positions[t] / static_cast<double>(config.position_scale);
    for (int64_t i = 0; i < half; ++i) {
      cos_t[i] = static_cast<float>(std::cos(pos * inv_freq[i]));
      sin_t[i] = static_cast<float>(std::sin(pos * inv_freq[i]));
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      float* head = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float& a = head[adjacent ? 2 * i : i];
        float& b = head[adjacent ? 2 * i + 1 : i + half];
        const float a0 = a, b0 = b;
        a = a0 * cos_t[i] - b0 * sin_t[i];
        b = a0 * sin_t[i] + b0 * cos_t[i];
      }
    }
  }
}

}  // namespace rpa
