// BatchBuilder: turns a step's schedule into the model's input — token ids, positions and
// the ragged kernel metadata (cu_q_lens, kv_lens, page_indices, distribution) — in buffers
// sized once at construction, so a step allocates nothing.
//
// Sequences are laid out bucket by bucket, as the kernel's `distribution` says:
//   [0, d0)   decode:  q_len == 1
//   [d0, d1)  prefill: q_len == kv_len (a prompt's first chunk, no cached context)
//   [d1, d2)  mixed:   a later prefill chunk over cached context
//
// Thread safety: one owner.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "kv/page_pool.h"
#include "model/causal_lm.h"

namespace rpa {

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t q_len = 0;     // tokens fed this step: tokens[num_computed, num_computed + q_len)
  bool sample = false;   // the chunk reaches the end of the sequence: sample its next token
};

class BatchBuilder {
 public:
  BatchBuilder(int32_t max_num_seqs, int32_t max_num_tokens, int32_t pages_per_seq);

  // Lays out `chunks` (any order; reordered into buckets in place) and returns the step
  // input, whose spans point into this builder. `pool` gives each sequence's block table.
  // REQUIRES: chunks.size() <= max_num_seqs, total q_len <= max_num_tokens, each sequence
  // holds pages for num_computed + q_len tokens.
  StepInput Build(std::vector<ScheduledChunk>& chunks, const PagePool& pool);

  // After Build: the chunks that sample, in the order of the logits rows.
  std::span<ScheduledChunk* const> sampled() const { return sampled_; }

 private:
  int32_t max_num_seqs_, max_num_tokens_, pages_per_seq_;
  std::vector<int32_t> tokens_, positions_;                   // [max_num_tokens]
  std::vector<int32_t> kv_lens_;                              // [S]
  std::vector<int32_t> cu_q_lens_;                            // [S + 1]
  std::vector<int32_t> page_indices_;                         // [S * PPS]
  std::vector<int32_t> distribution_;                         // [3]
  std::vector<int32_t> slots_, logit_rows_;                   // [S]
  std::vector<ScheduledChunk> ordered_;                       // [S]
  std::vector<ScheduledChunk*> sampled_;                      // [S]
  AttentionPlanCache plans_;  // reset on every Build: one plan per step, not per layer
};

}  // namespace rpa
