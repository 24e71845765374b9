#include "layers/hadamard.h"

#include <cmath>

#include "util/error.h"

namespace rpa {

bool IsPowerOfTwo(int64_t d) { return d > 0 && (d & (d - 1)) == 0; }

void HadamardRotateRows(float* x, int64_t rows, int64_t d) {
  if (rows < 0 || !IsPowerOfTwo(d)) {
    throw InvalidArgument(
        Concat("HadamardRotateRows needs rows >= 0 and a power-of-two row "
               "length; got rows=",
               rows, ", d=", d, "."));
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * d;
    // Sylvester order: level h pairs elements h apart, (a, b) -> (a + b, a - b).
    for (int64_t h = 1; h < d; h *= 2) {
      for (int64_t i = 0; i < d; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const float a = row[j], b = row[j + h];
          row[j] = a + b;
          row[j + h] = a - b;
        }
      }
    }
    for (int64_t j = 0; j < d; ++j) row[j] *= norm;
  }
}

}  // namespace rpa
