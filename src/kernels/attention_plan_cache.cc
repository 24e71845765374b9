#include "kernels/attention_plan_cache.h"

namespace rpa {
namespace {

bool SameShape(const AttentionShape& a, const AttentionShape& b) {
  return a.num_tokens == b.num_tokens && a.num_q_heads == b.num_q_heads &&
         a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim &&
         a.page_size == b.page_size && a.num_pages == b.num_pages;
}

}  // namespace

AttentionPlan& AttentionPlanCache::Get(const AttentionShape& shape,
                                       const AttentionMetadata& metadata,
                                       const AttentionOptions& options) {
  const int32_t window = options.sliding_window.value_or(0);
  for (Entry& e : entries_) {
    if (SameShape(e.shape, shape) && e.use_causal_mask == options.use_causal_mask &&
        e.sliding_window == window && e.num_threads == options.num_threads) {
      return e.plan;
    }
  }
  entries_.push_back(Entry{shape, options.use_causal_mask, window, options.num_threads,
                           PlanAttention(shape, metadata, options)});
  return entries_.back().plan;
}

}  // namespace rpa
