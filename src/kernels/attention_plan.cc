#include "kernels/attention_plan.h"

#include <algorithm>
#include <cstring>

#include "kernels/attention_kernel.h"
#include "kernels/attention_validate.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rpa {
namespace {

// Queries per KV head per item (rows * G) aimed for: enough to amortize each decoded K/V tile
// over many dot products in prefill (32 left an fp8 prefill ~20% behind bf16, 64 levels
// them), few enough that the f32 queries and accumulators (2 * 64 * 256 * 4 B = 128 KiB per
// head at D = 256) stay in L2.
constexpr int64_t kTargetQueries = 64;
// Work items per worker aimed for before KV ranges are split: slack for dynamic balancing.
constexpr int64_t kItemsPerWorker = 4;
// A KV chunk shorter than this costs more in merge traffic (M x D floats written, read back)
// than it gains in balance.
constexpr int64_t kMinChunkTokens = 256;
constexpr int64_t kTileTokens = kAttentionTileTokens;  // chunks align to kernel tiles
// Queries (rows * G * heads) per item at most when grouping KV heads: bounds the scratch
// (2 * 256 * D floats) while covering every head of a decode step of common models.
constexpr int64_t kMaxItemQueries = 256;

struct Unit {
  int32_t seq, head_begin, head_end, row_begin, row_end, kv_begin, kv_end;
  int64_t cost;
};

}  // namespace

AttentionShape ShapeOf(const TensorView& queries, const TensorView& keys,
                       const TensorView& kv_cache) {
  AttentionShape s;
  s.num_tokens = queries.shape[0];
  s.num_q_heads = queries.shape[1];
  s.num_kv_heads = keys.shape[1];
  s.head_dim = queries.shape[2];
  s.num_pages = kv_cache.shape[0];
  s.page_size = kv_cache.shape[1];
  return s;
}

