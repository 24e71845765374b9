// PagePool under random Allocate / Grow / Fork / Free (and misuse) against an independent
// model of ownership: each slot's list of pages, from which the model derives refcounts and
// the free count itself. After every step the pool must agree with the model entry by entry
// and report no invariant violation; at the end, with everything freed, every page is back.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/page_pool.h"
#include "util/error.h"

namespace rpa {
namespace {

struct ModelSeq {
  bool active = false;
  int64_t tokens = 0;
  std::vector<int32_t> pages;  // logical order
};

class Model {
 public:
  Model(int32_t num_pages, int32_t page_size, int32_t max_num_seqs, int32_t pages_per_seq)
      : num_pages_(num_pages), page_size_(page_size), pps_(pages_per_seq), seqs_(max_num_seqs) {}

  int64_t PagesFor(int64_t tokens) const {
    int64_t pages = 0;
    while (pages * page_size_ < tokens) ++pages;
    return pages;
  }
  std::map<int32_t, int32_t> Holders() const {
    std::map<int32_t, int32_t> h;
    for (const ModelSeq& s : seqs_) {
      for (int32_t p : s.pages) ++h[p];
    }
    return h;
  }
  int64_t NumFree() const { return num_pages_ - static_cast<int64_t>(Holders().size()); }

  std::vector<ModelSeq>& seqs() { return seqs_; }
  int32_t pps() const { return pps_; }
  int32_t page_size() const { return page_size_; }
  int32_t num_pages() const { return num_pages_; }

