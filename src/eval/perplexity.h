// Perplexity of a CausalLm over a token stream, as llama.cpp's `llama-perplexity` computes
// it (../shared/docs/MODELS.md §5):
//
//   - the text is tokenized once (no BOS) and cut into non-overlapping chunks of n_ctx
//     tokens; a trailing partial chunk is dropped;
//   - each chunk is a fresh sequence (empty KV cache), whose first token is replaced by BOS
//     iff the model wants one (`bos_token` >= 0);
//   - only the second half is scored: with first = n_ctx / 2, the logits at positions
//     i in [first, n_ctx - 1) predict token i + 1, so a chunk scores n_ctx - 1 - first
//     tokens (255 for n_ctx = 512). This is llama.cpp's `first = n_ctx/2` and
//     `process_logits(..., n_ctx - 1 - first, ...)`: position n_ctx - 1 has no next token
//     in the chunk, and the first half only gives the scored tokens context;
//   - PPL = exp(mean NLL) over all scored tokens, +- ppl * sqrt(var(NLL) / (n - 1)).
//
// Chunks run through CausalLm::Forward directly (no engine): several chunks per call as
// separate prefill sequences of one ragged batch, laid out by the engine's BatchBuilder.
// The model is batch-invariant (each row's matmuls and each sequence's attention do not
// depend on the other rows), so results do not depend on chunks_per_forward.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "eval/distribution_stats.h"
#include "layers/kv_cache_config.h"
#include "model/causal_lm.h"

namespace rpa::eval {

struct PerplexityOptions {
  int32_t n_ctx = 512;
  int32_t max_chunks = 0;          // 0: every whole chunk of the text
  int32_t bos_token = -1;          // >= 0: replaces the first token of every chunk
  int32_t chunks_per_forward = 1;  // chunks batched into one Forward call
  int32_t page_size = 16;          // KV cache page size, tokens
};

// The chunks that will be evaluated, fixed before any forward pass (the reference logits
// file records them so that two runs can be checked to score the same tokens).
struct ChunkPlan {
  int32_t n_ctx = 0;
  int32_t num_chunks = 0;
  int32_t first_scored = 0;     // n_ctx / 2
  int32_t rows_per_chunk = 0;   // n_ctx - 1 - first_scored
  std::vector<int32_t> tokens;  // [num_chunks * n_ctx] as fed to the model (BOS in place)

  int64_t num_rows() const { return static_cast<int64_t>(num_chunks) * rows_per_chunk; }
  std::span<const int32_t> chunk(int32_t c) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(c) * n_ctx, n_ctx);
  }
};

// Cuts `text_tokens` into chunks. Throws InvalidArgument when n_ctx < 4 (nothing to score),
// the text holds less than one chunk, bos_token is outside the vocabulary, or max_chunks < 0.
// Asking for more chunks than the text holds gives them all (as llama.cpp does).
ChunkPlan PlanChunks(std::span<const int32_t> text_tokens, const PerplexityOptions& options,
                     int32_t vocab_size);

// One evaluated chunk, handed to the caller before the next chunk runs; spans are valid
// during the callback only.
struct ScoredChunk {
  int32_t index = 0;
  std::span<const int32_t> tokens;  // [n_ctx] as fed
  // [rows_per_chunk, vocab] log-softmax of the logits at positions first_scored + r
  std::span<const float> log_probs;
  std::span<const float> nll;  // [rows_per_chunk] -log p(tokens[first_scored + r + 1])
};

struct PerplexityProgress {
  int32_t chunks_done = 0;
  int32_t num_chunks = 0;
  double ppl = 0;      // over the chunks done so far
  double seconds = 0;  // since the first chunk started
};

struct PerplexityResult {
  int32_t chunks = 0;
  int32_t n_ctx = 0;
  int64_t tokens_scored = 0;
  int64_t tokens_evaluated = 0;  // chunks * n_ctx: what the model ran over
  MeanStats nll;
  double ppl = 0;
  double ppl_stderr = 0;
  double seconds = 0;          // the whole loop, callbacks included
  double forward_seconds = 0;  // inside CausalLm::Forward
  double tokens_per_second() const { return seconds > 0 ? tokens_evaluated / seconds : 0; }
};

using ChunkCallback = std::function<void(const ScoredChunk&)>;
using ProgressCallback = std::function<void(const PerplexityProgress&)>;

// Runs every chunk of `plan` through `model` with a KV cache of `kv_config`'s dtype and
// scales. Throws InvalidArgument for options that disagree with the plan or the model
// (n_ctx beyond the model's context, chunks_per_forward < 1, a KV config for another
// layer count) and propagates the model's errors.
PerplexityResult EvaluatePerplexity(CausalLm& model, const KvCacheConfig& kv_config,
                                    const ChunkPlan& plan, const PerplexityOptions& options,
                                    const ChunkCallback& on_chunk = nullptr,
                                    const ProgressCallback& on_progress = nullptr);

}  // namespace rpa::eval
