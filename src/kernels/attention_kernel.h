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
  // Multiplies q before QK^T: sm_scale * k_scale * q_scale, times the K decode's own factor
  // (256 for e4m3fn, whose cheapest decode yields value * 2^-8).
  float logit_scale = 1.0f;
  // Multiplies the normalized output: v_scale times the V decode's factor.
  float out_scale = 1.0f;
  // q_scale set: q is divided by it, clipped and cast to the cache dtype first (§2).
  bool quantize_q = false;
  float q_scale = 1.0f;
  bool has_soft_cap = false;
  float soft_cap = 0.0f;
  const float* sinks = nullptr;  // [Hq] or null
  float* partials = nullptr;     // the plan's partial-state slots
};

// Decode factor of the kernel's K/V loads for a cache dtype (see logit_scale).
float KvDecodeFactor(DType cache_dtype);

// Runs every work item of args.plan on the global pool (plan.num_workers participants), then
// the merges of split items.
void RunAttentionKernel(const AttentionKernelArgs& args);

}  // namespace rpa
