// Internal interface between the attention plan (attention_plan.cc) and the per-target SIMD
// kernel (attention_kernel.cc). Not for use outside src/kernels.
#pragma once

#include "kernels/attention_plan.h"
#include "numerics/tensor_view.h"

namespace rpa {

// KV tokens per kernel tile; the plan aligns KV chunk boundaries to it.
constexpr int kAttentionTileTokens = 64;

// Everything a work item needs besides the plan, with the scales already folded.
struct AttentionKernelArgs {
  const AttentionPlan* plan = nullptr;
  TensorView queries;   // [T, Hq, D] f32 / bf16
  TensorView kv_cache;  // [NP, PS, 2 * Hkv, D], contiguous
  TensorView output;    // [T, Hq, D], dtype of queries
  // Multiplies q before QK^T: sm_scale * k_scale * q_scale, times KvDecodeScales::query.
  float logit_scale = 1.0f;
  // Multiplies each logit q'.k' (KvDecodeScales::logit) and each softmax weight before P.V
  // (KvDecodeScales::weight); the running sums see the plain weights.
  float logit_factor = 1.0f;
  float weight_factor = 1.0f;
  // Multiplies the normalized output: v_scale.
  float out_scale = 1.0f;
  // q_scale set: q is divided by it, clipped and cast to the cache dtype first (§2).
  bool quantize_q = false;
  float q_scale = 1.0f;
  bool has_soft_cap = false;
  float soft_cap = 0.0f;
  const float* sinks = nullptr;  // [Hq] or null
  float* partials = nullptr;     // the plan's partial-state slots
};

// Undoing the kernel's K/V decode for a cache dtype. fp8 is decoded to value * 2^-bias
// (bias 120 for e4m3fn, 112 for e5m2: the code's bits placed in an f32, see
// DecodeE4M3FNBiased), so a logit q.k takes 2^bias back and P.V products p * v do too:
//   query * logit = 2^bias: q carries 2^64 (q' = q * scale * 2^64 overflows only for
//     |q * scale| >= 2^64; products q' * k' stay normal down to |q * scale * k| = 2^-70),
//     each logit the rest;
//   weight = 2^bias: the weights p (at most 1, zero below 2^-126) scaled into [2^-6, 2^bias]
//     so p' * v' = p * v exactly, the products of an unbiased decode.
// All factors are powers of two: the logits, weights and outputs are bit for bit those of
// a kernel reading exact values (f32 / bf16 caches: all 1).
struct KvDecodeScales {
  float query = 1.0f;
  float logit = 1.0f;
  float weight = 1.0f;
};
KvDecodeScales KvDecodeScalesFor(DType cache_dtype);

// Runs every work item of args.plan on the global pool (plan.num_workers participants), then
// the merges of split items.
void RunAttentionKernel(const AttentionKernelArgs& args);

}  // namespace rpa
