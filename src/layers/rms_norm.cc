#include "layers/rms_norm.h"

#include <cmath>

namespace rpa {

void RmsNormRows(const RmsNormConfig& config, const float* weight, float* x, int64_t rows,
                 int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    // The sum of squares in double: rows are short (a head) and this keeps the statistic
    // exact enough that the result depends only on the final f32 roundings.
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(row[i]) * row[i];
    const float inv_rms =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + config.eps));
    for (int64_t i = 0; i < dim; ++i)
      row[i] = row[i] * inv_rms * (config.weight_offset + weight[i]);
  }
}

}  // namespace rpa
