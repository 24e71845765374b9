#include "engine/batch_builder.h"

#include <algorithm>

#include "util/error.h"

namespace rpa {
namespace {

// 0 decode, 1 prefill (no cached context), 2 mixed (chunk over cached context).
int Bucket(const ScheduledChunk& c) {
  if (c.q_len == 1) return 0;
  return c.seq->num_computed == 0 ? 1 : 2;
}

}  // namespace

BatchBuilder::BatchBuilder(int32_t max_num_seqs, int32_t max_num_tokens, int32_t pages_per_seq)
    : max_num_seqs_(max_num_seqs),
      max_num_tokens_(max_num_tokens),
      pages_per_seq_(pages_per_seq),
      tokens_(max_num_tokens),
      positions_(max_num_tokens),
      kv_lens_(max_num_seqs),
      cu_q_lens_(max_num_seqs + 1),
      page_indices_(static_cast<size_t>(max_num_seqs) * pages_per_seq, PagePool::kNoPage),
      distribution_(3) {
  slots_.reserve(max_num_seqs);
  logit_rows_.reserve(max_num_seqs);
  ordered_.reserve(max_num_seqs);
  sampled_.reserve(max_num_seqs);
}

StepInput BatchBuilder::Build(std::vector<ScheduledChunk>& chunks, const PagePool& pool) {
  RPA_CHECK(static_cast<int32_t>(chunks.size()) <= max_num_seqs_);
  std::stable_sort(chunks.begin(), chunks.end(), [](const ScheduledChunk& a,
                                                    const ScheduledChunk& b) {
    return Bucket(a) < Bucket(b);
  });
  slots_.clear();
  logit_rows_.clear();
  sampled_.clear();
  int32_t row = 0;
  int32_t counts[3] = {0, 0, 0};
  cu_q_lens_[0] = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    ScheduledChunk& c = chunks[i];
    const Sequence& s = *c.seq;
    RPA_CHECK(row + c.q_len <= max_num_tokens_);
    for (int32_t j = 0; j < c.q_len; ++j) {
      tokens_[row + j] = s.tokens[s.num_computed + j];
      positions_[row + j] = s.num_computed + j;
    }
    row += c.q_len;
    cu_q_lens_[i + 1] = row;
    kv_lens_[i] = s.num_computed + c.q_len;
    slots_.push_back(s.slot);
    ++counts[Bucket(c)];
    if (c.sample) {
      logit_rows_.push_back(row - 1);
      sampled_.push_back(&c);
    }
  }
  // Unused rows: zero-length sequences past d2 (never read by the kernel).
  for (size_t i = chunks.size(); i < static_cast<size_t>(max_num_seqs_); ++i) {
    kv_lens_[i] = 0;
    cu_q_lens_[i + 1] = row;
  }
  pool.GatherBlockTables(slots_, page_indices_);
  distribution_[0] = counts[0];
  distribution_[1] = counts[0] + counts[1];
  distribution_[2] = counts[0] + counts[1] + counts[2];

  StepInput in;
  in.tokens = std::span<const int32_t>(tokens_.data(), row);
  in.positions = std::span<const int32_t>(positions_.data(), row);
  in.batch.metadata.kv_lens = kv_lens_;
  in.batch.metadata.page_indices = page_indices_;
  in.batch.metadata.cu_q_lens = cu_q_lens_;
  in.batch.metadata.distribution = distribution_;
  in.logit_rows = logit_rows_;
  plans_.Reset();
  in.batch.plans = &plans_;
  return in;
}

}  // namespace rpa
