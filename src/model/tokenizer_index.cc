#include "model/tokenizer_index.h"

#include <functional>

namespace rpa {

uint64_t TokenIndex::Hash(std::string_view text) {
  // std::hash is a good 64-bit mix (murmur on libstdc++); the fingerprint takes the high
  // half, the slot the low bits, so they are independent.
  return std::hash<std::string_view>{}(text);
}

TokenIndex::TokenIndex(std::vector<std::string> texts) : texts_(std::move(texts)) {
  uint64_t n = 16;
  while (n < 2 * texts_.size()) n *= 2;
  slots_.assign(n, Slot{0, 0});
  mask_ = n - 1;
  for (size_t id = 0; id < texts_.size(); ++id) {
    if (Find(texts_[id]) >= 0) continue;  // a duplicate: the first id keeps it
    const uint64_t h = Hash(texts_[id]);
    uint64_t i = h & mask_;
    while (slots_[i].id_plus_1 != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(id + 1)};
  }
}

}  // namespace rpa
