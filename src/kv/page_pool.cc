#include "kv/page_pool.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "util/error.h"

namespace rpa {

PagePool::PagePool(const PagePoolOptions& options) : options_(options) {
  if (options.num_pages <= 0 || options.page_size <= 0 || options.max_num_seqs <= 0 ||
      options.pages_per_seq <= 0) {
    throw InvalidArgument(Concat("PagePool options must be positive: num_pages=", options.num_pages,
                                 ", page_size=", options.page_size, ", max_num_seqs=",
                                 options.max_num_seqs, ", pages_per_seq=", options.pages_per_seq));
  }
  // Lengths travel as int32 (the kernel's kv_lens), so the longest sequence must fit.
  if (max_seq_len() > std::numeric_limits<int32_t>::max()) {
    throw InvalidArgument(Concat("PagePool pages_per_seq=", options.pages_per_seq,
                                 " x page_size=", options.page_size,
                                 " exceeds the int32 range of sequence lengths"));
  }
  free_pages_.reserve(static_cast<size_t>(options.num_pages));
  // Pushed in reverse so that pages are handed out 0, 1, 2, ... (easier to read in tests).
  for (int32_t p = options.num_pages - 1; p >= 0; --p) free_pages_.push_back(p);
  refcount_.assign(static_cast<size_t>(options.num_pages), 0);
  block_tables_.assign(
      static_cast<size_t>(options.max_num_seqs) * static_cast<size_t>(options.pages_per_seq),
      kNoPage);
  num_tokens_.assign(static_cast<size_t>(options.max_num_seqs), 0);
  num_seq_pages_.assign(static_cast<size_t>(options.max_num_seqs), 0);
  active_.assign(static_cast<size_t>(options.max_num_seqs), 0);
}

int64_t PagePool::max_seq_len() const {
  return static_cast<int64_t>(options_.pages_per_seq) * options_.page_size;
}

int32_t PagePool::PagesFor(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + options_.page_size - 1) / options_.page_size);
}

void PagePool::CheckSlotInRange(int32_t slot, const char* op) const {
  if (slot < 0 || slot >= options_.max_num_seqs) {
    throw InvalidArgument(Concat("PagePool::", op, ": slot=", slot,
                                 " is outside [0, max_num_seqs=", options_.max_num_seqs, ")"));
  }
}

void PagePool::CheckActive(int32_t slot, const char* op) const {
  CheckSlotInRange(slot, op);
  if (!active_[slot]) {
    throw InvalidArgument(Concat("PagePool::", op, ": slot=", slot,
                                 " holds no sequence (unknown sequence, or already freed)"));
  }
}

void PagePool::CheckLength(int64_t num_tokens, const char* op) const {
  if (num_tokens < 0 || num_tokens > max_seq_len()) {
    throw InvalidArgument(Concat("PagePool::", op, ": num_tokens=", num_tokens,
                                 " is outside [0, max_seq_len=", max_seq_len(), "] (pages_per_seq=",
                                 options_.pages_per_seq, " x page_size=", options_.page_size, ")"));
  }
}

bool PagePool::IsActive(int32_t slot) const {
  CheckSlotInRange(slot, "IsActive");
  return active_[slot] != 0;
}

int32_t PagePool::NumTokens(int32_t slot) const {
  CheckActive(slot, "NumTokens");
  return num_tokens_[slot];
}

int32_t PagePool::NumPages(int32_t slot) const {
  CheckActive(slot, "NumPages");
  return num_seq_pages_[slot];
}

int32_t PagePool::RefCount(int32_t page) const {
  if (page < 0 || page >= options_.num_pages) {
    throw InvalidArgument(Concat("PagePool::RefCount: page=", page,
                                 " is outside [0, num_pages=", options_.num_pages, ")"));
  }
  return refcount_[page];
}

bool PagePool::CanAllocate(int64_t num_tokens) const {
  CheckLength(num_tokens, "CanAllocate");
  return PagesFor(num_tokens) <= NumFreePages();
}

