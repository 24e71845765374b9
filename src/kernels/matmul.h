// MatMul: the dense projection kernel of the layers (Q/K/V/O, MLP, LM head).
//
//   y [M, N] = x [M, K] · wᵀ,  w [N, K] packed once into PackedWeights (f32 or bf16)
//
// f32 activations, f32 accumulation, f32 output; bf16 weights are widened exactly in
// registers. SIMD with Highway's runtime dispatch; the dispatch table includes a portable
// target, so every CPU runs it. Threads split the output columns.
//
// Determinism: every y[i, j] is computed the same way whatever M, the row tiling or the
// thread count: one f32 FMA chain per block of 128 K steps (in order, from zero), the
// blocks' sums added in order. So a row's result does not depend on which other rows share
// the call (the engine's batching invariance rests on this).
#pragma once

#include <cstddef>

#include "kernels/packed_weights.h"

namespace rpa {

// REQUIRES: x holds m * w.cols() floats, y m * w.rows(), both row-major and contiguous;
// y does not overlap x. m may be 0; w.cols() == 0 writes zeros.
void MatMul(const float* x, const PackedWeights& w, float* y, size_t m);

}  // namespace rpa
