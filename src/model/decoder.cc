#include "model/decoder.h"

#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "kernels/matmul.h"
#include "util/error.h"

namespace rpa {
namespace {

void CheckSize(const std::vector<float>& w, size_t expected, const char* name, int layer) {
  if (w.size() != expected) {
    throw InvalidArgument(Concat("Decoder weight ", name, layer >= 0 ? Concat(" of layer ", layer) : "",
                                 " has ", w.size(), " elements; expected ", expected));
  }
}

float* Grow(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

AttentionConfig AttentionConfigOf(const DecoderConfig& c, int32_t layer) {
  AttentionConfig a;
  a.d_model = c.d_model;
  a.num_q_heads = c.num_q_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  const bool local = c.IsLocal(layer);
  a.layer_type = local ? AttentionLayerType::kLocal : AttentionLayerType::kGlobal;
  a.sliding_window = local ? c.sliding_window : 0;
  a.rope = local ? c.rope_local : c.rope_global;
  a.qk_norm = c.qk_norm;
  a.qk_norm_config = c.norm;
  a.sm_scale = c.sm_scale;
  a.weight_format = c.weight_format;
  a.activation_dtype = DType::kFloat32;
  a.rotate_qk = c.rotate_qk;
  return a;
}

}  // namespace

Decoder::Decoder(const DecoderConfig& config, DecoderWeights weights, AttentionBackend* backend)
    : config_(config) {
  const DecoderConfig& c = config_;
  if (c.vocab_size <= 0 || c.d_model <= 0 || c.num_layers <= 0 || c.ffn_dim <= 0 ||
      c.max_context <= 0) {
    throw InvalidArgument(Concat("Invalid decoder config: vocab_size=", c.vocab_size,
                                 ", d_model=", c.d_model, ", num_layers=", c.num_layers,
                                 ", ffn_dim=", c.ffn_dim, ", max_context=", c.max_context));
  }
  const size_t d = static_cast<size_t>(c.d_model);
  CheckSize(weights.embedding, static_cast<size_t>(c.vocab_size) * d, "embedding", -1);
  CheckSize(weights.final_norm, d, "final_norm", -1);
  if (!weights.lm_head.empty()) CheckSize(weights.lm_head, static_cast<size_t>(c.vocab_size) * d, "lm_head", -1);
  if (weights.layers.size() != static_cast<size_t>(c.num_layers)) {
    throw InvalidArgument(Concat("Decoder has ", weights.layers.size(), " layer weights; expected ",
                                 c.num_layers));
  }
  info_.vocab_size = c.vocab_size;
  info_.max_context = c.max_context;
  info_.bos_token = c.bos_token;
  info_.eos_token = c.eos_token;
  info_.num_layers = c.num_layers;
  info_.num_kv_heads = c.num_kv_heads;
  info_.head_dim = c.head_dim;

  AttentionBackend& attention_backend = backend ? *backend : kernel_backend_;
  const MlpConfig mlp_config{c.d_model, c.ffn_dim, c.activation, c.weight_format};
  for (int32_t l = 0; l < c.num_layers; ++l) {
    DecoderLayerWeights& w = weights.layers[l];
    CheckSize(w.attn_norm, d, "attn_norm", l);
    CheckSize(w.ffn_norm, d, "ffn_norm", l);
    CheckSize(w.post_attention_norm, c.post_norms ? d : 0, "post_attention_norm", l);
    CheckSize(w.post_ffn_norm, c.post_norms ? d : 0, "post_ffn_norm", l);
    attention_.push_back(std::make_unique<Attention>(AttentionConfigOf(c, l),
                                                     std::move(w.attention), attention_backend));
    mlp_.emplace_back(mlp_config, std::move(w.mlp));
    norms_.push_back(std::move(w));
  }
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  embedding_ = PackedWeights(weights.embedding.data(), vocab, d, c.weight_format);
  final_norm_ = std::move(weights.final_norm);
  if (!weights.lm_head.empty()) {
    lm_head_ = PackedWeights(weights.lm_head.data(), vocab, d, c.weight_format);
  }
}

void Decoder::Forward(const StepInput& in, const KvCacheStorage& cache,
                      const KvCacheConfig& kv_config, std::span<float> logits) {
  const DecoderConfig& c = config_;
  const size_t t = in.tokens.size();
  const size_t d = static_cast<size_t>(c.d_model);
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  if (in.positions.size() != t) {
    throw InvalidArgument(Concat("positions has ", in.positions.size(), " entries for ", t,
                                 " tokens"));
  }
  if (logits.size() != in.logit_rows.size() * vocab) {
    throw InvalidArgument(Concat("logits has ", logits.size(), " floats; expected ",
                                 in.logit_rows.size(), " rows x ", vocab));
  }
  if (kv_config.num_layers() != c.num_layers || cache.spec().num_layers != c.num_layers) {
    throw InvalidArgument(Concat("KV cache has ", cache.spec().num_layers, " layers (config ",
                                 kv_config.num_layers(), "); the model has ", c.num_layers));
  }
  if (cache.spec().dtype != kv_config.dtype()) {
    throw InvalidArgument(Concat("KV cache storage dtype ", DTypeName(cache.spec().dtype),
                                 " differs from the configured cache dtype ",
                                 DTypeName(kv_config.dtype())));
  }

  float* x = Grow(x_, t * d);  // residual stream [T, d]
  float* h = Grow(h_, t * d);  // normed input of a sublayer [T, d]
  float* y = Grow(y_, t * d);  // sublayer output [T, d]
  for (size_t i = 0; i < t; ++i) {
    const int32_t tok = in.tokens[i];
    if (tok < 0 || tok >= c.vocab_size) {
      throw InvalidArgument(Concat("token id ", tok, " at row ", i, " is outside [0, ",
                                   c.vocab_size, ")"));
    }
    embedding_.Row(static_cast<size_t>(tok), x + i * d);
    for (size_t j = 0; j < d; ++j) x[i * d + j] *= c.embedding_scale;
  }
  const int64_t rows = static_cast<int64_t>(t);
  const TensorView h_view = TensorView::Contiguous(h, DType::kFloat32, {rows, c.d_model});
  const TensorView y_view = TensorView::Contiguous(y, DType::kFloat32, {rows, c.d_model});
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& w = norms_[l];
    std::memcpy(h, x, t * d * sizeof(float));
    RmsNormRows(c.norm, w.attn_norm.data(), h, rows, c.d_model);
    LayerKvCache layer_cache{cache.Layer(l), kv_config.scales(l)};
    attention_[l]->ForwardServe(h_view, in.positions, in.batch, layer_cache, y_view);
    if (c.post_norms) RmsNormRows(c.norm, w.post_attention_norm.data(), y, rows, c.d_model);
    for (size_t i = 0; i < t * d; ++i) x[i] += y[i];

    std::memcpy(h, x, t * d * sizeof(float));
    RmsNormRows(c.norm, w.ffn_norm.data(), h, rows, c.d_model);
    mlp_[l].Forward(h, y, rows);
    if (c.post_norms) RmsNormRows(c.norm, w.post_ffn_norm.data(), y, rows, c.d_model);
    for (size_t i = 0; i < t * d; ++i) x[i] += y[i];
  }

