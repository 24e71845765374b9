// AttentionPlanCache: the plans of one ragged batch, shared by every layer of a step
// ("plan once, run many"). A model's layers see the same metadata and shapes and differ at
// most in their mask options (Gemma 3: local layers with a sliding window, global ones
// without), so a step needs one plan per distinct (shape, mask options) — usually one or
// two — instead of one per layer.
//
// Usage: the batch builder calls Reset() whenever the metadata changes (every step); each
// layer's kernel call asks Get() for its plan.
//
// Thread safety: one owner (the step's driving thread).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_plan.h"

namespace rpa {

class AttentionPlanCache {
 public:
  // Forgets every plan: the next Get() plans anew. Call when the batch changes.
  void Reset() { entries_.clear(); }

  // The plan for `shape` and the mask options of `options` (use_causal_mask,
  // sliding_window, num_threads) over `metadata`, computed on the first request of this
  // batch. REQUIRES: metadata is the same batch since Reset(); the static checks passed.
  AttentionPlan& Get(const AttentionShape& shape, const AttentionMetadata& metadata,
                     const AttentionOptions& options);

  // Plans computed since Reset() (for tests: one per distinct key).
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    AttentionShape shape;
    bool use_causal_mask;
    int32_t sliding_window;  // 0 = none
    int num_threads;
    AttentionPlan plan;
  };
  std::vector<Entry> entries_;
};

}  // namespace rpa
