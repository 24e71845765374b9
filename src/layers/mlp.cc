#include "layers/mlp.h"

#include <cmath>
#include <utility>

#include "kernels/matmul.h"
#include "util/error.h"

namespace rpa {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// gelu(x) ~= 0.5 x (1 + tanh( sqrt(2/pi) (x + 0.044715 x^3) )), the "tanh" approximation
// Gemma was trained with.
float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace

GatedMlp::GatedMlp(const MlpConfig& config, MlpWeights weights)
    : config_(config), weights_(std::move(weights)) {
  if (config_.d_model <= 0 || config_.ffn_dim <= 0) {
    throw InvalidArgument(
        Concat("Invalid MLP shape: d_model=", config_.d_model, ", ffn_dim=", config_.ffn_dim));
  }
  const size_t n = static_cast<size_t>(config_.d_model * config_.ffn_dim);
  if (weights_.gate.size() != n || weights_.up.size() != n || weights_.down.size() != n) {
    throw InvalidArgument(Concat("MLP weights have sizes gate=", weights_.gate.size(),
                                 ", up=", weights_.up.size(), ", down=", weights_.down.size(),
                                 "; expected ", n, " each"));
  }
}

void GatedMlp::Forward(const float* x, float* y, int64_t num_tokens) {
  const size_t t = static_cast<size_t>(num_tokens);
  const size_t f = static_cast<size_t>(config_.ffn_dim);
  const size_t d = static_cast<size_t>(config_.d_model);
  if (gate_.size() < t * f) {
    gate_.resize(t * f);
    up_.resize(t * f);
  }
  MatMul(x, weights_.gate.data(), gate_.data(), t, f, d);
  MatMul(x, weights_.up.data(), up_.data(), t, f, d);
  const bool silu = config_.activation == MlpActivation::kSilu;
  for (size_t i = 0; i < t * f; ++i) {
    gate_[i] = (silu ? Silu(gate_[i]) : GeluTanh(gate_[i])) * up_[i];
  }
  MatMul(gate_.data(), weights_.down.data(), y, t, d, f);
}

}  // namespace rpa
