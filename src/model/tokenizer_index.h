// A text -> token id index for the hot loop of BPE, where most lookups are of pairs that are
// not tokens. An open-addressing table of 8-byte slots (32-bit hash fingerprint, id) keeps a
// miss to about one cache line instead of std::unordered_map's bucket -> node -> string
// chain; a hit compares against the stored text. With Gemma's 262k-token vocabulary it
// halved the time to tokenize WikiText-2's test split (2.5 s -> 1.2 s with unordered_map
// before).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rpa {

class TokenIndex {
 public:
  // Indexes texts[i] -> i; on duplicate texts the lowest id wins.
  explicit TokenIndex(std::vector<std::string> texts);

  // The id of `text`, or -1.
  int32_t Find(std::string_view text) const {
    const uint64_t h = Hash(text);
    const uint32_t fp = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.id_plus_1 == 0) return -1;
      if (s.fingerprint == fp && texts_[s.id_plus_1 - 1] == text) {
        return static_cast<int32_t>(s.id_plus_1 - 1);
      }
    }
  }

 private:
  struct Slot {
    uint32_t fingerprint;
    uint32_t id_plus_1;  // 0: empty
  };
  static uint64_t Hash(std::string_view text);

  std::vector<std::string> texts_;
  std::vector<Slot> slots_;  // a power of two, at most half full
  uint64_t mask_ = 0;
};

}  // namespace rpa
