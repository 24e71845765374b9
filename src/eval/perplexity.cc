#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>

#include "engine/batch_builder.h"
#include "engine/sequence.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_cache_storage.h"
#include "kv/page_pool.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rpa::eval {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int32_t CeilDiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

}  // namespace

ChunkPlan PlanChunks(std::span<const int32_t> text_tokens, const PerplexityOptions& options,
                     int32_t vocab_size) {
  const int32_t n_ctx = options.n_ctx;
  if (n_ctx < 4) throw InvalidArgument(Concat("n_ctx=", n_ctx, " must be >= 4"));
  if (options.max_chunks < 0) {
    throw InvalidArgument(Concat("max_chunks=", options.max_chunks, " must be >= 0"));
  }
  if (options.bos_token >= vocab_size) {
    throw InvalidArgument(
        Concat("bos_token=", options.bos_token, " is outside the vocabulary of ", vocab_size));
  }
  const int64_t available = static_cast<int64_t>(text_tokens.size()) / n_ctx;
  if (available < 1) {
    throw InvalidArgument(Concat("the text has ", text_tokens.size(),
                                 " tokens, fewer than one chunk of n_ctx=", n_ctx));
  }
  ChunkPlan plan;
  plan.n_ctx = n_ctx;
  plan.num_chunks = static_cast<int32_t>(
      options.max_chunks > 0 ? std::min<int64_t>(options.max_chunks, available) : available);
  plan.first_scored = n_ctx / 2;
  plan.rows_per_chunk = n_ctx - 1 - plan.first_scored;
  plan.tokens.assign(text_tokens.begin(),
                     text_tokens.begin() + static_cast<size_t>(plan.num_chunks) * n_ctx);
  if (options.bos_token >= 0) {
    for (int32_t c = 0; c < plan.num_chunks; ++c) {
      plan.tokens[static_cast<size_t>(c) * n_ctx] = options.bos_token;
    }
  }
  return plan;
}