int32_t PagePool::ExtraPagesToGrow(int32_t slot, int64_t new_num_tokens, const char* op) const {
  CheckActive(slot, op);
  CheckLength(new_num_tokens, op);
  if (new_num_tokens < num_tokens_[slot]) {
    throw InvalidArgument(Concat("PagePool::", op, ": new_num_tokens=", new_num_tokens,
                                 " is below slot ", slot, "'s num_tokens=", num_tokens_[slot],
                                 " (sequences never shrink; Free and Allocate instead)"));
  }
  return PagesFor(new_num_tokens) - num_seq_pages_[slot];
}

int32_t PagePool::PagesToGrow(int32_t slot, int64_t new_num_tokens) const {
  return ExtraPagesToGrow(slot, new_num_tokens, "PagesToGrow");
}

bool PagePool::CanGrow(int32_t slot, int64_t new_num_tokens) const {
  return ExtraPagesToGrow(slot, new_num_tokens, "CanGrow") <= NumFreePages();
}

bool PagePool::Allocate(int32_t slot, int64_t num_tokens) {
  CheckSlotInRange(slot, "Allocate");
  if (active_[slot]) {
    throw InvalidArgument(Concat("PagePool::Allocate: slot=", slot, " already holds a sequence of ",
                                 num_tokens_[slot], " tokens; Free it or Grow it instead"));
  }
  CheckLength(num_tokens, "Allocate");
  const int32_t need = PagesFor(num_tokens);
  if (need > NumFreePages()) return false;
  int32_t* row = Row(slot);
  for (int32_t j = 0; j < need; ++j) {
    const int32_t page = free_pages_.back();
    free_pages_.pop_back();
    refcount_[page] = 1;
    row[j] = page;
  }
  active_[slot] = 1;
  ++num_active_;
  num_tokens_[slot] = static_cast<int32_t>(num_tokens);
  num_seq_pages_[slot] = need;
  return true;
}

bool PagePool::Grow(int32_t slot, int64_t new_num_tokens) {
  if (ExtraPagesToGrow(slot, new_num_tokens, "Grow") > NumFreePages()) return false;
  const int32_t have = num_seq_pages_[slot];
  const int32_t need = PagesFor(new_num_tokens);
  int32_t* row = Row(slot);
  for (int32_t j = have; j < need; ++j) {
    const int32_t page = free_pages_.back();
    free_pages_.pop_back();
    refcount_[page] = 1;
    row[j] = page;
  }
  num_tokens_[slot] = static_cast<int32_t>(new_num_tokens);
  num_seq_pages_[slot] = need;
  return true;
}

void PagePool::Fork(int32_t src, int32_t dst, int64_t num_tokens) {
  CheckActive(src, "Fork");
  CheckSlotInRange(dst, "Fork");
  if (active_[dst]) {
    throw InvalidArgument(Concat("PagePool::Fork: destination slot=", dst,
                                 " already holds a sequence (src=", src, ")"));
  }
  if (num_tokens < 0 || num_tokens > num_tokens_[src] || num_tokens % options_.page_size != 0) {
    throw InvalidArgument(Concat("PagePool::Fork: num_tokens=", num_tokens,
                                 " must be a multiple of page_size=", options_.page_size,
                                 " within [0, ", num_tokens_[src], "] (src slot=", src,
                                 "'s num_tokens); only whole pages are shared"));
  }
  const int32_t shared = static_cast<int32_t>(num_tokens / options_.page_size);
  const int32_t* src_row = Row(src);
  int32_t* dst_row = Row(dst);
  for (int32_t j = 0; j < shared; ++j) {
    dst_row[j] = src_row[j];
    ++refcount_[src_row[j]];
  }
  active_[dst] = 1;
  ++num_active_;
  num_tokens_[dst] = static_cast<int32_t>(num_tokens);
  num_seq_pages_[dst] = shared;
}

void PagePool::Free(int32_t slot) {
  CheckActive(slot, "Free");
  int32_t* row = Row(slot);
  for (int32_t j = 0; j < num_seq_pages_[slot]; ++j) {
    const int32_t page = row[j];
    if (--refcount_[page] == 0) free_pages_.push_back(page);
    row[j] = kNoPage;
  }
  active_[slot] = 0;
  --num_active_;
  num_tokens_[slot] = 0;
  num_seq_pages_[slot] = 0;
}

