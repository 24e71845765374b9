// GatedActivation: out[i] = act(gate[i]) * up[i], the elementwise middle of a gated MLP
// (SwiGLU, GeGLU), SIMD with dynamic dispatch and split across the global thread pool.
//
// act is SiLU, x / (1 + exp(-x)), or GELU's tanh approximation,
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). exp and tanh are Highway's polynomial
// approximations (a few ULP), not libm's: over a 512-token prefill this loop ran scalar
// std::exp / std::tanh over ~1M elements per layer and took a quarter to a third of the
// model's prefill time.
#pragma once

#include <cstddef>

namespace rpa {

enum class GateActivation { kSilu, kGeluTanh };

// out may alias gate or up. Thread-safe as far as the pool is (calls are serialized).
void GatedActivation(GateActivation act, const float* gate, const float* up, float* out,
                     size_t n);

}  // namespace rpa
