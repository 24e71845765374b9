// SentencePiece-style BPE (`tokenizer.ggml.model = llama`; Gemma 3): spaces become U+2581
// ('▁'), the text starts as one symbol per character, and adjacent symbols whose
// concatenation is a token merge, the highest-scoring result first and the leftmost pair on
// ties. A final symbol that is not a token falls back to its bytes' <0xXX> tokens.
#pragma once

#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/tokenizer_index.h"

namespace rpa {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // REQUIRES: spec.model == "llama" and spec.scores has one score per token.
  explicit SentencePieceTokenizer(const TokenizerSpec& spec);

 protected:
  void EncodeText(std::string_view text, std::vector<int32_t>* out) const override;
  void AppendPiece(int32_t id, std::string* out) const override;

 private:
  std::vector<float> scores_;
  // The ids BPE may produce, by their '▁' spelling. Whitespace-run tokens stored with real
  // spaces ("  ") are indexed as "▁▁": that is how the SentencePiece model spells them, and
  // Hugging Face's GGUF loader does the same.
  TokenIndex index_;
  std::vector<int32_t> byte_token_;  // [256] id of <0xXX>, or -1
  std::vector<std::string> pieces_;  // raw bytes of each token
  bool add_space_prefix_;
  std::optional<int32_t> unk_id_;
};

}  // namespace rpa
