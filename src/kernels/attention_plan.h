// The plan of one ragged batch: which worker computes which (sequence, kv-head, query rows,
// KV range) item. Computed once per batch (scheduler step) and reused by every layer, whose
// shapes and metadata are the same; only the tensors change.
//
//   AttentionPlan plan = PlanAttention(shape, metadata, options);   // validates metadata
//   for (layer ...) RunAttention(plan, q, k, v, kv_cache[layer], options, out);
//
// Work split. Each item covers a tile of query rows of one sequence and a range of KV heads
// (all of them unless that makes too many queries), so every K/V byte it reads serves all
// G = Hq/Hkv query heads of its KV head and every row of the tile, and page slots are read
// front to back. Rows per tile keep the f32 queries and accumulators (M = rows * G per head,
// D floats each) in L1/L2. When there are too few items for the workers (e.g. a few long
// decode sequences), an item's KV range is split into chunks, each producing a partial
// softmax state (max, sum, accumulator) that a merge step combines; so one long sequence
// still uses every core.
//
// A plan holds copies of the validated metadata, so nothing a caller changes afterwards
// can make a run read or write outside its views. Thread safety: a plan may be used by one
// RunAttention call at a time (it owns the partial-state scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ragged_paged_attention.h"
#include "numerics/tensor_view.h"
#include "util/aligned_buffer.h"

namespace rpa {

// The shape facts a plan depends on (all from the views of §1).
struct AttentionShape {
  int64_t num_tokens = 0;    // T
  int64_t num_q_heads = 0;   // Hq
  int64_t num_kv_heads = 0;  // Hkv
  int64_t head_dim = 0;      // D
  int64_t page_size = 0;     // PS
  int64_t num_pages = 0;     // NP
};

// One unit of work: query rows [row_begin, row_end) (absolute rows of q) of sequence `seq`,
// for KV heads [head_begin, head_end) and their query heads, against KV positions
// [kv_begin, kv_end). Spanning several heads lets an item read each page slot (all heads of
// a token are adjacent) as one contiguous stream, which the hardware prefetchers follow;
// per-head items would read 2*D-element slivers at a stride of 2*Hkv*D.
struct AttentionWorkItem {
  int32_t seq;
  int32_t head_begin, head_end;
  int32_t row_begin, row_end;
  int32_t kv_begin, kv_end;
  int32_t partial;  // -1: finalize into the output; else the partial-state slot it fills
};

// The partial states [first_partial, first_partial + num_partials) of one split (seq, head
// range, row tile), combined into output rows [row_begin, row_end).
struct AttentionMerge {
  int32_t seq;
  int32_t head_begin, head_end;
  int32_t row_begin, row_end;
  int32_t first_partial, num_partials;
};

struct AttentionPlan {
  AttentionShape shape;
  bool use_causal_mask = true;
  int32_t sliding_window = 0;  // 0 = none
  int num_workers = 1;

  // Validated copies of the metadata.
  std::vector<int32_t> kv_lens, page_indices, cu_q_lens;
  std::vector<int32_t> distribution;  // (d0, d1, d2)
  int32_t num_seqs = 0;               // distribution[2]
  int64_t pages_per_seq = 0;  // PPS

  std::vector<AttentionWorkItem> items;  // in decreasing cost, the order workers take them
  std::vector<AttentionMerge> merges;
  int64_t max_queries_per_item = 1;  // rows * heads * G: bounds the scratch sizes
  int64_t partial_stride = 0;  // floats per partial slot: M * D accumulators + 2 * M
  AlignedBuffer<float> partials;   // [num_partial_slots, partial_stride]
};

// Validates the metadata values (§3 dynamic checks) against `shape` and plans the batch.
// options supplies use_causal_mask, sliding_window and num_threads (0 = the whole pool).
// REQUIRES: the static checks passed for this shape (ValidateAttentionInputs).
AttentionPlan PlanAttention(const AttentionShape& shape, const AttentionMetadata& metadata,
                            const AttentionOptions& options);

// Validates the views (static checks, and that they match plan.shape and the plan's mask
// options), writes the new K/V into the cache unless options.update_kv_cache is false, and
// computes attention for every scheduled token. `plan` is not modified except for its
// scratch.
void RunAttention(AttentionPlan& plan, const TensorView& queries, const TensorView& keys,
                  const TensorView& values, const TensorView& kv_cache,
                  const AttentionOptions& options, const TensorView& output);

// The shape of a call's views. REQUIRES: the static checks passed.
AttentionShape ShapeOf(const TensorView& queries, const TensorView& keys,
                       const TensorView& kv_cache);

}  // namespace rpa
