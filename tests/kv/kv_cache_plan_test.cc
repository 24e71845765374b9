// Sizing the cache from a budget: page counts, the 2x fp8 capacity property, the start-up
// log line, and the too-small-budget error.
#include "kv/kv_cache_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "kv/memory_budget.h"
#include "util/error.h"

namespace rpa {
namespace {

using ::testing::HasSubstr;

KvCacheSpec Spec(int32_t layers, int32_t kv_heads, int32_t head_dim, int32_t page_size,
                 DType dtype) {
  return KvCacheSpec{.num_layers = layers,
                     .num_kv_heads = kv_heads,
                     .head_dim = head_dim,
                     .page_size = page_size,
                     .dtype = dtype,
                     .kv_donor = {}};
}

TEST(KvCachePlanTest, PagesAreTheBudgetOverBytesPerPage) {
  // SmolLM2 in bf16: 23040 bytes/token, 368640 bytes per 16-token page.
  const KvCacheSpec spec = Spec(30, 3, 64, 16, DType::kBFloat16);
  const KvCachePlan plan = PlanKvCache(spec, ParseMemoryBudget("2GiB").bytes, 1);
  EXPECT_EQ(plan.num_pages, 5825);  // floor(2147483648 / 368640) = 5825.4
  EXPECT_EQ(plan.num_tokens(), 5825 * 16);
  EXPECT_EQ(plan.bytes_per_page, 368640u);
  EXPECT_EQ(plan.bytes_per_token, 23040u);
  EXPECT_LE(plan.total_bytes(), 2ull << 30);
  EXPECT_GT(plan.total_bytes() + plan.bytes_per_page, 2ull << 30);
}

TEST(KvCachePlanTest, Fp8HoldsTwiceTheTokensOfBf16) {
  // fp8 pages are exactly half the bytes of bf16 pages, so floor(2B/P) pages against
  // floor(B/P): exactly twice, or one page more when the bf16 remainder is >= P/2.
  std::mt19937_64 rng(5);
  const KvCacheSpec shapes[] = {
      Spec(30, 3, 64, 16, DType::kBFloat16), Spec(18, 1, 256, 16, DType::kBFloat16),
      Spec(18, 1, 256, 1, DType::kBFloat16), Spec(2, 2, 8, 7, DType::kBFloat16)};
  for (const KvCacheSpec& bf16 : shapes) {
    for (DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      const KvCacheSpec f8 = bf16.WithDType(fp8);
      for (int trial = 0; trial < 200; ++trial) {
        const uint64_t budget = bf16.BytesPerPage() + rng() % (64ull << 30);
        const int64_t t16 = PlanKvCache(bf16, budget, 1).num_tokens();
        const int64_t t8 = PlanKvCache(f8, budget, 1).num_tokens();
        ASSERT_GE(t8, 2 * t16) << budget;
        ASSERT_LE(t8, 2 * t16 + bf16.page_size) << budget;
      }
      // A budget that is a whole number of bf16 pages: exactly 2x.
      const uint64_t exact = bf16.BytesPerPage() * 1000;
      EXPECT_EQ(PlanKvCache(f8, exact, 1).num_tokens(),
                2 * PlanKvCache(bf16, exact, 1).num_tokens());
    }
  }
}

TEST(KvCachePlanTest, LogLine) {
  // 36 layers x 1 kv head x D 256 in fp8 = 18432 bytes = 18 KiB per token; 4096 pages of 16
  // tokens need 4096 * 16 * 18432 bytes; bf16 pages are twice as large: 2048 pages.
  const KvCacheSpec spec = Spec(36, 1, 256, 16, DType::kFloat8E4M3FN);
  const KvCachePlan plan = PlanKvCache(spec, 4096ull * 16 * 18432, 8);
  EXPECT_EQ(DescribeKvCache(spec, plan),
            "KV cache: 4096 pages x 16 = 65536 tokens, float8_e4m3fn, 18 KiB/token "
            "(bfloat16 would hold 32768)");

  // A bf16 cache compares itself with fp8; SmolLM2 is 22.5 KiB/token.
  const KvCacheSpec smol = Spec(30, 3, 64, 16, DType::kBFloat16);
  const KvCachePlan p2 = PlanKvCache(smol, 100ull * 16 * 23040, 1);
  EXPECT_EQ(DescribeKvCache(smol, p2),
            "KV cache: 100 pages x 16 = 1600 tokens, bfloat16, 22.5 KiB/token "
            "(float8_e4m3fn would hold 3200)");
}

TEST(KvCachePlanTest, TooSmallForOnePagePerSequence) {
  const KvCacheSpec spec = Spec(30, 3, 64, 16, DType::kFloat8E4M3FN);  // 184320 B per page
  EXPECT_NO_THROW(PlanKvCache(spec, 184320ull * 4, 4));
  try {
    PlanKvCache(spec, 184320ull * 4 - 1, 4);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds 3 pages of 184320 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("max_num_seqs=4"));
    EXPECT_THAT(e.what(), HasSubstr("(737280 bytes)"));  // the minimum budget
  }
  EXPECT_THROW(PlanKvCache(spec, 1000, 1), InvalidArgument);
  EXPECT_THROW(PlanKvCache(spec, 1ull << 30, 0), InvalidArgument);
  EXPECT_THROW(PlanKvCache(Spec(30, 3, 64, 0, DType::kBFloat16), 1ull << 30, 1), InvalidArgument);
}

TEST(KvCachePlanTest, PageCountIsCappedAtInt32) {
  // 1-element pages: page_size 1, 1 layer, 1 head, D 1, fp8 = 2 bytes per page.
  const KvCacheSpec tiny = Spec(1, 1, 1, 1, DType::kFloat8E4M3FN);
  const KvCachePlan plan = PlanKvCache(tiny, 1ull << 40, 1);
  EXPECT_EQ(plan.num_pages, 2147483647);
}

}  // namespace
}  // namespace rpa
