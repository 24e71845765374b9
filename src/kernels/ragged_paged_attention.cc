#include "kernels/ragged_paged_attention.h"

#include "kernels/attention_plan.h"
#include "kernels/attention_validate.h"

namespace rpa {

void RaggedPagedAttention(const TensorView& queries, const TensorView& keys,
                          const TensorView& values, const TensorView& kv_cache,
                          const AttentionMetadata& metadata, const AttentionOptions& options,
                          const TensorView& output) {
  // Static checks first, so their messages win over the metadata values' (§3 order).
  ValidateAttentionInputs(queries, keys, values, kv_cache, metadata, options, output);
  AttentionPlan plan = PlanAttention(ShapeOf(queries, keys, kv_cache), metadata, options);
  RunAttention(plan, queries, keys, values, kv_cache, options, output);
}

}  // namespace rpa
