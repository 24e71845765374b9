#include <gtest/gtest.h>

#include <random>

#include "engine/batch_builder.h"
#include "kernels/attention_validate.h"

namespace rpa {
namespace {

// For random workloads, the metadata the builder lays out (1) passes the kernel's dynamic
// validation and (2) equals an independent construction written here from the contract.
TEST(BatchBuilder, RandomWorkloadsMatchAnIndependentConstruction) {
  constexpr int32_t kSeqs = 12, kPageSize = 16, kPps = 16, kPages = 160, kTokens = 256;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    PagePool pool(PagePoolOptions{kPages, kPageSize, kSeqs, kPps});
    std::vector<Sequence> seqs(1 + rng() % kSeqs);
    std::vector<ScheduledChunk> chunks;
    int32_t budget = kTokens;
    for (size_t i = 0; i < seqs.size() && budget > 0; ++i) {
      Sequence& s = seqs[i];
      s.slot = static_cast<int32_t>((i * 5) % kSeqs);  // distinct slots (5 is coprime to 12)
      const int kind = rng() % 3;  // 0 decode, 1 first prefill chunk, 2 later chunk
      const int32_t len = 2 + rng() % 200;
      s.tokens.resize(len);
      for (auto& t : s.tokens) t = rng() % 1000;
      s.prompt_len = len;
      s.num_computed = kind == 0 ? len - 1 : kind == 1 ? 0 : 1 + rng() % (len - 1);
      const int32_t q_len = std::min<int32_t>(budget, kind == 0 ? 1 : len - s.num_computed);
      if (!pool.Allocate(s.slot, s.num_computed + q_len)) break;
      chunks.push_back({&s, q_len, s.num_computed + q_len == len});
      budget -= q_len;
    }
    const std::vector<ScheduledChunk> original = chunks;
    BatchBuilder builder(kSeqs, kTokens, kPps);
    const StepInput in = builder.Build(chunks, pool);

    // Independent construction: buckets by (q_len, cached context), stable within each.
    std::vector<ScheduledChunk> order;
    for (int bucket = 0; bucket < 3; ++bucket) {
      for (const auto& c : original) {
        const int b = c.q_len == 1 ? 0 : (c.seq->num_computed == 0 ? 1 : 2);
        if (b == bucket) order.push_back(c);
      }
    }
    const AttentionMetadata& m = in.batch.metadata;
    int32_t row = 0, d0 = 0, d1 = 0;
    ASSERT_EQ(m.cu_q_lens[0], 0);
    std::vector<int32_t> logit_rows;
    for (size_t i = 0; i < order.size(); ++i) {
      const Sequence& s = *order[i].seq;
      for (int32_t j = 0; j < order[i].q_len; ++j) {
        EXPECT_EQ(in.tokens[row + j], s.tokens[s.num_computed + j]);
        EXPECT_EQ(in.positions[row + j], s.num_computed + j);
      }
      row += order[i].q_len;
      if (order[i].sample) logit_rows.push_back(row - 1);
      EXPECT_EQ(m.cu_q_lens[i + 1], row);
      EXPECT_EQ(m.kv_lens[i], s.num_computed + order[i].q_len);
      const auto table = pool.BlockTable(s.slot);
      for (int32_t j = 0; j < kPps; ++j) EXPECT_EQ(m.page_indices[i * kPps + j], table[j]);
      d0 += order[i].q_len == 1;
      d1 += order[i].q_len == 1 || s.num_computed == 0;
    }
    EXPECT_EQ(static_cast<int32_t>(in.tokens.size()), row);
    EXPECT_EQ(m.distribution[0], d0);
    EXPECT_EQ(m.distribution[1], d1);
    EXPECT_EQ(m.distribution[2], static_cast<int32_t>(order.size()));
    EXPECT_EQ(std::vector<int32_t>(in.logit_rows.begin(), in.logit_rows.end()), logit_rows);
    EXPECT_NO_THROW(ValidateAttentionMetadata(m, row, kPageSize, kPages));
  }
}

}  // namespace
}  // namespace rpa
