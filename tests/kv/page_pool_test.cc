// PagePool: the documented calls one by one, and every misuse error leaving the pool
// unchanged. The randomized test against an independent model is page_pool_stress_test.cc.
#include "kv/page_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "util/error.h"

namespace rpa {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int32_t kNo = PagePool::kNoPage;

PagePoolOptions Options(int32_t num_pages, int32_t page_size, int32_t max_num_seqs,
                        int32_t pages_per_seq) {
  return PagePoolOptions{.num_pages = num_pages,
                         .page_size = page_size,
                         .max_num_seqs = max_num_seqs,
                         .pages_per_seq = pages_per_seq};
}

std::vector<int32_t> Row(const PagePool& pool, int32_t slot) {
  const auto row = pool.BlockTable(slot);
  return {row.begin(), row.end()};
}

TEST(PagePoolTest, StartsEmpty) {
  PagePool pool(Options(10, 16, 3, 4));
  EXPECT_EQ(pool.NumFreePages(), 10);
  EXPECT_EQ(pool.NumActiveSeqs(), 0);
  EXPECT_EQ(pool.max_seq_len(), 64);
  EXPECT_EQ(pool.block_tables().size(), 12u);
  for (int32_t e : pool.block_tables()) EXPECT_EQ(e, kNo);
  for (int32_t s = 0; s < 3; ++s) EXPECT_FALSE(pool.IsActive(s));
  EXPECT_EQ(pool.InvariantViolation(), "");
}

TEST(PagePoolTest, AllocateGrowFree) {
  PagePool pool(Options(10, 16, 3, 4));
  ASSERT_TRUE(pool.Allocate(1, 17));  // 17 tokens: 2 pages
  EXPECT_TRUE(pool.IsActive(1));
  EXPECT_EQ(pool.NumTokens(1), 17);
  EXPECT_EQ(pool.NumPages(1), 2);
  EXPECT_EQ(pool.NumFreePages(), 8);
  EXPECT_THAT(Row(pool, 1), ElementsAre(0, 1, kNo, kNo));
  EXPECT_THAT(Row(pool, 0), ElementsAre(kNo, kNo, kNo, kNo));
  EXPECT_EQ(pool.RefCount(0), 1);

  EXPECT_EQ(pool.PagesToGrow(1, 32), 0);
  EXPECT_EQ(pool.PagesToGrow(1, 33), 1);
  EXPECT_EQ(pool.PagesToGrow(1, 64), 2);
  ASSERT_TRUE(pool.Grow(1, 32));  // still 2 pages
  EXPECT_EQ(pool.NumPages(1), 2);
  EXPECT_EQ(pool.NumFreePages(), 8);
  ASSERT_TRUE(pool.Grow(1, 33));  // a third page
  EXPECT_THAT(Row(pool, 1), ElementsAre(0, 1, 2, kNo));
  ASSERT_TRUE(pool.Grow(1, 33));  // same length: no-op
  EXPECT_EQ(pool.NumFreePages(), 7);

  ASSERT_TRUE(pool.Allocate(0, 0));  // active, no pages yet
  EXPECT_EQ(pool.NumPages(0), 0);
  ASSERT_TRUE(pool.Grow(0, 1));
  EXPECT_THAT(Row(pool, 0), ElementsAre(3, kNo, kNo, kNo));
  EXPECT_EQ(pool.InvariantViolation(), "");

  // The flat table is the kernel's page_indices: row s at s * PPS.
  EXPECT_THAT(std::vector<int32_t>(pool.block_tables().begin(), pool.block_tables().end()),
              ElementsAre(3, kNo, kNo, kNo, 0, 1, 2, kNo, kNo, kNo, kNo, kNo));

  pool.Free(1);
  EXPECT_FALSE(pool.IsActive(1));
  EXPECT_EQ(pool.NumFreePages(), 9);
  EXPECT_THAT(Row(pool, 1), ElementsAre(kNo, kNo, kNo, kNo));
  pool.Free(0);
  EXPECT_EQ(pool.NumFreePages(), 10);
  EXPECT_EQ(pool.NumActiveSeqs(), 0);
  EXPECT_EQ(pool.InvariantViolation(), "");
}

TEST(PagePoolTest, RunningOutOfPagesChangesNothing) {
  PagePool pool(Options(5, 4, 3, 8));
  ASSERT_TRUE(pool.Allocate(0, 12));  // 3 pages
  EXPECT_TRUE(pool.CanAllocate(8));
  EXPECT_FALSE(pool.CanAllocate(9));
  EXPECT_FALSE(pool.Allocate(1, 9));
  EXPECT_FALSE(pool.IsActive(1));
  EXPECT_EQ(pool.NumFreePages(), 2);
  EXPECT_TRUE(pool.CanGrow(0, 20));
  EXPECT_FALSE(pool.CanGrow(0, 21));
  EXPECT_FALSE(pool.Grow(0, 21));
  EXPECT_EQ(pool.NumTokens(0), 12);
  EXPECT_EQ(pool.NumPages(0), 3);
  EXPECT_EQ(pool.NumFreePages(), 2);
  EXPECT_TRUE(pool.Grow(0, 20));
  EXPECT_EQ(pool.NumFreePages(), 0);
  EXPECT_TRUE(pool.Allocate(1, 0));  // needs no page
  EXPECT_EQ(pool.InvariantViolation(), "");
}

TEST(PagePoolTest, ForkSharesWholePagesWithRefcounts) {
  PagePool pool(Options(8, 4, 3, 4));
  ASSERT_TRUE(pool.Allocate(0, 10));  // pages 0, 1, 2
  pool.Fork(0, 2, 8);                 // shares pages 0, 1
  EXPECT_THAT(Row(pool, 2), ElementsAre(0, 1, kNo, kNo));
  EXPECT_EQ(pool.NumTokens(2), 8);
  EXPECT_EQ(pool.RefCount(0), 2);
  EXPECT_EQ(pool.RefCount(1), 2);
  EXPECT_EQ(pool.RefCount(2), 1);
  EXPECT_EQ(pool.NumFreePages(), 5);
  ASSERT_TRUE(pool.Grow(2, 9));  // the fork's own third page
  EXPECT_THAT(Row(pool, 2), ElementsAre(0, 1, 3, kNo));
  EXPECT_EQ(pool.InvariantViolation(), "");

  pool.Free(0);  // shared pages stay with the fork
  EXPECT_EQ(pool.RefCount(0), 1);
  EXPECT_EQ(pool.RefCount(2), 0);
  EXPECT_EQ(pool.NumFreePages(), 5);
  pool.Free(2);
  EXPECT_EQ(pool.NumFreePages(), 8);
  EXPECT_EQ(pool.InvariantViolation(), "");

  ASSERT_TRUE(pool.Allocate(0, 4));
  pool.Fork(0, 1, 0);  // an empty prefix is allowed
  EXPECT_EQ(pool.NumPages(1), 0);
}

TEST(PagePoolTest, GatherBlockTablesInBatchOrder) {
  PagePool pool(Options(8, 2, 3, 2));
  ASSERT_TRUE(pool.Allocate(2, 3));  // pages 0, 1
  ASSERT_TRUE(pool.Allocate(0, 1));  // page 2
  std::vector<int32_t> out(3 * 2, 99);
  const int32_t order[] = {2, 0};
  pool.GatherBlockTables(order, out);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, kNo, 99, 99));  // row 2 untouched
  std::vector<int32_t> small(3);
  EXPECT_THROW(pool.GatherBlockTables(order, small), InvalidArgument);
  const int32_t inactive[] = {1};
  EXPECT_THROW(pool.GatherBlockTables(inactive, out), InvalidArgument);
}