std::span<const int32_t> PagePool::BlockTable(int32_t slot) const {
  CheckSlotInRange(slot, "BlockTable");
  return std::span<const int32_t>(block_tables_)
      .subspan(RowOffset(slot), static_cast<size_t>(options_.pages_per_seq));
}

void PagePool::GatherBlockTables(std::span<const int32_t> slots, std::span<int32_t> out) const {
  const size_t pps = static_cast<size_t>(options_.pages_per_seq);
  if (out.size() < slots.size() * pps) {
    throw InvalidArgument(Concat("PagePool::GatherBlockTables: out has ", out.size(),
                                 " entries, needs ", slots.size(), " slots x pages_per_seq=", pps));
  }
  for (int32_t slot : slots) CheckActive(slot, "GatherBlockTables");
  for (size_t i = 0; i < slots.size(); ++i) {
    const int32_t* row = block_tables_.data() + RowOffset(slots[i]);
    std::copy(row, row + pps, out.begin() + static_cast<std::ptrdiff_t>(i * pps));
  }
}

std::string PagePool::InvariantViolation() const {
  const int32_t np = options_.num_pages;
  const int32_t pps = options_.pages_per_seq;
  std::vector<int32_t> holders(static_cast<size_t>(np), 0);
  std::vector<int32_t> last_row(static_cast<size_t>(np), -1);  // detects a page twice in a row
  int32_t active = 0;
  for (int32_t s = 0; s < options_.max_num_seqs; ++s) {
    const int32_t* row = block_tables_.data() + RowOffset(s);
    const int32_t n = num_seq_pages_[s];
    if (!active_[s]) {
      if (num_tokens_[s] != 0 || n != 0) {
        return Concat("inactive slot ", s, " has num_tokens=", num_tokens_[s], ", pages=", n);
      }
    } else {
      ++active;
      if (n != PagesFor(num_tokens_[s]) || n > pps) {
        return Concat("slot ", s, " has ", n, " pages for num_tokens=", num_tokens_[s],
                      " (page_size=", options_.page_size, ", pages_per_seq=", pps, ")");
      }
    }
    for (int32_t j = 0; j < pps; ++j) {
      const int32_t page = row[j];
      if (j >= n) {
        if (page != kNoPage)
          return Concat("slot ", s, " entry ", j, " holds page ", page, " past its ", n, " pages");
        continue;
      }
      if (page < 0 || page >= np)
        return Concat("slot ", s, " entry ", j, " holds invalid page ", page);
      if (last_row[page] == s) return Concat("slot ", s, " lists page ", page, " twice");
      last_row[page] = s;
      ++holders[page];
    }
  }
  if (active != num_active_) {
    return Concat(active, " slots are active but num_active=", num_active_);
  }
  std::vector<uint8_t> in_free_list(static_cast<size_t>(np), 0);
  for (int32_t page : free_pages_) {
    if (page < 0 || page >= np) return Concat("free list holds invalid page ", page);
    if (in_free_list[page])
      return Concat("page ", page, " is in the free list twice (double free)");
    in_free_list[page] = 1;
  }
  for (int32_t p = 0; p < np; ++p) {
    if (refcount_[p] != holders[p]) {
      return Concat("page ", p, " has refcount ", refcount_[p], " but ", holders[p],
                    " slots hold it");
    }
    if ((refcount_[p] == 0) != (in_free_list[p] != 0)) {
      return Concat(
          "page ", p, " has refcount ", refcount_[p],
          in_free_list[p] ? " yet is in the free list" : " yet is not in the free list (leaked)");
    }
  }
  return "";
}

void PagePool::CheckInvariants() const {
  const std::string violation = InvariantViolation();
  if (!violation.empty()) {
    std::fprintf(stderr, "rpa: PagePool invariant broken: %s\n", violation.c_str());
    std::abort();
  }
}

}  // namespace rpa
