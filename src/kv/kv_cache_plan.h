// Sizing the KV cache from a memory budget: how many pages fit, and the start-up log line
//
//   KV cache: 4096 pages x 16 = 65536 tokens, float8_e4m3fn, 18 KiB/token (bfloat16 would hold
//   32768)
//
// The page count is floor(budget / bytes per page), so with the same budget an fp8 cache
// (half the bytes per page of bf16) holds 2x the pages of a bf16 cache, or one page more.
//
// Plain functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_cache_spec.h"

namespace rpa {

struct KvCachePlan {
  uint64_t budget_bytes = 0;  // what the pages were carved from
  int32_t num_pages = 0;      // NP
  int32_t page_size = 0;      // PS
  uint64_t bytes_per_token = 0;
  uint64_t bytes_per_page = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(num_pages) * page_size; }
  uint64_t total_bytes() const { return bytes_per_page * static_cast<uint64_t>(num_pages); }
};

// The largest page count whose bytes fit in `budget_bytes` (capped at INT32_MAX, the range
// of the kernel's int32 page indices). Throws rpa::InvalidArgument when the spec is invalid,
// max_num_seqs <= 0, or the budget does not hold one page per sequence (max_num_seqs pages);
// the message names the budget, the bytes per page and the minimum budget.
KvCachePlan PlanKvCache(const KvCacheSpec& spec, uint64_t budget_bytes, int32_t max_num_seqs);

// The start-up log line above (no trailing newline). The comparison in parentheses is what
// the same budget holds in bfloat16 for an fp8 cache, and in float8_e4m3fn otherwise.
std::string DescribeKvCache(const KvCacheSpec& spec, const KvCachePlan& plan);

}  // namespace rpa
