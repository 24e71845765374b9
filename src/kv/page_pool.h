// PagePool: which KV pages each sequence owns. Bookkeeping only: it never touches KV bytes
// (kv/kv_cache_storage.h holds those), so it is cheap to test against an independent model.
//
// Sequences live in slots 0..max_num_seqs-1; the engine maps its requests to slots. Each slot
// has a row of the block table, pages_per_seq int32 entries: entry j is the physical page of
// the slot's tokens [j*PS, (j+1)*PS), and entries past the slot's pages hold kNoPage. The
// whole table is one flat [max_num_seqs * pages_per_seq] array, exactly the kernel's
// `page_indices` layout (rpa-contract.md §1), so a batch whose i-th sequence is slot i can
// pass block_tables() as is; other batch orders copy rows with GatherBlockTables() into a
// buffer the caller owns. No call allocates after construction.
//
// A slot's "length" (NumTokens) is the number of token positions it has pages for; the
// caller decides how many of them hold written K/V. Pages are refcounted so that several
// sequences can share a prefix (Fork): a shared page is read-only by convention, and because
// only whole pages are shared, a sequence's writes past its shared prefix always land in
// pages it owns alone.
//
// State changes only through Allocate, Grow, Fork and Free. Misuse (unknown slot, double
// free, lengths out of range) throws rpa::InvalidArgument and leaves the pool unchanged;
// running out of pages is not an error: Allocate / Grow return false and change nothing.
//
// Thread safety: not thread-safe. One owner (the engine's step loop) calls it; concurrent
// readers of block_tables() must be ordered with that owner's writes externally.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rpa {

struct PagePoolOptions {
  int32_t num_pages = 0;      // NP, physical pages in the cache
  int32_t page_size = 0;      // PS, tokens per page
  int32_t max_num_seqs = 0;   // S, sequence slots
  int32_t pages_per_seq = 0;  // PPS, block-table entries per slot (max length / PS, rounded up)
};

class PagePool {
 public:
  // Block-table entry of a slot position that holds no page. Never a valid page index, so
  // the kernel's metadata validation rejects it should it ever be read.
  static constexpr int32_t kNoPage = -1;

  // Throws rpa::InvalidArgument unless every option is positive.
  explicit PagePool(const PagePoolOptions& options);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int32_t num_pages() const { return options_.num_pages; }
  int32_t page_size() const { return options_.page_size; }
  int32_t max_num_seqs() const { return options_.max_num_seqs; }
  int32_t pages_per_seq() const { return options_.pages_per_seq; }
  // The longest sequence a slot can hold: pages_per_seq * page_size tokens.
  int64_t max_seq_len() const;

  // Pages in the free list (refcount 0).
  int32_t NumFreePages() const { return static_cast<int32_t>(free_pages_.size()); }
  int32_t NumActiveSeqs() const { return num_active_; }
  // Pages needed to hold `num_tokens` tokens: ceil(num_tokens / page_size).
  int32_t PagesFor(int64_t num_tokens) const;

  // Returns true iff `slot` (in range) holds a sequence.
  bool IsActive(int32_t slot) const;
  // Token positions the sequence in `slot` has pages for. REQUIRES: IsActive(slot).
  int32_t NumTokens(int32_t slot) const;
  // Pages in the slot's block-table row (shared ones included). REQUIRES: IsActive(slot).
  int32_t NumPages(int32_t slot) const;
  // How many slots hold `page`; 0 iff it is free. REQUIRES: 0 <= page < num_pages.
  int32_t RefCount(int32_t page) const;

  // Returns true iff a new sequence of `num_tokens` would find enough free pages.
  // REQUIRES: 0 <= num_tokens <= max_seq_len() (else throws).
  bool CanAllocate(int64_t num_tokens) const;
  // Free pages the active `slot` would take to grow to `new_num_tokens` (0 when its last page
  // has room): lets a scheduler budget the pages of a whole step before committing any.
  // REQUIRES: IsActive(slot), NumTokens(slot) <= new_num_tokens <= max_seq_len() (else throws).
  int32_t PagesToGrow(int32_t slot, int64_t new_num_tokens) const;
  // Returns true iff the active `slot` could grow to `new_num_tokens` with the free pages.
  // REQUIRES: IsActive(slot), NumTokens(slot) <= new_num_tokens <= max_seq_len() (else throws).
  bool CanGrow(int32_t slot, int64_t new_num_tokens) const;

