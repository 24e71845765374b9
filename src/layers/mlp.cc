#include "layers/mlp.h"

#include <utility>

#include "kernels/gated_activation.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace rpa {

GatedMlp::GatedMlp(const MlpConfig& config, const MlpWeights& weights) : config_(config) {
  if (config_.d_model <= 0 || config_.ffn_dim <= 0) {
    throw InvalidArgument(
        Concat("Invalid MLP shape: d_model=", config_.d_model, ", ffn_dim=", config_.ffn_dim));
  }
  const size_t n = static_cast<size_t>(config_.d_model * config_.ffn_dim);
  if (weights.gate.size() != n || weights.up.size() != n || weights.down.size() != n) {
    throw InvalidArgument(Concat("MLP weights have sizes gate=", weights.gate.size(),
                                 ", up=", weights.up.size(), ", down=", weights.down.size(),
                                 "; expected ", n, " each"));
  }
  const size_t d = static_cast<size_t>(config_.d_model), f = static_cast<size_t>(config_.ffn_dim);
  gate_w_ = PackedWeights(weights.gate.data(), f, d, config_.weight_format);
  up_w_ = PackedWeights(weights.up.data(), f, d, config_.weight_format);
  down_w_ = PackedWeights(weights.down.data(), d, f, config_.weight_format);
}

void GatedMlp::Forward(const float* x, float* y, int64_t num_tokens) {
  const size_t t = static_cast<size_t>(num_tokens);
  const size_t f = static_cast<size_t>(config_.ffn_dim);
  if (gate_.size() < t * f) {
    gate_.resize(t * f);
    up_.resize(t * f);
  }
  MatMul(x, gate_w_, gate_.data(), t);
  MatMul(x, up_w_, up_.data(), t);
  GatedActivation(config_.activation, gate_.data(), up_.data(), gate_.data(), t * f);
  MatMul(gate_.data(), down_w_, y, t);
}

}  // namespace rpa
