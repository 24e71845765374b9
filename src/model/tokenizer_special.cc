#include "model/tokenizer_special.h"

#include <algorithm>

namespace rpa {

int32_t SpecialTokenMatcher::Child(int32_t node, uint8_t byte) const {
  const auto& c = nodes_[node].children;
  auto it =
      std::lower_bound(c.begin(), c.end(), byte,
                       [](const std::pair<uint8_t, int32_t>& p, uint8_t b) { return p.first < b; });
  return it != c.end() && it->first == byte ? it->second : -1;
}

void SpecialTokenMatcher::Add(std::string_view text, int32_t id, bool control) {
  if (text.empty()) return;
  int32_t node = 0;
  for (char ch : text) {
    const uint8_t byte = static_cast<uint8_t>(ch);
    int32_t next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& c = nodes_[node].children;
      auto it = std::lower_bound(
          c.begin(), c.end(), byte,
          [](const std::pair<uint8_t, int32_t>& p, uint8_t b) { return p.first < b; });
      c.insert(it, {byte, next});
    }
    node = next;
  }
  if (nodes_[node].id >= 0) return;
  nodes_[node].id = id;
  nodes_[node].control = control;
  first_byte_[static_cast<uint8_t>(text[0])] |= control ? 1 : 3;
}

std::optional<SpecialTokenMatcher::Match> SpecialTokenMatcher::FindNext(std::string_view text,
                                                                        size_t from,
                                                                        bool with_control) const {
  const uint8_t need = with_control ? 1 : 2;
  for (size_t start = from; start < text.size(); ++start) {
    if (!(first_byte_[static_cast<uint8_t>(text[start])] & need)) continue;
    std::optional<Match> best;
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      node = Child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      const Node& n = nodes_[node];
      if (n.id >= 0 && (with_control || !n.control)) best = Match{start, i + 1 - start, n.id};
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace rpa
