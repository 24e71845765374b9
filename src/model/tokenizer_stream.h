// Printing generated tokens as they arrive: one token's piece may end inside a multi-byte
// UTF-8 character (byte-fallback tokens, byte-level BPE), so text is released only once
// each character is complete. The concatenation of Push(id)... + Flush() equals
// Tokenizer::Decode(ids).
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer.h"
#include "model/tokenizer_utf8.h"

namespace rpa {

class TokenTextStream {
 public:
  // REQUIRES: `tokenizer` outlives the stream.
  explicit TokenTextStream(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  // The text that token `id` completes (possibly ""). Throws rpa::InvalidArgument on an id
  // outside the vocabulary.
  std::string Push(int32_t id) { return decoder_.Push(tokenizer_.TokenPiece(id, render_special_)); }
  // Ends the stream: U+FFFD if it stopped inside a character, else "".
  std::string Flush() { return decoder_.Flush(); }

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  Utf8StreamDecoder decoder_;
};

}  // namespace rpa
