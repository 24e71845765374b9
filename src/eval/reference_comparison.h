// Comparison of an evaluation run with a reference run's logits file over the same tokens
// (llama.cpp's --kl-divergence statistics): per scored token the KL divergence
// KL(reference || current) of the next-token distributions and whether both put the same
// token first, and per run the ΔPPL from the paired per-token NLLs.
#pragma once

#include <cstdint>
#include <vector>

#include "eval/distribution_stats.h"
#include "eval/logits_file.h"
#include "eval/perplexity.h"

namespace rpa::eval {

struct ComparisonResult {
  int64_t rows = 0;
  double kld_mean = 0, kld_stderr = 0;
  double kld_p99 = 0, kld_median = 0, kld_max = 0;
  double top1 = 0, top1_stderr = 0;  // fraction of rows whose argmax agree
  double ref_ppl = 0;
  // 100 (PPL / PPL_ref - 1) = 100 (exp(mean(nll - nll_ref)) - 1), its standard error from
  // the paired differences (far smaller than either PPL's own error: the noise of the text
  // is common to both runs).
  double dppl_percent = 0, dppl_percent_stderr = 0;
};

class ReferenceComparison {
 public:
  // `reference` must outlive this object. Throws InvalidArgument unless the file scored
  // exactly `plan`'s tokens with a vocabulary of `vocab`.
  ReferenceComparison(LogitsFileReader& reference, const ChunkPlan& plan, int32_t vocab);

  // Compares one chunk of the current run with the reference's same chunk.
  void AddChunk(const ScoredChunk& chunk);
  // Statistics over the chunks added so far.
  ComparisonResult Result() const;

 private:
  LogitsFileReader& reference_;
  int32_t vocab_, rows_;
  std::vector<float> ref_log_probs_, ref_nll_;
  std::vector<int32_t> ref_top1_;
  std::vector<double> row_kld_;  // one per compared row (for percentiles)
  MeanStats kld_, top1_, nll_diff_, ref_nll_stats_;
};

}  // namespace rpa::eval
