// RaggedBatch: the per-step description of which tokens of which sequences run, built once
// per step by the batch builder and shared by every attention layer ("plan once, run
// many"). It is the kernel's metadata (rpa-contract.md §1) in caller memory; the token
// positions that RoPE needs travel next to it as a [T] span.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/attention_plan_cache.h"
#include "kernels/ragged_paged_attention.h"

namespace rpa {

struct RaggedBatch {
  AttentionMetadata metadata;  // kv_lens [S], page_indices [S*PPS], cu_q_lens [S+1],
                               // distribution [3]
  // Optional: the step's plans, shared by every layer (plan once, run many). The owner
  // resets it whenever the metadata changes. Null: each kernel call plans for itself.
  AttentionPlanCache* plans = nullptr;
};

}  // namespace rpa
