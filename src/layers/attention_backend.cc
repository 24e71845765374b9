#include "layers/attention_backend.h"

#include "kernels/attention_validate.h"

namespace rpa {

void KernelBackend::Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                        const TensorView& kv_cache, const AttentionMetadata& metadata,
                        const AttentionOptions& options, const TensorView& output) {
  RaggedPagedAttention(queries, keys, values, kv_cache, metadata, options, output);
}

void KernelBackend::RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                                 const TensorView& keys, const TensorView& values,
                                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                                 const AttentionOptions& options, const TensorView& output) {
  if (plans == nullptr) {
    Run(queries, keys, values, kv_cache, metadata, options, output);
    return;
  }
  // Static checks first: planning requires them, and they are what catches a wrong
  // dtype (the contract's item 8) before anything else.
  ValidateAttentionInputs(queries, keys, values, kv_cache, metadata, options, output);
  AttentionPlan& plan = plans->Get(ShapeOf(queries, keys, kv_cache), metadata, options);
  RunAttention(plan, queries, keys, values, kv_cache, options, output);
}

}  // namespace rpa
