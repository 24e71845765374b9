// AttentionBackend: where a layer's attention step is dispatched. Production uses
// KernelBackend (rpa's ragged_paged_attention); tests substitute a recording fake to see
// exactly what the serving path hands to the kernel.
#pragma once

#include "kernels/attention_plan_cache.h"
#include "kernels/ragged_paged_attention.h"
#include "numerics/tensor_view.h"

namespace rpa {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // Same arguments and contract as RaggedPagedAttention (rpa-contract.md): keys/values
  // [T, Hkv, D] in the cache dtype, kv_cache [NP, PS, 2*Hkv, D], output [T, Hq, D].
  virtual void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                   const TensorView& kv_cache, const AttentionMetadata& metadata,
                   const AttentionOptions& options, const TensorView& output) = 0;

  // The same call with the step's plan cache (null: none), so that a backend able to
  // reuse one plan across layers can. The default ignores it.
  virtual void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                            const TensorView& keys, const TensorView& values,
                            const TensorView& kv_cache, const AttentionMetadata& metadata,
                            const AttentionOptions& options, const TensorView& output) {
    (void)plans;
    Run(queries, keys, values, kv_cache, metadata, options, output);
  }
};

// The real kernel.
class KernelBackend final : public AttentionBackend {
 public:
  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override;
  // Plans once per (batch, mask options) through `plans`, then runs the planned kernel.
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries, const TensorView& keys,
                    const TensorView& values, const TensorView& kv_cache,
                    const AttentionMetadata& metadata, const AttentionOptions& options,
                    const TensorView& output) override;
};

}  // namespace rpa
