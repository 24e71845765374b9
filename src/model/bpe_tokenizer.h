// Byte-level BPE (`tokenizer.ggml.model = gpt2`; SmolLM2): the pre-tokenizer splits text
// into words (bpe_pretokenizer.h), each word's bytes start as one symbol per byte (the token
// spelling that byte in GPT-2's alphabet, bpe_byte_map.h), and adjacent symbols merge,
// lowest merge rank first and the leftmost pair on ties, until no listed merge applies.
//
// Words repeat a lot in text, so their ids are cached (bounded; cleared when full).
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/bpe_pretokenizer.h"
#include "model/tokenizer.h"

namespace rpa {

class BpeTokenizer final : public Tokenizer {
 public:
  // REQUIRES: spec.model == "gpt2". Throws rpa::InvalidArgument on an unknown pre-tokenizer
  // or a merge that is not "left right". A byte without a token encodes as spec.unk_id
  // (Encode throws when there is none).
  explicit BpeTokenizer(const TokenizerSpec& spec);

 protected:
  void EncodeText(std::string_view text, std::vector<int32_t>* out) const override;
  void AppendPiece(int32_t id, std::string* out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;  // id of left+right
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // Appends the ids of one pre-tokenized word.
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  RegexSplitter splitter_;
  std::vector<int32_t> byte_token_;             // [256] token spelling each byte, else unk or -1
  std::unordered_map<uint64_t, Merge> merges_;  // PairKey(left, right) -> merge
  std::vector<std::string> pieces_;             // raw bytes of each token

  static constexpr size_t kMaxCachedWords = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace rpa