AttentionPlan PlanAttention(const AttentionShape& shape, const AttentionMetadata& metadata,
                            const AttentionOptions& options) {
  ValidateAttentionMetadata(metadata, shape.num_tokens, shape.page_size, shape.num_pages);
  AttentionPlan plan;
  plan.shape = shape;
  plan.use_causal_mask = options.use_causal_mask;
  plan.sliding_window = options.sliding_window.value_or(0);
  const int pool_threads = ThreadPool::Global().num_threads();
  plan.num_workers =
      options.num_threads > 0 ? std::min(options.num_threads, pool_threads) : pool_threads;
  plan.kv_lens.assign(metadata.kv_lens.begin(), metadata.kv_lens.end());
  plan.page_indices.assign(metadata.page_indices.begin(), metadata.page_indices.end());
  plan.cu_q_lens.assign(metadata.cu_q_lens.begin(), metadata.cu_q_lens.end());
  plan.distribution.assign(metadata.distribution.begin(), metadata.distribution.end());
  plan.num_seqs = metadata.distribution[2];
  plan.pages_per_seq = static_cast<int64_t>(plan.page_indices.size()) /
                       static_cast<int64_t>(plan.kv_lens.size());

  const int64_t G = shape.num_q_heads / shape.num_kv_heads;
  const int64_t rows_per_item = std::max<int64_t>(1, kTargetQueries / G);
  const int64_t heads_per_item = std::clamp<int64_t>(
      kMaxItemQueries / (std::min<int64_t>(rows_per_item, shape.num_tokens) * G), 1,
      shape.num_kv_heads);

  // Units: (seq, kv head, row tile) with the union of their queries' visible KV ranges.
  std::vector<Unit> units;
  int64_t total_cost = 0;
  int64_t max_queries = 1;
  for (int32_t i = 0; i < plan.num_seqs; ++i) {
    const int32_t row0 = plan.cu_q_lens[i], row_end = plan.cu_q_lens[i + 1];
    const int32_t kv_len = plan.kv_lens[i];
    const int32_t offset = kv_len - (row_end - row0);
    for (int32_t r = row0; r < row_end; r += static_cast<int32_t>(rows_per_item)) {
      const int32_t r_end = static_cast<int32_t>(std::min<int64_t>(row_end, r + rows_per_item));
      int32_t lo = 0, hi = kv_len;
      if (plan.use_causal_mask) {
        hi = offset + (r_end - row0);  // last row's position + 1
        if (plan.sliding_window > 0) {
          lo = std::max(0, offset + (r - row0) - plan.sliding_window + 1);
        }
      }
      // Per tile of 16 tokens every query of the unit pays QK and PV: cost ~ tokens * M, plus
      // a per-token softmax term.
      const int64_t cost = static_cast<int64_t>(hi - lo) * ((r_end - r) * G + 2);
      for (int64_t h = 0; h < shape.num_kv_heads; h += heads_per_item) {
        const int64_t h_end = std::min(shape.num_kv_heads, h + heads_per_item);
        max_queries = std::max(max_queries, (r_end - r) * G * (h_end - h));
        units.push_back({i, static_cast<int32_t>(h), static_cast<int32_t>(h_end), r, r_end, lo,
                         hi, cost * (h_end - h)});
        total_cost += cost * (h_end - h);
      }
    }
  }
  plan.max_queries_per_item = max_queries;
  plan.partial_stride = max_queries * shape.head_dim + 2 * max_queries;

  const int64_t target = plan.num_workers > 1
                             ? std::max<int64_t>(1, total_cost / (plan.num_workers * kItemsPerWorker))
                             : 0;
  int32_t num_partials = 0;
  std::vector<std::pair<int64_t, AttentionWorkItem>> items;
  for (const Unit& u : units) {
    const int64_t len = u.kv_end - u.kv_begin;
    int64_t chunks = 1;
    if (target > 0 && u.cost > target) {
      chunks = std::min((u.cost + target - 1) / target, std::max<int64_t>(1, len / kMinChunkTokens));
    }
    if (chunks <= 1) {
      items.push_back({u.cost, {u.seq, u.head_begin, u.head_end, u.row_begin, u.row_end,
                                u.kv_begin, u.kv_end, -1}});
      continue;
    }
    const int64_t chunk_len = ((len + chunks - 1) / chunks + kTileTokens - 1) / kTileTokens * kTileTokens;
    AttentionMerge merge{u.seq,         u.head_begin, u.head_end, u.row_begin,
                         u.row_end,     num_partials, 0};
    for (int64_t b = u.kv_begin; b < u.kv_end; b += chunk_len) {
      const int32_t e = static_cast<int32_t>(std::min<int64_t>(u.kv_end, b + chunk_len));
      items.push_back({u.cost * (e - b) / len,
                       {u.seq, u.head_begin, u.head_end, u.row_begin, u.row_end,
                        static_cast<int32_t>(b), e, num_partials++}});
      ++merge.num_partials;
    }
    plan.merges.push_back(merge);
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  plan.items.reserve(items.size());
  for (const auto& it : items) plan.items.push_back(it.second);
  if (num_partials > 0) plan.partials.Reserve(static_cast<size_t>(num_partials * plan.partial_stride));
  return plan;
}

namespace {

// Writes the new K/V rows of every sequence at their positions (§2): a memcpy per row,
// since K/V already have the cache dtype, so the cache bytes equal the inputs bit for bit.
void WriteKvCache(const AttentionPlan& plan, const TensorView& keys, const TensorView& values,
                  const TensorView& kv_cache) {
  const AttentionShape& sh = plan.shape;
  const int64_t es = static_cast<int64_t>(DTypeSize(kv_cache.dtype));
  const size_t row_bytes = static_cast<size_t>(sh.head_dim * es);
  uint8_t* cache = static_cast<uint8_t*>(kv_cache.data);
  const auto* k = static_cast<const uint8_t*>(keys.data);
  const auto* v = static_cast<const uint8_t*>(values.data);
  for (int32_t i = 0; i < plan.num_seqs; ++i) {
    const int32_t row0 = plan.cu_q_lens[i], row_end = plan.cu_q_lens[i + 1];
    const int32_t offset = plan.kv_lens[i] - (row_end - row0);
    const int32_t* pages = plan.page_indices.data() + i * plan.pages_per_seq;
    for (int32_t r = row0; r < row_end; ++r) {
      const int64_t pos = offset + (r - row0);
      uint8_t* slot = cache + ((static_cast<int64_t>(pages[pos / sh.page_size]) * sh.page_size +
                                pos % sh.page_size) *
                               2 * sh.num_kv_heads * sh.head_dim * es);
      for (int64_t h = 0; h < sh.num_kv_heads; ++h) {
        std::memcpy(slot + 2 * h * sh.head_dim * es,
                    k + (r * keys.strides[0] + h * keys.strides[1]) * es, row_bytes);
        std::memcpy(slot + (2 * h + 1) * sh.head_dim * es,
                    v + (r * values.strides[0] + h * values.strides[1]) * es, row_bytes);
      }
    }
  }
}

}  // namespace

void RunAttention(AttentionPlan& plan, const TensorView& queries, const TensorView& keys,
                  const TensorView& values, const TensorView& kv_cache,
                  const AttentionOptions& options, const TensorView& output) {
  const AttentionMetadata md{plan.kv_lens, plan.page_indices, plan.cu_q_lens, plan.distribution};
  ValidateAttentionInputs(queries, keys, values, kv_cache, md, options, output);
  const AttentionShape sh = ShapeOf(queries, keys, kv_cache);
  const AttentionShape& ps = plan.shape;
  if (sh.num_tokens != ps.num_tokens || sh.num_q_heads != ps.num_q_heads ||
      sh.num_kv_heads != ps.num_kv_heads || sh.head_dim != ps.head_dim ||
      sh.page_size != ps.page_size || sh.num_pages != ps.num_pages) {
    throw InvalidArgument(Concat(
        "RunAttention: q.shape=", queries.shape_str(), " and kv_cache.shape=",
        kv_cache.shape_str(), " do not match the plan's (T, Hq, Hkv, D, PS, NP)=(",
        ps.num_tokens, ", ", ps.num_q_heads, ", ", ps.num_kv_heads, ", ", ps.head_dim, ", ",
        ps.page_size, ", ", ps.num_pages, ")"));
  }
  if (options.use_causal_mask != plan.use_causal_mask ||
      options.sliding_window.value_or(0) != plan.sliding_window) {
    throw InvalidArgument(
        "RunAttention: use_causal_mask / sliding_window differ from the plan's options");
  }
  if (options.update_kv_cache) WriteKvCache(plan, keys, values, kv_cache);

  AttentionKernelArgs args;
  args.plan = &plan;
  args.queries = queries;
  args.kv_cache = kv_cache;
  args.output = output;
  const KvDecodeScales decode = KvDecodeScalesFor(kv_cache.dtype);
  args.logit_scale = options.sm_scale * options.k_scale.value_or(1.0f) *
                     options.q_scale.value_or(1.0f) * decode.query;
  args.logit_factor = decode.logit;
  args.weight_factor = decode.weight;
  args.out_scale = options.v_scale.value_or(1.0f);
  args.quantize_q = options.q_scale.has_value();
  args.q_scale = options.q_scale.value_or(1.0f);
  args.has_soft_cap = options.soft_cap.has_value();
  args.soft_cap = options.soft_cap.value_or(0.0f);
  args.sinks = options.sinks ? options.sinks->as<const float>() : nullptr;
  args.partials = plan.partials.data();
  RunAttentionKernel(args);
}

}  // namespace rpa
