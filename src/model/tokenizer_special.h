// Finds tokens written verbatim in text (control and user-defined tokens such as
// "<|im_start|>", "<start_of_turn>" or Gemma's whitespace runs "\n\n"), so a tokenizer can cut
// them out before running its algorithm on the text between them.
//
// Matching is leftmost-longest, as Hugging Face tokenizers' added-token matcher does: scanning
// from the left, the first position where some token starts wins, and the longest token
// starting there is taken.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace rpa {

class SpecialTokenMatcher {
 public:
  struct Match {
    size_t offset;  // where the token starts in the text
    size_t length;  // bytes
    int32_t id;
  };

  // Registers token `id` with text `text`; `control` tokens are matched only when asked for.
  // An empty text is ignored. When two ids share a text the first one registered wins.
  void Add(std::string_view text, int32_t id, bool control);

  // The leftmost-longest token in text[from..], or nullopt. Control tokens take part iff
  // with_control.
  std::optional<Match> FindNext(std::string_view text, size_t from, bool with_control) const;

 private:
  // A byte trie; node 0 is the root. Children are few per node, so a sorted vector is
  // smaller and as fast as a map.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), sorted by byte
    int32_t id = -1;                                    // token ending here, or -1
    bool control = false;
  };
  int32_t Child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_{1};
  // first_byte_[b]: some token starts with byte b (and whether only control ones do), a
  // quick reject for the common byte.
  std::array<uint8_t, 256> first_byte_{};  // bit 0: any token, bit 1: a non-control token
};

}  // namespace rpa