 private:
  int32_t num_pages_, page_size_, pps_;
  std::vector<ModelSeq> seqs_;
};

// Compares every observable of the pool with the model.
void ExpectAgree(const PagePool& pool, Model& model) {
  ASSERT_EQ(pool.InvariantViolation(), "");
  const auto holders = model.Holders();
  ASSERT_EQ(pool.NumFreePages(), model.NumFree());
  for (int32_t p = 0; p < model.num_pages(); ++p) {
    const auto it = holders.find(p);
    ASSERT_EQ(pool.RefCount(p), it == holders.end() ? 0 : it->second) << "page " << p;
  }
  int active = 0;
  for (int32_t s = 0; s < static_cast<int32_t>(model.seqs().size()); ++s) {
    const ModelSeq& m = model.seqs()[s];
    ASSERT_EQ(pool.IsActive(s), m.active) << "slot " << s;
    active += m.active;
    if (m.active) {
      ASSERT_EQ(pool.NumTokens(s), m.tokens) << "slot " << s;
    }
    const auto row = pool.BlockTable(s);
    for (int32_t j = 0; j < model.pps(); ++j) {
      const int32_t want =
          j < static_cast<int32_t>(m.pages.size()) ? m.pages[j] : PagePool::kNoPage;
      ASSERT_EQ(row[j], want) << "slot " << s << " entry " << j;
    }
  }
  ASSERT_EQ(pool.NumActiveSeqs(), active);
}

// Appends the pool's new entries [from, to) of `slot` to the model, checking that each was
// free in the model before and is distinct.
void TakeNewPages(const PagePool& pool, Model& model, int32_t slot, size_t from, size_t to) {
  const auto holders = model.Holders();
  const auto row = pool.BlockTable(slot);
  for (size_t j = from; j < to; ++j) {
    const int32_t p = row[j];
    ASSERT_GE(p, 0);
    ASSERT_LT(p, model.num_pages());
    ASSERT_EQ(holders.count(p), 0u) << "page " << p << " handed out while held";
    ASSERT_EQ(std::count(row.begin() + from, row.begin() + j, p), 0) << "page " << p << " twice";
    model.seqs()[slot].pages.push_back(p);
  }
}

struct StressCase {
  int32_t num_pages, page_size, max_num_seqs, pages_per_seq;
  uint32_t seed;
};

class PagePoolStressTest : public ::testing::TestWithParam<StressCase> {};

TEST_P(PagePoolStressTest, AgreesWithModel) {
  const StressCase c = GetParam();
  PagePool pool(PagePoolOptions{.num_pages = c.num_pages,
                                .page_size = c.page_size,
                                .max_num_seqs = c.max_num_seqs,
                                .pages_per_seq = c.pages_per_seq});
  Model model(c.num_pages, c.page_size, c.max_num_seqs, c.pages_per_seq);
  std::mt19937 rng(c.seed);
  const int64_t max_len = int64_t{c.page_size} * c.pages_per_seq;
  auto uniform = [&](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto random_slot = [&](bool active) -> int32_t {
    std::vector<int32_t> slots;
    for (int32_t s = 0; s < c.max_num_seqs; ++s) {
      if (model.seqs()[s].active == active) slots.push_back(s);
    }
    return slots.empty() ? -1 : slots[uniform(0, static_cast<int64_t>(slots.size()) - 1)];
  };
  int successes[4] = {}, refusals = 0, misuses = 0;

  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(uniform(0, 9));
    if (op <= 2) {  // Allocate
      const int32_t slot = random_slot(false);
      if (slot < 0) continue;
      const int64_t len = uniform(0, max_len);
      const bool fits = model.PagesFor(len) <= model.NumFree();
      ASSERT_EQ(pool.CanAllocate(len), fits);
      ASSERT_EQ(pool.Allocate(slot, len), fits);
      if (fits) {
        ModelSeq& m = model.seqs()[slot];
        m.active = true;
        m.tokens = len;
        TakeNewPages(pool, model, slot, 0, model.PagesFor(len));
        ++successes[0];
      } else {
        ++refusals;
      }
    } else if (op <= 4) {  // Grow
      const int32_t slot = random_slot(true);
      if (slot < 0) continue;
      ModelSeq& m = model.seqs()[slot];
      // Mostly small steps (decode), sometimes big ones (prefill chunks).
      const int64_t len =
          std::min(max_len, m.tokens + (uniform(0, 3) ? uniform(0, 2) : uniform(0, max_len)));
      const int64_t extra = model.PagesFor(len) - static_cast<int64_t>(m.pages.size());
      const bool fits = extra <= model.NumFree();
      ASSERT_EQ(pool.PagesToGrow(slot, len), extra);
      ASSERT_EQ(pool.CanGrow(slot, len), fits);
      ASSERT_EQ(pool.Grow(slot, len), fits);
      if (fits) {
        const size_t had = m.pages.size();
        m.tokens = len;
        TakeNewPages(pool, model, slot, had, model.PagesFor(len));
        ++successes[1];
      } else {
        ++refusals;
      }
    } else if (op <= 5) {  // Fork a whole-page prefix
      const int32_t src = random_slot(true);
      const int32_t dst = random_slot(false);
      if (src < 0 || dst < 0) continue;
      const int64_t shared_pages = uniform(0, model.seqs()[src].tokens / c.page_size);
      pool.Fork(src, dst, shared_pages * c.page_size);
      ModelSeq& d = model.seqs()[dst];
      d.active = true;
      d.tokens = shared_pages * c.page_size;
      d.pages.assign(model.seqs()[src].pages.begin(),
                     model.seqs()[src].pages.begin() + shared_pages);
      ++successes[2];
    } else if (op <= 8) {  // Free
      const int32_t slot = random_slot(true);
      if (slot < 0) continue;
      pool.Free(slot);
      model.seqs()[slot] = ModelSeq{};
      ++successes[3];
    } else {  // Misuse: a double free, or a shrink; both must be refused with no change.
      const int32_t inactive = random_slot(false);
      const int32_t active = random_slot(true);
      if (inactive >= 0) {
        EXPECT_THROW(pool.Free(inactive), InvalidArgument);
        ++misuses;
      }
      if (active >= 0 && model.seqs()[active].tokens > 0) {
        EXPECT_THROW(pool.Grow(active, model.seqs()[active].tokens - 1), InvalidArgument);
        ++misuses;
      }
    }
    ExpectAgree(pool, model);
    if (HasFatalFailure()) FAIL() << "at step " << step;
  }
  // Every kind of step happened, and the pool ran out of pages at times.
  for (int n : successes) EXPECT_GT(n, 0);
  EXPECT_GT(refusals, 0);
  EXPECT_GT(misuses, 0);

  for (int32_t s = 0; s < c.max_num_seqs; ++s) {
    if (model.seqs()[s].active) {
      pool.Free(s);
      model.seqs()[s] = ModelSeq{};
    }
  }
  ExpectAgree(pool, model);
  EXPECT_EQ(pool.NumFreePages(), c.num_pages);
  EXPECT_EQ(pool.NumActiveSeqs(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagePoolStressTest,
    ::testing::Values(StressCase{37, 16, 8, 10, 1},   // tight: sequences compete for pages
                      StressCase{64, 1, 5, 40, 2},    // page_size 1
                      StressCase{120, 4, 17, 16, 3},  // batch 17
                      StressCase{12, 7, 3, 6, 4},     // awkward page size, few pages
                      StressCase{300, 16, 64, 16, 5}),
    [](const ::testing::TestParamInfo<StressCase>& info) {
      const StressCase& c = info.param;
      return "np" + std::to_string(c.num_pages) + "_ps" + std::to_string(c.page_size) + "_s" +
             std::to_string(c.max_num_seqs) + "_pps" + std::to_string(c.pages_per_seq);
    });

}  // namespace
}  // namespace rpa
