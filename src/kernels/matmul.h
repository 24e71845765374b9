// MatMul: the dense projection kernel of the layers (Q/K/V/O, MLP).
//
//   y [M, N] = x [M, K] · wᵀ,  w [N, K]  (the nn.Linear / GGUF row-per-output layout)
//
// f32 inputs, f32 accumulation, f32 output. SIMD with Highway's runtime dispatch (one
// dispatch per call); the dispatch table includes a portable target, so every CPU runs it.
#pragma once

#include <cstddef>

namespace rpa {

// REQUIRES: x holds m*k floats, w n*k, y m*n, all row-major and contiguous; y does not
// overlap x or w. m, n or k may be 0 (k == 0 writes zeros).
void MatMul(const float* x, const float* w, float* y, size_t m, size_t n, size_t k);

}  // namespace rpa