PerplexityResult EvaluatePerplexity(CausalLm& model, const KvCacheConfig& kv_config,
                                    const ChunkPlan& plan, const PerplexityOptions& options,
                                    const ChunkCallback& on_chunk,
                                    const ProgressCallback& on_progress) {
  const ModelInfo& info = model.info();
  const int32_t n_ctx = plan.n_ctx;
  if (n_ctx != options.n_ctx || n_ctx > info.max_context) {
    throw InvalidArgument(Concat("n_ctx=", n_ctx, " (options: ", options.n_ctx,
                                 ") must match the plan and be <= the model's context of ",
                                 info.max_context));
  }
  if (options.chunks_per_forward < 1 || options.page_size < 1) {
    throw InvalidArgument(Concat("chunks_per_forward=", options.chunks_per_forward,
                                 " and page_size=", options.page_size, " must be >= 1"));
  }
  if (plan.tokens.size() != static_cast<size_t>(plan.num_chunks) * n_ctx ||
      plan.first_scored != n_ctx / 2 || plan.rows_per_chunk != n_ctx - 1 - plan.first_scored) {
    throw InvalidArgument(Concat("inconsistent chunk plan: ", plan.tokens.size(), " tokens for ",
                                 plan.num_chunks, " chunks of ", n_ctx, ", first_scored ",
                                 plan.first_scored, ", rows_per_chunk ", plan.rows_per_chunk));
  }
  if (kv_config.num_layers() != info.num_layers) {
    throw InvalidArgument(Concat("KV cache config has ", kv_config.num_layers(),
                                 " layers; the model has ", info.num_layers));
  }
  const int32_t group = std::min(options.chunks_per_forward, std::max(plan.num_chunks, 1));
  const size_t vocab = static_cast<size_t>(info.vocab_size);
  const int32_t rows = plan.rows_per_chunk;

  // A cache for exactly one group of chunks: every chunk is a fresh sequence whose prefill
  // writes all of its K/V before reading them, so nothing of the previous group is seen.
  KvCacheSpec spec;
  spec.num_layers = info.num_layers;
  spec.num_kv_heads = info.num_kv_heads;
  spec.head_dim = info.head_dim;
  spec.page_size = options.page_size;
  spec.dtype = kv_config.dtype();
  spec.kv_donor = info.kv_donor;
  const int32_t pages_per_seq = CeilDiv(n_ctx, options.page_size);
  KvCacheStorage storage(spec, group * pages_per_seq);
  PagePool pool(PagePoolOptions{group * pages_per_seq, options.page_size, group, pages_per_seq});
  BatchBuilder builder(group, group * n_ctx, pages_per_seq);

  std::vector<Sequence> seqs(group);
  std::vector<ScheduledChunk> scheduled;
  std::vector<int32_t> logit_rows;
  std::vector<float> log_probs(static_cast<size_t>(group) * rows * vocab);
  std::vector<float> nll(static_cast<size_t>(group) * rows);

  PerplexityResult result;
  result.n_ctx = n_ctx;
  const Clock::time_point start = Clock::now();
  for (int32_t c0 = 0; c0 < plan.num_chunks; c0 += group) {
    const int32_t g = std::min(group, plan.num_chunks - c0);
    scheduled.clear();
    logit_rows.clear();
    for (int32_t s = 0; s < g; ++s) {
      const std::span<const int32_t> chunk = plan.chunk(c0 + s);
      seqs[s].tokens.assign(chunk.begin(), chunk.end());
      seqs[s].num_computed = 0;
      seqs[s].slot = s;
      RPA_CHECK(pool.Allocate(s, n_ctx));
      scheduled.push_back(ScheduledChunk{&seqs[s], n_ctx, /*sample=*/false});
      // Builder rows: sequence s occupies [s * n_ctx, (s + 1) * n_ctx) (all are prefills of
      // one bucket, so its stable ordering keeps them in order).
      for (int32_t r = 0; r < rows; ++r) logit_rows.push_back(s * n_ctx + plan.first_scored + r);
    }
    StepInput input = builder.Build(scheduled, pool);
    input.logit_rows = logit_rows;
    const std::span<float> out(log_probs.data(), static_cast<size_t>(g) * rows * vocab);
    const Clock::time_point t0 = Clock::now();
    model.Forward(input, storage, kv_config, out);
    result.forward_seconds += Seconds(t0, Clock::now());
    for (int32_t s = 0; s < g; ++s) pool.Free(s);

    // Log-softmax in place, rows split over the kernel pool (idle between forwards).
    const int total_rows = g * rows;
    ThreadPool& threads = ThreadPool::Global();
    const int workers = std::min(threads.num_threads(), total_rows);
    threads.Run(workers, [&](int w) {
      for (int r = w; r < total_rows; r += workers) {
        const std::span<float> row = out.subspan(static_cast<size_t>(r) * vocab, vocab);
        LogSoftmax(row, row);
        const int32_t s = r / rows;
        const int32_t target = plan.chunk(c0 + s)[plan.first_scored + r % rows + 1];
        nll[r] = -row[target];
      }
    });
    for (int32_t s = 0; s < g; ++s) {
      for (int32_t r = 0; r < rows; ++r) result.nll.Add(nll[static_cast<size_t>(s) * rows + r]);
      if (on_chunk) {
        ScoredChunk sc;
        sc.index = c0 + s;
        sc.tokens = plan.chunk(c0 + s);
        sc.log_probs =
            out.subspan(static_cast<size_t>(s) * rows * vocab, static_cast<size_t>(rows) * vocab);
        sc.nll = std::span<const float>(nll).subspan(static_cast<size_t>(s) * rows, rows);
        on_chunk(sc);
      }
    }
    if (on_progress) {
      on_progress(PerplexityProgress{c0 + g, plan.num_chunks, Perplexity(result.nll),
                                     Seconds(start, Clock::now())});
    }
  }
  result.seconds = Seconds(start, Clock::now());
  result.chunks = plan.num_chunks;
  result.tokens_scored = result.nll.count();
  result.tokens_evaluated = static_cast<int64_t>(plan.num_chunks) * n_ctx;
  result.ppl = Perplexity(result.nll);
  result.ppl_stderr = PerplexityStandardError(result.nll);
  return result;
}

}  // namespace rpa::eval
