// Decoder: a decoder-only transformer assembled from rpa's layers, covering the Llama
// family (SmolLM2) and Gemma 3 (sandwich norms, QK-norm, local/global layers with their
// own RoPE bases, scaled embeddings, GELU-tanh MLP).
//
//   x = embed(tokens) * embedding_scale                                 [T, d_model]
//   per layer:  a = Attention(RMSNorm(x))       (paged KV cache, ragged batch)
//               x += post_attention_norm ? RMSNorm(a) : a
//               m = GatedMlp(RMSNorm(x))
//               x += post_ffn_norm ? RMSNorm(m) : m
//   logits = RMSNorm(x[rows]) · lm_headᵀ  (lm_head = embedding when tied)  [R, vocab]
//
// Weights arrive as f32 and are packed into config.weight_format (f32 or bf16); the
// embedding is looked up from its packed copy, which doubles as the LM head when tied.
// Thread safety: Forward() uses per-call scratch; one caller at a time.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/mlp.h"
#include "layers/rms_norm.h"
#include "model/causal_lm.h"

namespace rpa {

struct DecoderConfig {
  int32_t vocab_size = 0;
  int32_t d_model = 0;
  int32_t num_layers = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t max_context = 0;
  int32_t bos_token = -1;
  int32_t eos_token = -1;
  RmsNormConfig norm;
  MlpActivation activation = MlpActivation::kSilu;
  float embedding_scale = 1.0f;
  bool post_norms = false;  // Gemma's sandwich norms around attention and MLP
  bool qk_norm = false;
  std::optional<float> sm_scale;  // default 1/sqrt(head_dim)
  // Layer l is local (sliding window) iff local_layer_period > 0 and
  // l % local_layer_period != local_layer_period - 1 (Gemma 3: period 6, window 512).
  int32_t local_layer_period = 0;
  int32_t sliding_window = 0;
  RopeConfig rope_global;
  RopeConfig rope_local;
  // How every matrix (projections, MLP, embedding / LM head) is stored; see
  // kernels/packed_weights.h.
  WeightFormat weight_format = WeightFormat::kFloat32;
  // Every layer's AttentionConfig::rotate_qk: Walsh-Hadamard rotation of q/k heads after
  // RoPE, to lower the fp8 KV cache's error (needs a power-of-two head_dim). Default off.
  bool rotate_qk = false;

  bool IsLocal(int32_t layer) const {
    return local_layer_period > 0 && layer % local_layer_period != local_layer_period - 1;
  }
};

struct DecoderLayerWeights {
  std::vector<float> attn_norm;            // [d_model]
  std::vector<float> post_attention_norm;  // [d_model] iff post_norms
  std::vector<float> ffn_norm;             // [d_model]
  std::vector<float> post_ffn_norm;        // [d_model] iff post_norms
  AttentionWeights attention;
  MlpWeights mlp;
};

struct DecoderWeights {
  std::vector<float> embedding;   // [vocab, d_model]
  std::vector<float> final_norm;  // [d_model]
  std::vector<float> lm_head;     // [vocab, d_model], empty when tied to the embedding
  std::vector<DecoderLayerWeights> layers;
};

class Decoder final : public CausalLm {
 public:
  // `backend` (not owned, must outlive the decoder) receives every attention call; null
  // means rpa's kernel. Throws InvalidArgument on inconsistent config or weights.
  Decoder(const DecoderConfig& config, DecoderWeights weights,
          AttentionBackend* backend = nullptr);

  const ModelInfo& info() const override { return info_; }
  const DecoderConfig& config() const { return config_; }

  void Forward(const StepInput& input, const KvCacheStorage& cache,
               const KvCacheConfig& kv_config, std::span<float> logits) override;

 private:
  DecoderConfig config_;
  ModelInfo info_;
  PackedWeights embedding_;  // [vocab, d_model]
  std::vector<float> final_norm_;
  PackedWeights lm_head_;  // empty when tied to the embedding
  std::vector<DecoderLayerWeights> norms_;  // norm weights per layer (attention/MLP moved out)
  KernelBackend kernel_backend_;
  std::vector<std::unique_ptr<Attention>> attention_;
  std::vector<GatedMlp> mlp_;

  // Scratch, grown on demand.
  std::vector<float> x_, h_, y_, rows_;
};

// Random weights (uniform, scaled 1/sqrt(fan_in)) for tests and synthetic benchmarks.
DecoderWeights RandomDecoderWeights(const DecoderConfig& config, uint64_t seed);

}  // namespace rpa
