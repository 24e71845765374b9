#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/engine.h"
#include "kernels/ragged_paged_attention.h"
#include "numerics/convert.h"
#include "tests/engine/tiny_model.h"
#include "util/error.h"

namespace rpa {
namespace {

using testing::MakeTinyDecoder;
using testing::TestPrompt;
using testing::TinyKvConfig;

// Bytes of the tiny model's cache per token: 2 layers x 2 kv heads x 2 (K,V) x 16 x dtype.
constexpr uint64_t kTinyBf16BytesPerToken = 2 * 2 * 2 * 16 * 2;

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
};

// Prompts of lengths 1..~90 (some longer than the token budgets used below, so they are
// prefilled in chunks next to other sequences' decodes).
Workload MixedWorkload(int n, bool sampled) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    w.prompts.push_back(TestPrompt(i, 1 + (i * 37) % 90));
    SamplingParams p;
    p.max_tokens = 8 + (i * 5) % 17;
    if (sampled) {
      p.temperature = 0.8f;
      p.top_k = 20;
      p.top_p = 0.95f;
      p.seed = 1000 + i;
    }
    w.params.push_back(p);
  }
  return w;
}

std::vector<std::vector<int32_t>> RunTogether(Engine& engine, const Workload& w) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) ids.push_back(engine.AddRequest(w.prompts[i], w.params[i]));
  auto results = engine.RunUntilDone();
  std::vector<std::vector<int32_t>> out;
  for (int64_t id : ids) {
    EXPECT_EQ(results.count(id), 1u);
    out.push_back(results[id].generated);
  }
  return out;
}

EngineConfig SmallConfig(uint64_t kv_bytes, int max_num_seqs, int budget) {
  EngineConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = budget;
  c.page_size = 16;
  c.kv_cache_bytes = kv_bytes;
  c.nan_fill_cache = true;  // unused slots hold NaN: a leak would poison the logits
  return c;
}

class EngineByDtype : public ::testing::TestWithParam<const char*> {};

// Each request's greedy tokens are the same alone as inside a busy mixed batch (chunked
// prefills beside decodes, different slots and pages).
TEST_P(EngineByDtype, BatchingInvariance) {
  auto model = MakeTinyDecoder();
  const KvCacheConfig kv = TinyKvConfig(GetParam());
  const Workload w = MixedWorkload(12, /*sampled=*/false);
  Engine busy(*model, kv, SmallConfig(8u << 20, 8, 48));
  const auto together = RunTogether(busy, w);
  EXPECT_GT(busy.stats().steps, 0);
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    Engine alone(*model, kv, SmallConfig(8u << 20, 1, 512));
    const int64_t id = alone.AddRequest(w.prompts[i], w.params[i]);
    auto r = alone.RunUntilDone();
    EXPECT_EQ(r[id].generated, together[i]) << "request " << i << " with " << GetParam();
    EXPECT_EQ(static_cast<int32_t>(together[i].size()), w.params[i].max_tokens);
  }
}

