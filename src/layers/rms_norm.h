// RMSNorm over the last dimension, in place:  x = x / sqrt(mean(x^2) + eps) * (offset + w).
// offset is 0 for Llama-style weights and 1 for Gemma, which stores w - 1.
#pragma once

#include <cstdint>

namespace rpa {

struct RmsNormConfig {
  float eps = 1e-6f;
  float weight_offset = 0.0f;
};

// x: [rows, dim] f32 contiguous; weight: [dim].
void RmsNormRows(const RmsNormConfig& config, const float* weight, float* x, int64_t rows,
                 int64_t dim);

}  // namespace rpa
