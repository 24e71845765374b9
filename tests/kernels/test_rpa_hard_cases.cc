// rpa's own harder attention cases, beyond upstream's matrix: kv_len 1, page-boundary
// lengths, page sizes 1/3/16, batch 17 with GQA (9, 3), random block tables with garbage
// in the unused entries, padding rows and unused sequences, peaked softmax with soft cap
// and sinks, clipping q_scale, long contexts (>= 16K) on 1 and 2 threads, and the plan
// API: KV split on and off, one plan reused across layers. Each against the float64
// reference with the derived bound (rpa_cases.cc), cache bit-exact, canaries intact.
#include <gtest/gtest.h>

#include "kernels/attention_plan.h"
#include "kernels/ragged_paged_attention.h"
#include "tests/kernels/rpa_cases.h"
#include "tests/kernels/rpa_check.h"

namespace rpa::testing {
namespace {

using ::testing::ValuesIn;

class RpaHard : public ::testing::TestWithParam<RpaCase> {};

TEST_P(RpaHard, MatchesReference) { ExpectKernelMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Hard, RpaHard, ValuesIn(HardCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(LongContext, RpaHard, ValuesIn(LongContextCases()), CaseName());

// Runs through the plan API and reports whether the plan split a KV range.
AttentionCall PlannedCall(bool* split) {
  return [split](RpaProblem& p, const TensorView& output) {
    const AttentionOptions options = p.options();
    const TensorView q = p.queries_view(), k = p.keys_view(), cache = p.kv_cache_view();
    AttentionPlan plan = PlanAttention(ShapeOf(q, k, cache), p.metadata(), options);
    *split = !plan.merges.empty();
    RunAttention(plan, q, k, p.values_view(), cache, options, output);
  };
}

// One sequence, one KV head, a 16K context: a single work item, which two workers can only
// share by splitting its KV range (partial softmax states, then a merge).
RpaCase SingleLongDecode(int threads) {
  RpaCase c;
  c.name = "single_long_decode";
  c.seqs = {{1, 16384 + 100}};
  c.num_decode = 1;
  c.num_q_heads = 4;
  c.num_kv_heads = 1;
  c.num_threads = threads;
  c.fill = Fill::kSigned;
  c.q_magnitude = c.kv_magnitude = 2.0f;
  c.sinks_magnitude = 2.0f;
  c.seed = 31;
  return c;
}

TEST(RpaKvSplit, OnWithTwoThreadsMatchesReference) {
  bool split = false;
  ExpectKernelMatchesReference(SingleLongDecode(2), PlannedCall(&split));
  EXPECT_TRUE(split) << "one long sequence on 2 threads was not split: one core idles";
}

TEST(RpaKvSplit, OffWithOneThreadMatchesReference) {
  bool split = true;
  ExpectKernelMatchesReference(SingleLongDecode(1), PlannedCall(&split));
  EXPECT_FALSE(split) << "a single thread has nothing to split for";
}

// A window shorter than one chunk, at the end of a long sequence: chunks wholly outside
// the window hold empty softmax states (max -inf, sum 0) that the merge must not turn
// into NaN.
TEST(RpaKvSplit, EmptyPartialStatesMergeWithoutNan) {
  RpaCase c = SingleLongDecode(2);
  c.sliding_window = 3;
  c.sinks_magnitude.reset();
  bool split = false;
  ExpectKernelMatchesReference(c, PlannedCall(&split));
}

// Plan once per batch, run for every layer: the second layer's tensors differ, the
// metadata does not.
TEST(RpaPlan, OnePlanServesSeveralLayers) {
  RpaCase layer0;
  layer0.name = "layer0";
  layer0.seqs = {{1, 70}, {1, 5}, {9, 40}, {20, 20}};
  layer0.num_decode = 2;
  layer0.num_prefill = 1;
  layer0.num_q_heads = 8;
  layer0.num_kv_heads = 2;
  layer0.head_dim = 64;
  layer0.fill = Fill::kSigned;
  layer0.num_threads = 2;
  RpaCase layer1 = layer0;
  layer1.name = "layer1";
  layer1.seed = 2;
  layer1.kv_dtype = DType::kFloat8E4M3FN;  // layers may even use different cache dtypes
  layer1.k_scale = 0.5f;
  layer1.v_scale = 0.25f;

  RpaProblem first = MakeProblem(layer0);
  const AttentionOptions options = first.options();
  AttentionPlan plan =
      PlanAttention(ShapeOf(first.queries_view(), first.keys_view(), first.kv_cache_view()),
                    first.metadata(), options);
  auto run_with_plan = [&plan](RpaProblem& p, const TensorView& output) {
    RunAttention(plan, p.queries_view(), p.keys_view(), p.values_view(), p.kv_cache_view(),
                 p.options(), output);
  };
  ExpectKernelMatchesReference(layer0, run_with_plan);
  ExpectKernelMatchesReference(layer1, run_with_plan);
}

}  // namespace
}  // namespace rpa::testing