  // Starts a sequence in the free `slot` with pages for `num_tokens` tokens (0 is allowed:
  // a sequence with no pages yet). Returns true iff done; false (nothing changed) when too
  // few pages are free. Throws if the slot is out of range or active, or num_tokens is
  // outside [0, max_seq_len()].
  bool Allocate(int32_t slot, int64_t num_tokens);
  // Extends the active `slot` to `new_num_tokens` tokens, adding pages as needed. Returns
  // true iff done; false (nothing changed) when too few pages are free. Throws if the slot
  // is not active, or new_num_tokens is below NumTokens(slot) or above max_seq_len().
  bool Grow(int32_t slot, int64_t new_num_tokens);
  // Starts a sequence in the free slot `dst` that shares the first `num_tokens` tokens of
  // the active slot `src` (prefix sharing): dst's first num_tokens / PS entries are src's
  // pages, each refcount incremented. Needs no free page, so it cannot run out. Throws
  // unless src is active, dst is free and distinct, and num_tokens is a multiple of
  // page_size within [0, NumTokens(src)] (whole pages only, so that neither sequence ever
  // writes into a page the other reads).
  void Fork(int32_t src, int32_t dst, int64_t num_tokens);
  // Ends the sequence in `slot`: every page's refcount drops by one, and pages that reach 0
  // return to the free list. Throws if the slot is out of range or not active (double free).
  void Free(int32_t slot);

  // The slot's block-table row, [pages_per_seq]: NumPages(slot) page indices, then kNoPage.
  // REQUIRES: 0 <= slot < max_num_seqs (else throws); an inactive slot's row is all kNoPage.
  std::span<const int32_t> BlockTable(int32_t slot) const;
  // The whole table, [max_num_seqs * pages_per_seq], row `slot` at slot * pages_per_seq.
  std::span<const int32_t> block_tables() const { return block_tables_; }
  // Copies the rows of `slots` into out[i * PPS, (i+1) * PPS) (the kernel's page_indices for
  // a batch in that order); rows of `out` past slots.size() are left untouched. Throws unless
  // every slot is active and out.size() >= slots.size() * pages_per_seq.
  void GatherBlockTables(std::span<const int32_t> slots, std::span<int32_t> out) const;

  // Returns "" iff the bookkeeping is consistent, else a description of the first broken
  // invariant: each page is free (refcount 0, in the free list exactly once) or held (its
  // refcount equals the number of slots whose rows list it, and a row lists it at most
  // once); each active row holds exactly PagesFor(NumTokens) valid pages then kNoPage;
  // inactive rows are all kNoPage. So when no slot is active, every page is free.
  std::string InvariantViolation() const;
  // Aborts with InvariantViolation()'s text if it is not empty (a broken invariant is a bug
  // in rpa, not bad input). O(NP + S * PPS) and allocates: for tests and debug checks.
  void CheckInvariants() const;

 private:
  friend class PagePoolTestPeer;  // tests corrupt state to prove InvariantViolation() sees it

  void CheckSlotInRange(int32_t slot, const char* op) const;
  void CheckActive(int32_t slot, const char* op) const;
  void CheckLength(int64_t num_tokens, const char* op) const;
  // Pages `slot` needs beyond its own to hold new_num_tokens; validates the arguments for
  // `op` (CanGrow or Grow).
  int32_t ExtraPagesToGrow(int32_t slot, int64_t new_num_tokens, const char* op) const;
  int32_t* Row(int32_t slot) { return block_tables_.data() + RowOffset(slot); }
  size_t RowOffset(int32_t slot) const {
    return static_cast<size_t>(slot) * static_cast<size_t>(options_.pages_per_seq);
  }

  PagePoolOptions options_;
  std::vector<int32_t> free_pages_;     // stack of free page indices; capacity NP
  std::vector<int32_t> refcount_;       // [NP]
  std::vector<int32_t> block_tables_;   // [S * PPS]
  std::vector<int32_t> num_tokens_;     // [S]
  std::vector<int32_t> num_seq_pages_;  // [S]
  std::vector<uint8_t> active_;         // [S]
  int32_t num_active_ = 0;
};

}  // namespace rpa
