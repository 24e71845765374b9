// The perplexity protocol on a tiny random-weight model: chunking, BOS replacement and the
// scored positions, checked against NLLs computed here from the full logits of an
// independent single-sequence forward pass; batching invariance; the reference comparison
// against a long-double KL computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

#include "eval/logits_file.h"
#include "eval/perplexity.h"
#include "eval/reference_comparison.h"
#include "kv/kv_cache_storage.h"
#include "tests/engine/tiny_model.h"
#include "util/error.h"

namespace rpa::eval {
namespace {

using testing::MakeTinyDecoder;
using testing::TinyKvConfig;

std::vector<int32_t> TextTokens(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + (i * i) % 11) % 96;
  return t;
}

// Every row's logits for one sequence of `tokens`, built here by hand: one prefill, pages
// 0..P-1 of a cache sized for it.
std::vector<float> FullLogits(CausalLm& model, const KvCacheConfig& kv,
                              const std::vector<int32_t>& tokens) {
  const ModelInfo& info = model.info();
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t page_size = 8, pages = (n + page_size - 1) / page_size;
  KvCacheSpec spec;
  spec.num_layers = info.num_layers;
  spec.num_kv_heads = info.num_kv_heads;
  spec.head_dim = info.head_dim;
  spec.page_size = page_size;
  spec.dtype = kv.dtype();
  KvCacheStorage storage(spec, pages);
  std::vector<int32_t> positions(n), rows(n), page_indices(pages);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::iota(page_indices.begin(), page_indices.end(), 0);
  const std::vector<int32_t> kv_lens = {n}, cu_q_lens = {0, n}, distribution = {0, 1, 1};
  StepInput in;
  in.tokens = tokens;
  in.positions = positions;
  in.batch.metadata.kv_lens = kv_lens;
  in.batch.metadata.page_indices = page_indices;
  in.batch.metadata.cu_q_lens = cu_q_lens;
  in.batch.metadata.distribution = distribution;
  in.logit_rows = rows;
  std::vector<float> logits(static_cast<size_t>(n) * info.vocab_size);
  model.Forward(in, storage, kv, logits);
  return logits;
}

long double RowLogProb(const float* logits, int vocab, int token) {
  long double max = logits[0];
  for (int v = 1; v < vocab; ++v) max = std::max<long double>(max, logits[v]);
  long double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(logits[v] - max);
  return logits[token] - max - std::log(sum);
}

TEST(PlanChunks, CutsWholeChunksAndPlacesBos) {
  const std::vector<int32_t> text = TextTokens(100);
  PerplexityOptions o;
  o.n_ctx = 32;
  ChunkPlan p = PlanChunks(text, o, 96);
  EXPECT_EQ(p.num_chunks, 3);  // 100 / 32, the partial chunk dropped
  EXPECT_EQ(p.first_scored, 16);
  EXPECT_EQ(p.rows_per_chunk, 15);  // positions 16..30 predict tokens 17..31
  EXPECT_EQ(p.num_rows(), 45);
  EXPECT_EQ(std::vector<int32_t>(p.tokens.begin(), p.tokens.end()),
            std::vector<int32_t>(text.begin(), text.begin() + 96));
  o.bos_token = 5;
  o.max_chunks = 2;
  p = PlanChunks(text, o, 96);
  ASSERT_EQ(p.num_chunks, 2);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(p.chunk(c)[0], 5);
    for (int i = 1; i < 32; ++i) EXPECT_EQ(p.chunk(c)[i], text[c * 32 + i]);
  }
  o.max_chunks = 50;  // more than the text holds: all of them
  EXPECT_EQ(PlanChunks(text, o, 96).num_chunks, 3);
  o.n_ctx = 101;
  EXPECT_THROW(PlanChunks(text, o, 96), InvalidArgument);
  o.n_ctx = 3;
  EXPECT_THROW(PlanChunks(text, o, 96), InvalidArgument);
  o.n_ctx = 32;
  o.bos_token = 96;
  EXPECT_THROW(PlanChunks(text, o, 96), InvalidArgument);
}