// A budget small enough to force repeated preemption: every request still finishes with
// the tokens it gets under an ample budget (greedy and seeded sampling), and every page
// comes back.
TEST_P(EngineByDtype, PreemptionKeepsOutputsAndLeaksNoPage) {
  auto model = MakeTinyDecoder();
  const KvCacheConfig kv = TinyKvConfig(GetParam());
  for (bool sampled : {false, true}) {
    const Workload w = MixedWorkload(10, sampled);
    Engine ample(*model, kv, SmallConfig(8u << 20, 10, 64));
    const auto expected = RunTogether(ample, w);
    EXPECT_EQ(ample.stats().preemptions, 0);

    // 8 pages of 16 tokens: two or three sequences at a time, the longest needing 8.
    const uint64_t bytes_per_page = kTinyBf16BytesPerToken / 2 * DTypeSize(kv.dtype()) * 16;
    Engine tight(*model, kv, SmallConfig(8 * bytes_per_page, 4, 64));
    ASSERT_EQ(tight.kv_plan().num_pages, 8);
    const auto got = RunTogether(tight, w);
    EXPECT_GT(tight.stats().preemptions, 3) << "the budget did not force preemption";
    for (size_t i = 0; i < w.prompts.size(); ++i) {
      EXPECT_EQ(got[i], expected[i]) << "request " << i << (sampled ? " sampled" : " greedy");
    }
    EXPECT_EQ(tight.page_pool().NumFreePages(), tight.page_pool().num_pages());
    EXPECT_EQ(tight.page_pool().NumActiveSeqs(), 0);
    EXPECT_EQ(tight.page_pool().InvariantViolation(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, EngineByDtype,
                         ::testing::Values("auto", "bfloat16", "fp8", "fp8_e5m2"),
                         [](const auto& info) { return std::string(info.param); });

// With one budget, fp8 holds 2x the tokens of bf16 and runs 2x the concurrent sequences of
// a fixed length without preempting, where bf16 has to preempt.
TEST(EngineCapacity, Fp8HoldsTwiceTheSequencesOfBf16) {
  auto model = MakeTinyDecoder();
  const int n = 8;          // requests of 48 prompt + 16 generated = 64 tokens = 4 pages
  const uint64_t budget = 16 * 16 * kTinyBf16BytesPerToken;  // 16 bf16 pages = 4 sequences
  Workload w;
  for (int i = 0; i < n; ++i) {
    w.prompts.push_back(TestPrompt(i, 48));
    SamplingParams p;
    p.max_tokens = 16;
    w.params.push_back(p);
  }
  Engine bf16(*model, TinyKvConfig("bfloat16"), SmallConfig(budget, n, 512));
  Engine fp8(*model, TinyKvConfig("fp8"), SmallConfig(budget, n, 512));
  EXPECT_EQ(fp8.kv_plan().num_tokens(), 2 * bf16.kv_plan().num_tokens());
  RunTogether(bf16, w);
  RunTogether(fp8, w);
  EXPECT_EQ(fp8.stats().preemptions, 0);
  EXPECT_EQ(fp8.stats().peak_running, n);
  EXPECT_GT(bf16.stats().preemptions, 0);
  // bf16 pages hold 4 whole sequences. Admission takes only a prompt's pages (3 here), so
  // a 5th can start before the decodes run out and preempt it, but never all 8.
  EXPECT_LT(bf16.stats().peak_running, n);
}

TEST(EngineRequests, BadRequestsAreRejectedAndOthersUnaffected) {
  auto model = MakeTinyDecoder();
  Engine engine(*model, TinyKvConfig("fp8"), SmallConfig(8u << 20, 4, 64));
  SamplingParams ok;
  ok.max_tokens = 6;
  const int64_t good = engine.AddRequest(TestPrompt(1, 10), ok);
  auto expect_error = [&](std::vector<int32_t> prompt, SamplingParams p, const char* needle) {
    try {
      engine.AddRequest(std::move(prompt), p);
      ADD_FAILURE() << "accepted a bad request (" << needle << ")";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({}, ok, "prompt is empty");
  expect_error({1, 2, 96}, ok, "prompt token 96 at index 2");
  SamplingParams long_gen = ok;
  long_gen.max_tokens = 500;
  expect_error(TestPrompt(0, 20), long_gen, "exceeds the model's context of 512");
  SamplingParams bad = ok;
  bad.top_p = 1.5f;
  expect_error(TestPrompt(0, 5), bad, "top_p=1.5");
  bad = ok;
  bad.temperature = -0.5f;
  expect_error(TestPrompt(0, 5), bad, "temperature=-0.5");

  auto results = engine.RunUntilDone();
  ASSERT_EQ(results.size(), 1u);
  Engine fresh(*model, TinyKvConfig("fp8"), SmallConfig(8u << 20, 4, 64));
  const int64_t id = fresh.AddRequest(TestPrompt(1, 10), ok);
  EXPECT_EQ(results[good].generated, fresh.RunUntilDone()[id].generated);
}

TEST(EngineRequests, RequestLargerThanTheCacheIsRejected) {
  auto model = MakeTinyDecoder();
  // 4 bf16 pages = 64 tokens.
  Engine engine(*model, TinyKvConfig("bfloat16"),
                SmallConfig(4 * 16 * kTinyBf16BytesPerToken, 2, 64));
  SamplingParams p;
  p.max_tokens = 10;
  EXPECT_THROW(engine.AddRequest(TestPrompt(0, 60), p), InvalidArgument);
  EXPECT_NO_THROW(engine.AddRequest(TestPrompt(0, 54), p));
}

TEST(EngineStreaming, CallbackSeesEveryTokenInOrderAndTheFinish) {
  auto model = MakeTinyDecoder();
  Engine engine(*model, TinyKvConfig("fp8"), SmallConfig(8u << 20, 4, 32));
  std::vector<TokenEvent> events;
  SamplingParams p;
  p.max_tokens = 7;
  const int64_t id = engine.AddRequest(TestPrompt(3, 40), p,
                                       [&](const TokenEvent& e) { events.push_back(e); });
  auto r = engine.RunUntilDone();
  ASSERT_EQ(events.size(), 7u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].request_id, id);
    EXPECT_EQ(events[i].index, static_cast<int32_t>(i));
    EXPECT_EQ(events[i].token, r[id].generated[i]);
    EXPECT_EQ(events[i].finish, i + 1 == events.size() ? FinishReason::kLength : FinishReason::kNone);
  }
}

TEST(EngineStreaming, StopTokenEndsTheRequest) {
  auto model = MakeTinyDecoder();
  Engine engine(*model, TinyKvConfig("bfloat16"), SmallConfig(8u << 20, 4, 32));
  SamplingParams p;
  p.max_tokens = 20;
  const int64_t id = engine.AddRequest(TestPrompt(5, 12), p);
  const std::vector<int32_t> free_run = engine.RunUntilDone()[id].generated;
  ASSERT_EQ(free_run.size(), 20u);
  p.stop_tokens = {free_run[4]};
  const int64_t id2 = engine.AddRequest(TestPrompt(5, 12), p);
  auto r = engine.RunUntilDone()[id2];
  EXPECT_EQ(r.finish, FinishReason::kStop);
  // It stops at the first occurrence of the stop token, which it emits.
  size_t first = 0;
  while (free_run[first] != free_run[4]) ++first;
  EXPECT_EQ(r.generated, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
}

// Submission from other threads while the engine steps.
TEST(EngineThreads, ConcurrentSubmissionLosesNothing) {
  auto model = MakeTinyDecoder();
  Engine engine(*model, TinyKvConfig("fp8"), SmallConfig(8u << 20, 8, 64));
  std::atomic<int> submitted{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        SamplingParams p;
        p.max_tokens = 3;
        engine.AddRequest(TestPrompt(t * 5 + i, 5 + i), p);
        ++submitted;
      }
    });
  }
  std::map<int64_t, RequestResult> all;
  while (submitted.load() < 15 || engine.HasWork()) {
    engine.Step();
    for (auto& [id, r] : engine.RunUntilDone()) all[id] = r;
  }
  for (auto& t : producers) t.join();
  for (auto& [id, r] : engine.RunUntilDone()) all[id] = r;
  EXPECT_EQ(all.size(), 15u);
  for (auto& [id, r] : all) EXPECT_EQ(r.generated.size(), 3u) << id;
}

// The production bug, reintroduced on purpose: a backend that hands the kernel bf16 K/V
// while the cache is fp8. Warmup must catch it at start-up with the kernel's message.
class Bf16KvBackend final : public AttentionBackend {
 public:
  void Run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cache,
           const AttentionMetadata& m, const AttentionOptions& o, const TensorView& out) override {
    k_.resize(k.numel());
    v_.resize(v.numel());
    Convert(k.dtype, k.data, DType::kBFloat16, k_.data(), k_.size());
    Convert(v.dtype, v.data, DType::kBFloat16, v_.data(), v_.size());
    TensorView kb = TensorView::Contiguous(k_.data(), DType::kBFloat16, {k.shape[0], k.shape[1], k.shape[2]});
    TensorView vb = TensorView::Contiguous(v_.data(), DType::kBFloat16, {v.shape[0], v.shape[1], v.shape[2]});
    RaggedPagedAttention(q, kb, vb, cache, m, o, out);
  }

 private:
  std::vector<uint16_t> k_, v_;
};

TEST(EngineWarmup, CatchesAMiswiredKvDtypeAtStartup) {
  Bf16KvBackend broken;
  auto model = MakeTinyDecoder(1, &broken);
  try {
    Engine engine(*model, TinyKvConfig("fp8"), SmallConfig(8u << 20, 4, 64));
    FAIL() << "warmup accepted bf16 K/V over an fp8 cache";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("engine warmup failed on the decode batch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Expected kv_cache.dtype=float8_e4m3fn to be equal to k.dtype=bfloat16 "
                       "and v.dtype=bfloat16."),
              std::string::npos)
        << msg;
  }
  // The same broken path over a bf16 cache is not a mismatch: warmup passes.
  EXPECT_NO_THROW(Engine(*model, TinyKvConfig("bfloat16"), SmallConfig(8u << 20, 4, 64)));
}

TEST(EngineConfigTest, BudgetBelowOnePagePerSequenceIsAClearError) {
  auto model = MakeTinyDecoder();
  EXPECT_THROW(Engine(*model, TinyKvConfig("bfloat16"), SmallConfig(1000, 4, 64)), InvalidArgument);
}

}  // namespace
}  // namespace rpa
