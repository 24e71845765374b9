#include "tests/kernels/rpa_check.h"

#include <gtest/gtest.h>

#include <iomanip>
#include <sstream>

#include "kernels/ragged_paged_attention.h"

namespace rpa::testing {
namespace {

// "page P slot S kv-slot K dim D" of the first byte where two cache images differ, or "".
std::string FirstCacheDifference(const RpaProblem& p, const std::vector<uint8_t>& want) {
  for (size_t b = 0; b < want.size(); ++b) {
    if (p.kv_cache[b] == want[b]) continue;
    const int64_t elem = static_cast<int64_t>(b / DTypeSize(p.spec.kv_dtype));
    const int64_t d = elem % p.spec.head_dim;
    const int64_t kv_slot = elem / p.spec.head_dim % (2 * p.spec.num_kv_heads);
    const int64_t slot = elem / p.spec.head_dim / (2 * p.spec.num_kv_heads) % p.spec.page_size;
    const int64_t page = elem / p.spec.head_dim / (2 * p.spec.num_kv_heads) / p.spec.page_size;
    std::ostringstream os;
    os << "page " << page << " slot " << slot << " kv-slot " << kv_slot << " dim " << d << ": byte "
       << int{p.kv_cache[b]} << ", expected " << int{want[b]};
    return os.str();
  }
  return "";
}

}  // namespace

void CallPublicEntryPoint(RpaProblem& p, const TensorView& output) {
  RaggedPagedAttention(p.queries_view(), p.keys_view(), p.values_view(), p.kv_cache_view(),
                       p.metadata(), p.options(), output);
}

OutputCheck ExpectKernelMatchesReference(const RpaCase& spec, const AttentionCall& call) {
  RpaProblem p = MakeProblem(spec);
  const RpaProblem before = p;
  const ReferenceResult ref = RunReference(p);
  GuardedOutput out(spec.q_dtype, p.num_tokens, spec.num_q_heads, spec.head_dim);
  try {
    call(p, out.view());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "kernel threw: " << e.what();
    return {};
  }
  EXPECT_TRUE(out.CanariesIntact()) << "the kernel wrote outside the output view";
  EXPECT_TRUE(p.queries == before.queries) << "queries modified";
  EXPECT_TRUE(p.keys == before.keys) << "keys modified";
  EXPECT_TRUE(p.values == before.values) << "values modified";
  EXPECT_TRUE(p.kv_lens == before.kv_lens && p.page_indices == before.page_indices &&
              p.cu_q_lens == before.cu_q_lens && p.distribution == before.distribution)
      << "metadata modified";
  EXPECT_EQ(FirstCacheDifference(p, ref.kv_cache), "") << "kv_cache differs from the reference";
  const OutputCheck c = CheckOutput(p, ref, out.data());
  EXPECT_EQ(c.num_bad, 0) << c.num_bad << " of " << c.num_checked
                          << " outputs out of bounds; first: " << c.first_bad;
  // How close the run came to the bound, and upstream's metric (it allows 0.15-0.2).
  std::ostringstream ratio, upstream;
  ratio << std::setprecision(3) << c.worst_ratio;
  upstream << std::setprecision(3) << c.worst_upstream;
  ::testing::Test::RecordProperty("worst_error_over_bound", ratio.str());
  ::testing::Test::RecordProperty("worst_upstream_metric", upstream.str());
  return c;
}

}  // namespace rpa::testing
