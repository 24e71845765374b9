#include "eval/reference_comparison.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/thread_pool.h"

namespace rpa::eval {

ReferenceComparison::ReferenceComparison(LogitsFileReader& reference, const ChunkPlan& plan,
                                         int32_t vocab)
    : reference_(reference), vocab_(vocab), rows_(plan.rows_per_chunk) {
  reference.CheckSameRun(
      LogitsFileLayout{vocab, plan.n_ctx, plan.first_scored, plan.rows_per_chunk, plan.num_chunks},
      plan.tokens);
  ref_log_probs_.resize(static_cast<size_t>(rows_) * vocab);
  ref_nll_.resize(rows_);
  ref_top1_.resize(rows_);
}

void ReferenceComparison::AddChunk(const ScoredChunk& chunk) {
  const size_t vocab = static_cast<size_t>(vocab_);
  if (chunk.log_probs.size() != static_cast<size_t>(rows_) * vocab ||
      chunk.nll.size() != static_cast<size_t>(rows_)) {
    throw InvalidArgument(Concat("chunk ", chunk.index, " has ", chunk.nll.size(),
                                 " rows; the reference has ", rows_));
  }
  reference_.ReadChunk(chunk.index, ref_log_probs_, ref_top1_, ref_nll_);
  std::vector<double> kld(rows_);
  // f16 rows are renormalized: that cancels the first-order effect of their rounding (see
  // logits_file.h). f32 rows are the writer's log-softmax exactly; renormalizing them would
  // only add a rounding.
  const bool renormalize = reference_.value_type() != DType::kFloat32;
  ThreadPool& threads = ThreadPool::Global();
  const int workers = std::min(threads.num_threads(), rows_);
  threads.Run(workers, [&](int w) {
    for (int32_t r = w; r < rows_; r += workers) {
      const std::span<const float> ref(ref_log_probs_.data() + r * vocab, vocab);
      const std::span<const float> cur = chunk.log_probs.subspan(r * vocab, vocab);
      kld[r] = renormalize ? KlDivergenceUnnormalized(ref, cur) : KlDivergence(ref, cur);
    }
  });
  for (int32_t r = 0; r < rows_; ++r) {
    kld_.Add(kld[r]);
    row_kld_.push_back(kld[r]);
    const int32_t top1 = ArgMax(chunk.log_probs.subspan(r * vocab, vocab));
    top1_.Add(top1 == ref_top1_[r] ? 1.0 : 0.0);
    nll_diff_.Add(static_cast<double>(chunk.nll[r]) - ref_nll_[r]);
    ref_nll_stats_.Add(ref_nll_[r]);
  }
}

ComparisonResult ReferenceComparison::Result() const {
  ComparisonResult c;
  c.rows = kld_.count();
  if (c.rows == 0) return c;
  c.kld_mean = kld_.Mean();
  c.kld_stderr = kld_.StandardError();
  c.kld_p99 = Percentile(row_kld_, 0.99);
  c.kld_median = Percentile(row_kld_, 0.5);
  c.kld_max = *std::max_element(row_kld_.begin(), row_kld_.end());
  c.top1 = top1_.Mean();
  c.top1_stderr = top1_.StandardError();
  c.ref_ppl = Perplexity(ref_nll_stats_);
  // d(100 (exp(m) - 1)) = 100 exp(m) dm.
  const double m = nll_diff_.Mean();
  c.dppl_percent = 100.0 * std::expm1(m);
  c.dppl_percent_stderr = 100.0 * std::exp(m) * nll_diff_.StandardError();
  return c;
}

}  // namespace rpa::eval
