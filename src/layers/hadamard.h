// Normalized Walsh-Hadamard rotation of attention heads.
//
// H_D = H_2^{⊗log2 D} / sqrt(D) is orthogonal and symmetric, hence an involution
// (H H = H Hᵀ = I). Rotating each query and key head by it preserves every logit,
// (Hq)·(Hk) = qᵀ Hᵀ H k = q·k, while spreading the energy of a few large channels of k over
// all D channels. fp8 rounds each element relatively, so the logit error Σ q_i k_i ε_i has an
// RMS ∝ sqrt(Σ q_i² k_i²): an outlier channel that dominates both q and k dominates that sum,
// and after the rotation it no longer does (the QuaRot / SpinQuant idea, applied to K only).
#pragma once

#include <cstdint>

namespace rpa {

// True iff d is a power of two (1 included).
bool IsPowerOfTwo(int64_t d);

// x [rows, d] (contiguous) becomes x · H_D, row by row, in place: a fast Walsh-Hadamard
// transform (d·log2 d additions) then one multiply by 1/sqrt(d) per element. Rounding: each
// output is a log2(d)-deep tree of ± sums of its row (one f32 rounding per level), then a
// product by the rounded 1/sqrt(d) (exact for d = 4^k), so its error is at most
// (log2 d + 2)·2^-24·Σ_i|x_i|/sqrt(d) to first order. Throws InvalidArgument unless
// rows >= 0 and d is a power of two.
void HadamardRotateRows(float* x, int64_t rows, int64_t d);

}  // namespace rpa