// The library's per-chunk NLLs equal those computed from an independent full forward of
// each chunk (BOS in place), over exactly positions [n_ctx/2, n_ctx - 1).
TEST(EvaluatePerplexity, ScoresTheSecondHalfOfEachChunk) {
  auto model = MakeTinyDecoder(11);
  const KvCacheConfig kv = TinyKvConfig("bfloat16");
  const std::vector<int32_t> text = TextTokens(3 * 40 + 7);
  PerplexityOptions o;
  o.n_ctx = 40;
  o.bos_token = 1;
  const ChunkPlan plan = PlanChunks(text, o, 96);
  std::vector<std::vector<float>> nll_by_chunk;
  const PerplexityResult r = EvaluatePerplexity(*model, kv, plan, o, [&](const ScoredChunk& c) {
    EXPECT_EQ(c.index, static_cast<int32_t>(nll_by_chunk.size()));
    EXPECT_EQ(c.log_probs.size(), 19u * 96);
    nll_by_chunk.emplace_back(c.nll.begin(), c.nll.end());
  });
  ASSERT_EQ(nll_by_chunk.size(), 3u);
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.tokens_scored, 3 * 19);
  EXPECT_EQ(r.tokens_evaluated, 120);

  long double total = 0;
  for (int c = 0; c < 3; ++c) {
    std::vector<int32_t> chunk(text.begin() + c * 40, text.begin() + (c + 1) * 40);
    chunk[0] = 1;  // BOS replaces the first token
    const std::vector<float> logits = FullLogits(*model, kv, chunk);
    for (int i = 20; i < 39; ++i) {
      const long double nll = -RowLogProb(logits.data() + i * 96, 96, chunk[i + 1]);
      total += nll;
      // Same model rows (the matmul is row-invariant), log-softmax in double then f32.
      EXPECT_NEAR(nll_by_chunk[c][i - 20], static_cast<double>(nll), 1e-5 * (1 + nll))
          << "chunk " << c << " position " << i;
    }
  }
  EXPECT_NEAR(r.nll.sum(), static_cast<double>(total), 1e-5 * static_cast<double>(total));
  EXPECT_NEAR(r.ppl, std::exp(static_cast<double>(total) / 57), 1e-5 * r.ppl);
  EXPECT_GT(r.ppl_stderr, 0);
}

// Several chunks per Forward (a ragged batch of prefills) give bit-identical results.
TEST(EvaluatePerplexity, BatchingChunksChangesNothing) {
  auto model = MakeTinyDecoder(12);
  const KvCacheConfig kv = TinyKvConfig("fp8");
  const std::vector<int32_t> text = TextTokens(5 * 48);
  PerplexityOptions o;
  o.n_ctx = 48;
  const ChunkPlan plan = PlanChunks(text, o, 96);
  std::vector<float> first;
  for (int group : {1, 2, 3, 5}) {
    o.chunks_per_forward = group;
    std::vector<float> log_probs;
    EvaluatePerplexity(*model, kv, plan, o, [&](const ScoredChunk& c) {
      log_probs.insert(log_probs.end(), c.log_probs.begin(), c.log_probs.end());
    });
    if (first.empty()) {
      first = log_probs;
    } else {
      EXPECT_EQ(log_probs, first) << group << " chunks per forward";
    }
  }
}

TEST(EvaluatePerplexity, RejectsOptionsTheModelCannotRun) {
  auto model = MakeTinyDecoder(13);
  const std::vector<int32_t> text = TextTokens(2000);
  PerplexityOptions o;
  o.n_ctx = 1024;  // the tiny model's context is 512
  const ChunkPlan plan = PlanChunks(text, o, 96);
  EXPECT_THROW(EvaluatePerplexity(*model, TinyKvConfig("fp8"), plan, o), InvalidArgument);
  o.n_ctx = 64;
  const ChunkPlan small = PlanChunks(text, o, 96);
  o.chunks_per_forward = 0;
  EXPECT_THROW(EvaluatePerplexity(*model, TinyKvConfig("fp8"), small, o), InvalidArgument);
  o.chunks_per_forward = 1;
  EXPECT_THROW(
      EvaluatePerplexity(*model, KvCacheConfig::Parse("fp8", DType::kFloat32, 3), small, o),
      InvalidArgument);
}