TEST(PagePoolTest, BlockTableStorageNeverMoves) {
  // The flat table is allocated once: its address is stable across every call, so the
  // engine may hold the span, and the pool causes no per-step heap churn.
  PagePool pool(Options(6, 1, 4, 6));
  const int32_t* table = pool.block_tables().data();
  for (int round = 0; round < 3; ++round) {
    for (int32_t s = 0; s < 3; ++s) ASSERT_TRUE(pool.Allocate(s, 1));
    ASSERT_TRUE(pool.Grow(0, 3));
    pool.Fork(0, 3, 2);
    EXPECT_EQ(pool.NumFreePages(), 1);
    for (int32_t s = 0; s < 4; ++s) pool.Free(s);
    EXPECT_EQ(pool.block_tables().data(), table);
    EXPECT_EQ(pool.BlockTable(2).data(), table + 2 * 6);
  }
  EXPECT_EQ(pool.NumFreePages(), 6);
}

// Runs `op`, which must throw InvalidArgument with `fragment` in its message, and checks
// that the pool is exactly as before.
template <typename Op>
void ExpectRejected(PagePool& pool, Op op, const std::string& fragment) {
  const std::vector<int32_t> table(pool.block_tables().begin(), pool.block_tables().end());
  const int32_t free_pages = pool.NumFreePages();
  const int32_t active = pool.NumActiveSeqs();
  try {
    op();
    ADD_FAILURE() << "expected InvalidArgument containing \"" << fragment << "\"";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
  EXPECT_THAT(std::vector<int32_t>(pool.block_tables().begin(), pool.block_tables().end()),
              ElementsAreArray(table));
  EXPECT_EQ(pool.NumFreePages(), free_pages);
  EXPECT_EQ(pool.NumActiveSeqs(), active);
  EXPECT_EQ(pool.InvariantViolation(), "");
}

TEST(PagePoolTest, MisuseThrowsAndChangesNothing) {
  PagePool pool(Options(8, 4, 3, 4));  // max_seq_len 16
  ASSERT_TRUE(pool.Allocate(0, 6));
  ASSERT_TRUE(pool.Allocate(1, 4));
  pool.Free(1);

  ExpectRejected(
      pool, [&] { pool.Free(1); }, "Free: slot=1 holds no sequence");  // double free
  ExpectRejected(
      pool, [&] { pool.Free(2); }, "Free: slot=2 holds no sequence");  // never allocated
  ExpectRejected(
      pool, [&] { pool.Free(3); }, "slot=3 is outside [0, max_num_seqs=3)");
  ExpectRejected(
      pool, [&] { pool.Free(-1); }, "slot=-1 is outside");
  ExpectRejected(
      pool, [&] { pool.Allocate(0, 1); }, "Allocate: slot=0 already holds a sequence");
  ExpectRejected(
      pool, [&] { pool.Allocate(2, 17); }, "num_tokens=17 is outside [0, max_seq_len=16]");
  ExpectRejected(
      pool, [&] { pool.Allocate(2, -1); }, "num_tokens=-1");
  ExpectRejected(
      pool, [&] { pool.Grow(0, 5); }, "Grow: new_num_tokens=5 is below slot 0's num_tokens=6");
  ExpectRejected(
      pool, [&] { pool.Grow(0, 17); }, "Grow: num_tokens=17");
  ExpectRejected(
      pool, [&] { pool.Grow(1, 8); }, "Grow: slot=1 holds no sequence");
  ExpectRejected(
      pool, [&] { pool.CanGrow(1, 8); }, "CanGrow: slot=1");
  ExpectRejected(
      pool, [&] { pool.CanAllocate(100); }, "CanAllocate: num_tokens=100");
  ExpectRejected(
      pool, [&] { pool.Fork(0, 1, 6); }, "num_tokens=6 must be a multiple of page_size=4");
  ExpectRejected(
      pool, [&] { pool.Fork(0, 1, 8); }, "within [0, 6]");
  ExpectRejected(
      pool, [&] { pool.Fork(0, 0, 4); }, "destination slot=0 already holds");
  ExpectRejected(
      pool, [&] { pool.Fork(1, 2, 0); }, "Fork: slot=1 holds no sequence");
  ExpectRejected(
      pool, [&] { pool.NumTokens(2); }, "NumTokens: slot=2");
  ExpectRejected(
      pool, [&] { pool.RefCount(8); }, "page=8 is outside [0, num_pages=8)");
  ExpectRejected(
      pool, [&] { pool.BlockTable(3); }, "BlockTable: slot=3");
}

TEST(PagePoolTest, RejectsBadOptions) {
  EXPECT_THROW(PagePool(Options(0, 16, 1, 1)), InvalidArgument);
  EXPECT_THROW(PagePool(Options(1, 0, 1, 1)), InvalidArgument);
  EXPECT_THROW(PagePool(Options(1, 16, 0, 1)), InvalidArgument);
  EXPECT_THROW(PagePool(Options(1, 16, 1, -1)), InvalidArgument);
  EXPECT_THROW(PagePool(Options(1, 1 << 16, 1, 1 << 16)), InvalidArgument);  // 2^32 tokens
}

TEST(PagePoolTest, CheckInvariantsReturnsOnAConsistentPool) {
  PagePool pool(Options(4, 2, 2, 2));
  ASSERT_TRUE(pool.Allocate(0, 3));
  pool.Fork(0, 1, 2);
  pool.CheckInvariants();  // returns: nothing to report
  pool.Free(0);
  pool.Free(1);
  pool.CheckInvariants();
}

}  // namespace

