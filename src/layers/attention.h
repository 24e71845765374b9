// Attention: one decoder layer's self-attention on the serving path.
//
//   hidden [T, d_model] --Wq/Wk/Wv--> q [T, Hq, D], k/v [T, Hkv, D]   (token-major heads)
//     -> optional per-head RMSNorm of q and k -> RoPE on q and k
//     -> optional rotation of each q and k head by a Walsh-Hadamard matrix (rotate_qk)
//     -> K/V into the cache dtype  (fp8 cache: quantize_kv with the layer's scales;
//                                   otherwise unchanged, scales unset)
//     -> AttentionBackend (ragged paged attention; writes new K/V into the cache)
//     -> [T, Hq*D] --Wo--> output [T, d_model]
//
// The K/V step is the point of this file: the kernel requires keys/values in the cache
// dtype and never casts (rpa-contract.md §3 item 8), so a layer over an fp8 cache must
// quantize *before* dispatch, through quantize_kv (the only quantizer in rpa), and pass
// k_scale/v_scale so the kernel dequantizes. For a non-fp8 cache nothing changes: K/V are
// the projections themselves (cast only if the cache dtype differs from the activation
// dtype, e.g. f32 activations over a bf16 cache), and no scale is passed.
//
// Thread safety: an Attention holds per-call scratch; call it from one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/packed_weights.h"
#include "layers/attention_backend.h"
#include "layers/layer_kv_cache.h"
#include "layers/ragged_batch.h"
#include "layers/rms_norm.h"
#include "layers/rope.h"
#include "numerics/dtype.h"
#include "numerics/tensor_view.h"

namespace rpa {

// Global layers see the whole context; local layers a sliding window of recent positions.
enum class AttentionLayerType { kGlobal, kLocal };

struct AttentionConfig {
  int64_t d_model = 0;
  int64_t num_q_heads = 0;   // Hq
  int64_t num_kv_heads = 0;  // Hkv, divides Hq
  int64_t head_dim = 0;      // D, even (RoPE pairs)
  AttentionLayerType layer_type = AttentionLayerType::kGlobal;
  int32_t sliding_window = 0;  // local layers: > 0; global layers: must stay 0
  RopeConfig rope;
  bool qk_norm = false;  // per-head RMSNorm of q and k (Gemma 3, Qwen 3)
  RmsNormConfig qk_norm_config;
  std::optional<float> sm_scale;  // default 1/sqrt(D)
  std::optional<float> soft_cap;
  bool has_sinks = false;
  // Set on a KV-shared layer: it reads its donor layer's cache (the caller passes the
  // donor's LayerKvCache) and never writes it (update_kv_cache=false).
  std::optional<int> kv_share_donor;
  DType activation_dtype = DType::kFloat32;  // hidden/output/queries: float32 or bfloat16
  // Rotate every q and k head by the normalized Walsh-Hadamard matrix after RoPE (needs a
  // power-of-two head_dim). Logits are unchanged in exact arithmetic ((Hq)·(Hk) = q·k); it
  // spreads K's outlier channels so an fp8 cache rounds them less harmfully
  // (src/layers/hadamard.h). Applies to any cache dtype; the cache then holds rotated keys,
  // so a cache must be read with the rotation it was written with. Default off.
  bool rotate_qk = false;
  WeightFormat weight_format = WeightFormat::kFloat32;  // how Wq/Wk/Wv/Wo are stored
};

// f32 weights in the nn.Linear layout [out, in]; the layer packs the projections into
// config.weight_format at construction and keeps only the packed copies.
struct AttentionWeights {
  std::vector<float> wq;      // [Hq*D, d_model]
  std::vector<float> wk;      // [Hkv*D, d_model]
  std::vector<float> wv;      // [Hkv*D, d_model]
  std::vector<float> wo;      // [d_model, Hq*D]
  std::vector<float> q_norm;  // [D] iff config.qk_norm
  std::vector<float> k_norm;  // [D] iff config.qk_norm
  std::vector<float> sinks;   // [Hq] iff config.has_sinks
};

// The projections after norm and RoPE, in the activation dtype, token-major and
// contiguous. The views point into the owning Attention's scratch: valid until its next
// call.
struct QkvProjections {
  TensorView q;  // [T, Hq, D]
  TensorView k;  // [T, Hkv, D]
  TensorView v;  // [T, Hkv, D]
};

class Attention {
 public:
  // Throws InvalidArgument on inconsistent sizes or options. `backend` must outlive this.
  Attention(const AttentionConfig& config, AttentionWeights weights, AttentionBackend& backend);

  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  // hidden: [T, d_model] and output: [T, d_model], activation dtype, contiguous;
  // positions: [T] absolute token positions (for RoPE); batch: the step's ragged metadata;
  // cache: this layer's cache (its donor's for a KV-shared layer), updated in place unless
  // the layer is KV-shared. Rows of output past the batch's scheduled tokens are
  // unspecified. Throws InvalidArgument on bad shapes/dtypes/scales; the backend throws on
  // bad metadata (with the kernel's messages).
  void ForwardServe(const TensorView& hidden, std::span<const int32_t> positions,
                    const RaggedBatch& batch, LayerKvCache& cache, const TensorView& output);

  // The stages ForwardServe is made of, public so a caller (or a test) can assemble the
  // same path around them.
  // Projections, norm, RoPE and (rotate_qk) the q/k rotation of `hidden` [T, d_model].
  QkvProjections ProjectQkv(const TensorView& hidden, std::span<const int32_t> positions);
  // Options for this layer's kernel call, with K/V scales unset (ForwardServe sets them
  // for an fp8 cache).
  AttentionOptions KernelOptions() const;
  // output [T, d_model] = attn [T, Hq, D] · Woᵀ; both in the activation dtype.
  void ProjectOutput(const TensorView& attn, const TensorView& output);

  const AttentionConfig& config() const { return config_; }
  // True iff the layer reads a donor's cache and writes none.
  bool kv_shared() const { return config_.kv_share_donor.has_value(); }

 private:
  // K/V in the cache dtype for the kernel, scales set iff the cache is fp8.
  void PrepareKv(const QkvProjections& qkv, const LayerKvCache& cache, TensorView& keys,
                 TensorView& values, AttentionOptions& options);

  AttentionConfig config_;
  AttentionWeights weights_;  // norms and sinks (the projections are moved into w*_)
  PackedWeights wq_, wk_, wv_, wo_;
  AttentionBackend& backend_;

  // Scratch, grown on demand and reused across calls.
  std::vector<float> x_f32_;       // [T, d_model]
  std::vector<float> q_f32_;       // [T, Hq*D]
  std::vector<float> k_f32_;       // [T, Hkv*D]
  std::vector<float> v_f32_;       // [T, Hkv*D]
  std::vector<uint8_t> q_act_;     // [T, Hq, D] activation dtype (bf16 only)
  std::vector<uint8_t> k_act_;     // [T, Hkv, D]
  std::vector<uint8_t> v_act_;     // [T, Hkv, D]
  std::vector<uint8_t> k_cache_;   // [T, Hkv, D] cache dtype (when it differs)
  std::vector<uint8_t> v_cache_;   // [T, Hkv, D]
  std::vector<uint8_t> attn_out_;  // [T, Hq, D] activation dtype
  std::vector<float> attn_f32_;    // [T, Hq*D]
  std::vector<float> out_f32_;     // [T, d_model]
};

}  // namespace rpa