// A bf16 run written to a file, then an fp8 run compared with it: KL, top-1 and ΔPPL equal
// what is computed here from the two runs' log-probabilities directly; a run compared with
// its own (f32) file shows no divergence at all.
TEST(ReferenceComparison, MatchesDirectComputation) {
  auto model = MakeTinyDecoder(14);
  const std::vector<int32_t> text = TextTokens(4 * 64);
  PerplexityOptions o;
  o.n_ctx = 64;
  o.chunks_per_forward = 2;
  const ChunkPlan plan = PlanChunks(text, o, 96);
  const LogitsFileLayout layout{96, plan.n_ctx, plan.first_scored, plan.rows_per_chunk,
                                plan.num_chunks};
  const std::string path =
      (std::filesystem::temp_directory_path() / "rpa_eval_reference_test.bin").string();
  std::vector<float> ref_lp, ref_nll;
  PerplexityResult ref;
  {
    LogitsFileWriter w(path, layout, plan.tokens, DType::kFloat32, "bfloat16");
    ref = EvaluatePerplexity(*model, TinyKvConfig("bfloat16"), plan, o, [&](const ScoredChunk& c) {
      w.WriteChunk(c.log_probs, c.nll);
      ref_lp.insert(ref_lp.end(), c.log_probs.begin(), c.log_probs.end());
      ref_nll.insert(ref_nll.end(), c.nll.begin(), c.nll.end());
    });
    w.Finish(ref.ppl, ref.ppl_stderr);
  }
  LogitsFileReader reader(path);
  EXPECT_NEAR(reader.header().ppl, ref.ppl, 0);

  ReferenceComparison same(reader, plan, 96);
  EvaluatePerplexity(*model, TinyKvConfig("bfloat16"), plan, o,
                     [&](const ScoredChunk& c) { same.AddChunk(c); });
  const ComparisonResult s = same.Result();
  EXPECT_EQ(s.rows, plan.num_rows());
  EXPECT_EQ(s.kld_mean, 0.0);  // f32 rows are stored and compared exactly
  EXPECT_EQ(s.top1, 1.0);
  EXPECT_EQ(s.dppl_percent, 0.0);

  ReferenceComparison cmp(reader, plan, 96);
  long double kl_sum = 0, dnll = 0;
  int agree = 0;
  size_t row = 0;
  const PerplexityResult cur =
      EvaluatePerplexity(*model, TinyKvConfig("fp8_e5m2"), plan, o, [&](const ScoredChunk& c) {
        cmp.AddChunk(c);
        for (int r = 0; r < plan.rows_per_chunk; ++r, ++row) {
          const float* p = ref_lp.data() + row * 96;
          const float* q = c.log_probs.data() + r * 96;
          for (int v = 0; v < 96; ++v)
            kl_sum += std::exp(static_cast<long double>(p[v])) * (p[v] - q[v]);
          int ap = 0, aq = 0;
          for (int v = 1; v < 96; ++v) {
            if (p[v] > p[ap]) ap = v;
            if (q[v] > q[aq]) aq = v;
          }
          agree += ap == aq;
          dnll += static_cast<long double>(c.nll[r]) - ref_nll[row];
        }
      });
  const ComparisonResult c = cmp.Result();
  const double n = static_cast<double>(plan.num_rows());
  EXPECT_GT(c.kld_mean, 0);
  EXPECT_NEAR(c.kld_mean, static_cast<double>(kl_sum) / n, 1e-6 * c.kld_mean + 1e-9);
  EXPECT_DOUBLE_EQ(c.top1, agree / n);
  EXPECT_NEAR(c.ref_ppl, ref.ppl, 1e-9 * ref.ppl);
  EXPECT_NEAR(c.dppl_percent, 100 * (cur.ppl / ref.ppl - 1), 1e-6);
  EXPECT_NEAR(c.dppl_percent, 100 * std::expm1(static_cast<double>(dnll) / n), 1e-9);
  EXPECT_GE(c.kld_p99, c.kld_median);
  EXPECT_GE(c.kld_max, c.kld_p99);

  // Another n_ctx cannot be compared with this file.
  PerplexityOptions o2 = o;
  o2.n_ctx = 32;
  EXPECT_THROW(ReferenceComparison(reader, PlanChunks(text, o2, 96), 96), InvalidArgument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rpa::eval