// Corrupts a pool's private state, to prove that InvariantViolation() notices.
class PagePoolTestPeer {
 public:
  static std::vector<int32_t>& FreePages(PagePool& p) { return p.free_pages_; }
  static std::vector<int32_t>& RefCounts(PagePool& p) { return p.refcount_; }
  static std::vector<int32_t>& Table(PagePool& p) { return p.block_tables_; }
  static std::vector<int32_t>& NumTokens(PagePool& p) { return p.num_tokens_; }
};

namespace {

TEST(PagePoolTest, InvariantViolationCatchesCorruption) {
  using Peer = PagePoolTestPeer;
  // Slot 0 holds pages 0, 1 (5 tokens of 3 per page); pages 2..5 are free; PPS 3.
  auto make = [] {
    auto pool = std::make_unique<PagePool>(Options(6, 3, 2, 3));
    EXPECT_TRUE(pool->Allocate(0, 5));
    EXPECT_EQ(pool->InvariantViolation(), "");
    return pool;
  };
  auto p = make();
  Peer::FreePages(*p).push_back(0);  // a held page also free: a double free
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("page 0 has refcount 1 yet is in the free list"));
  p = make();
  Peer::FreePages(*p).push_back(3);  // free twice
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("page 3 is in the free list twice"));
  p = make();
  Peer::FreePages(*p).pop_back();  // a page lost
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("yet is not in the free list (leaked)"));
  p = make();
  Peer::Table(*p)[3 + 0] = 0;  // slot 1 (inactive) lists page 0
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("slot 1 entry 0 holds page 0 past its 0 pages"));
  p = make();
  Peer::Table(*p)[1] = 0;  // slot 0 lists page 0 twice
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("slot 0 lists page 0 twice"));
  p = make();
  Peer::RefCounts(*p)[1] = 2;  // owned once, counted twice
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("page 1 has refcount 2 but 1 slots hold it"));
  p = make();
  Peer::NumTokens(*p)[0] = 7;  // 7 tokens need 3 pages, the row has 2
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("slot 0 has 2 pages for num_tokens=7"));
  p = make();
  Peer::Table(*p)[2] = 5;  // past the slot's pages
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("slot 0 entry 2 holds page 5 past its 2 pages"));
  p = make();
  Peer::Table(*p)[0] = 9;
  EXPECT_THAT(p->InvariantViolation(), HasSubstr("slot 0 entry 0 holds invalid page 9"));
  EXPECT_DEATH(p->CheckInvariants(),
               "PagePool invariant broken: slot 0 entry 0 holds invalid page 9");
}

}  // namespace
}  // namespace rpa
