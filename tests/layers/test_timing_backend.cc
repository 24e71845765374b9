// TimingBackend: forwards each call unchanged (same entry point, same arguments, same plan
// cache) and adds up only the time spent inside the inner backend.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "layers/timing_backend.h"

namespace rpa {
namespace {

using std::chrono::milliseconds;

// Records which entry point was called with which arguments; sleeps `delay` inside.
class SleepingBackend final : public AttentionBackend {
 public:
  void Run(const TensorView& queries, const TensorView&, const TensorView&, const TensorView&,
           const AttentionMetadata& metadata, const AttentionOptions& options,
           const TensorView& output) override {
    ++runs;
    Record(nullptr, queries, metadata, options, output);
  }
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries, const TensorView&,
                    const TensorView&, const TensorView&, const AttentionMetadata& metadata,
                    const AttentionOptions& options, const TensorView& output) override {
    ++runs_with_plans;
    Record(plans, queries, metadata, options, output);
  }

  milliseconds delay{0};
  bool fail = false;
  int runs = 0, runs_with_plans = 0;
  const AttentionPlanCache* seen_plans = nullptr;
  const void* seen_queries = nullptr;
  const void* seen_output = nullptr;
  const int32_t* seen_kv_lens = nullptr;
  float seen_sm_scale = 0;

 private:
  void Record(const AttentionPlanCache* plans, const TensorView& queries,
              const AttentionMetadata& metadata, const AttentionOptions& options,
              const TensorView& output) {
    seen_plans = plans;
    seen_queries = queries.data;
    seen_output = output.data;
    seen_kv_lens = metadata.kv_lens.data();
    seen_sm_scale = options.sm_scale;
    std::this_thread::sleep_for(delay);
    if (fail) throw std::runtime_error("inner failed");
  }
};

struct Args {
  float q[4] = {}, o[4] = {};
  int32_t kv_lens[1] = {1};
  TensorView queries = TensorView::Contiguous(q, DType::kFloat32, {1, 1, 4});
  TensorView output = TensorView::Contiguous(o, DType::kFloat32, {1, 1, 4});
  AttentionMetadata metadata{kv_lens, {}, {}, {}};
  AttentionOptions options;
  Args() { options.sm_scale = 0.5f; }
};

TEST(TimingBackend, ForwardsEachEntryPointWithTheSameArguments) {
  SleepingBackend inner;
  TimingBackend timed(inner);
  Args a;
  AttentionPlanCache plans;
  timed.RunWithPlans(&plans, a.queries, a.queries, a.queries, a.queries, a.metadata, a.options,
                     a.output);
  EXPECT_EQ(inner.runs_with_plans, 1);
  EXPECT_EQ(inner.runs, 0);
  EXPECT_EQ(inner.seen_plans, &plans);
  EXPECT_EQ(inner.seen_queries, a.q);
  EXPECT_EQ(inner.seen_output, a.o);
  EXPECT_EQ(inner.seen_kv_lens, a.kv_lens);
  EXPECT_EQ(inner.seen_sm_scale, 0.5f);

  timed.Run(a.queries, a.queries, a.queries, a.queries, a.metadata, a.options, a.output);
  EXPECT_EQ(inner.runs, 1);
  EXPECT_EQ(inner.runs_with_plans, 1);
  EXPECT_EQ(timed.calls(), 2);
}

TEST(TimingBackend, CountsTimeInsideCallsOnly) {
  SleepingBackend inner;
  inner.delay = milliseconds(10);
  TimingBackend timed(inner);
  Args a;
  // Time spent between calls (here 300 ms) must not be counted. The bounds: two sleeps of
  // 10 ms give at least 20 ms (sleep_for never returns early); wrongly counting the gap
  // would give > 300 ms, while scheduling noise on a loaded machine stays far below 280 ms.
  std::this_thread::sleep_for(milliseconds(150));
  timed.Run(a.queries, a.queries, a.queries, a.queries, a.metadata, a.options, a.output);
  std::this_thread::sleep_for(milliseconds(150));
  timed.RunWithPlans(nullptr, a.queries, a.queries, a.queries, a.queries, a.metadata, a.options,
                     a.output);
  EXPECT_GE(timed.seconds(), 0.020);
  EXPECT_LT(timed.seconds(), 0.300);
  EXPECT_EQ(timed.calls(), 2);

  timed.Reset();
  EXPECT_EQ(timed.seconds(), 0.0);
  EXPECT_EQ(timed.calls(), 0);
}

TEST(TimingBackend, CountsAFailedCallAndPropagatesTheError) {
  SleepingBackend inner;
  inner.delay = milliseconds(5);
  inner.fail = true;
  TimingBackend timed(inner);
  Args a;
  EXPECT_THROW(
      timed.Run(a.queries, a.queries, a.queries, a.queries, a.metadata, a.options, a.output),
      std::runtime_error);
  EXPECT_EQ(timed.calls(), 1);
  EXPECT_GE(timed.seconds(), 0.005);
}

}  // namespace
}  // namespace rpa
