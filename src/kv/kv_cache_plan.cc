#include "kv/kv_cache_plan.h"

#include <algorithm>
#include <limits>

#include "kv/memory_budget.h"
#include "util/error.h"

namespace rpa {

KvCachePlan PlanKvCache(const KvCacheSpec& spec, uint64_t budget_bytes, int32_t max_num_seqs) {
  spec.Validate();
  if (max_num_seqs <= 0) {
    throw InvalidArgument(Concat("max_num_seqs=", max_num_seqs, " must be positive"));
  }
  KvCachePlan plan;
  plan.budget_bytes = budget_bytes;
  plan.page_size = spec.page_size;
  plan.bytes_per_token = spec.BytesPerToken();
  plan.bytes_per_page = spec.BytesPerPage();
  const uint64_t pages = budget_bytes / plan.bytes_per_page;
  if (pages < static_cast<uint64_t>(max_num_seqs)) {
    throw InvalidArgument(Concat(
        "KV cache budget of ", FormatBytes(budget_bytes), " (", budget_bytes, " bytes) holds ",
        pages, " pages of ", plan.bytes_per_page, " bytes (", spec.page_size, " tokens x ",
        plan.bytes_per_token, " bytes/token in ", DTypeName(spec.dtype), "), but max_num_seqs=",
        max_num_seqs, " needs at least one page per sequence: give at least ",
        FormatBytes(plan.bytes_per_page * static_cast<uint64_t>(max_num_seqs)), " (",
        plan.bytes_per_page * static_cast<uint64_t>(max_num_seqs), " bytes)"));
  }
  plan.num_pages = static_cast<int32_t>(
      std::min<uint64_t>(pages, static_cast<uint64_t>(std::numeric_limits<int32_t>::max())));
  return plan;
}

std::string DescribeKvCache(const KvCacheSpec& spec, const KvCachePlan& plan) {
  const DType other = IsFp8(spec.dtype) ? DType::kBFloat16 : DType::kFloat8E4M3FN;
  const KvCacheSpec other_spec = spec.WithDType(other);
  const uint64_t other_pages =
      std::min<uint64_t>(plan.budget_bytes / other_spec.BytesPerPage(),
                         static_cast<uint64_t>(std::numeric_limits<int32_t>::max()));
  const uint64_t other_tokens = other_pages * static_cast<uint64_t>(spec.page_size);
  return Concat("KV cache: ", plan.num_pages, " pages x ", plan.page_size, " = ", plan.num_tokens(),
                " tokens, ", DTypeName(spec.dtype), ", ", FormatBytes(plan.bytes_per_token),
                "/token (", DTypeName(other), " would hold ", other_tokens, ")");
}

}  // namespace rpa
