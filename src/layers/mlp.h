// Gated MLP of a decoder layer:  y = down( act(gate · x) ⊙ (up · x) ).
//   SwiGLU (Llama, SmolLM2): act = silu;  GeGLU (Gemma 3): act = gelu with the tanh
//   approximation.
//
// Thread safety: a GatedMlp holds per-call scratch; call it from one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/packed_weights.h"

namespace rpa {

// The activation is the kernel's: kSilu (SwiGLU) or kGeluTanh (GeGLU).
using MlpActivation = GateActivation;

struct MlpConfig {
  int64_t d_model = 0;
  int64_t ffn_dim = 0;  // F
  MlpActivation activation = MlpActivation::kSilu;
  WeightFormat weight_format = WeightFormat::kFloat32;  // how the three matrices are stored
};

// f32 weights in the nn.Linear layout [out, in]; the layer keeps only copies packed into
// config.weight_format.
struct MlpWeights {
  std::vector<float> gate;  // [F, d_model]
  std::vector<float> up;    // [F, d_model]
  std::vector<float> down;  // [d_model, F]
};

class GatedMlp {
 public:
  // Throws InvalidArgument on non-positive sizes or weights of the wrong size.
  GatedMlp(const MlpConfig& config, const MlpWeights& weights);
  GatedMlp(const GatedMlp&) = delete;
  GatedMlp& operator=(const GatedMlp&) = delete;
  GatedMlp(GatedMlp&&) = default;

  // x: [T, d_model] f32; y: [T, d_model] f32 (may not alias x).
  void Forward(const float* x, float* y, int64_t num_tokens);

  const MlpConfig& config() const { return config_; }

 private:
  MlpConfig config_;
  PackedWeights gate_w_, up_w_, down_w_;
  std::vector<float> gate_;  // [T, F] scratch
  std::vector<float> up_;    // [T, F] scratch
};

}  // namespace rpa