  // Only the requested rows go through the final norm and the (large) vocabulary matmul.
  const size_t r = in.logit_rows.size();
  float* sel = Grow(rows_, r * d);
  for (size_t i = 0; i < r; ++i) {
    const int32_t row = in.logit_rows[i];
    if (row < 0 || static_cast<size_t>(row) >= t) {
      throw InvalidArgument(Concat("logit row ", row, " is outside [0, ", t, ")"));
    }
    std::memcpy(sel + i * d, x + static_cast<size_t>(row) * d, d * sizeof(float));
  }
  RmsNormRows(c.norm, final_norm_.data(), sel, static_cast<int64_t>(r), c.d_model);
  MatMul(sel, lm_head_.empty() ? embedding_ : lm_head_, logits.data(), r);
}

DecoderWeights RandomDecoderWeights(const DecoderConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](size_t n, float scale) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (float& e : v) e = dist(rng);
    return v;
  };
  // Norm weights near 1 so activations keep unit scale; projections uniform with variance
  // 1/(3·fan_in)·3 = 1/fan_in, so each layer roughly preserves the activation scale.
  auto norm = [&](size_t n) {
    std::vector<float> v = uniform(n, 0.1f);
    for (float& e : v) e += 1.0f;
    return v;
  };
  const size_t d = static_cast<size_t>(c.d_model), f = static_cast<size_t>(c.ffn_dim);
  const size_t qw = static_cast<size_t>(c.num_q_heads) * c.head_dim;
  const size_t kvw = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  const float sd = std::sqrt(3.0f / d), sq = std::sqrt(3.0f / qw), sf = std::sqrt(3.0f / f);
  DecoderWeights w;
  w.embedding = uniform(static_cast<size_t>(c.vocab_size) * d, 1.0f);
  w.final_norm = norm(d);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    DecoderLayerWeights lw;
    lw.attn_norm = norm(d);
    lw.ffn_norm = norm(d);
    if (c.post_norms) {
      lw.post_attention_norm = norm(d);
      lw.post_ffn_norm = norm(d);
    }
    lw.attention.wq = uniform(qw * d, sd);
    lw.attention.wk = uniform(kvw * d, sd);
    lw.attention.wv = uniform(kvw * d, sd);
    lw.attention.wo = uniform(d * qw, sq);
    if (c.qk_norm) {
      lw.attention.q_norm = norm(c.head_dim);
      lw.attention.k_norm = norm(c.head_dim);
    }
    lw.mlp.gate = uniform(f * d, sd);
    lw.mlp.up = uniform(f * d, sd);
    lw.mlp.down = uniform(d * f, sf);
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace rpa
