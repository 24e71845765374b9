// UTF-8 helpers for the tokenizers: validation, code point iteration, and a streaming
// decoder that turns token pieces (which may split a character across tokens) into text.
//
// Well-formed UTF-8 is Unicode's Table 3-7: no overlong forms, no surrogates, nothing past
// U+10FFFF. Ill-formed input is replaced per "maximal subpart" (one U+FFFD for each maximal
// prefix of a valid sequence, or for each lone bad byte), as Python's errors="replace" and
// Rust's from_utf8_lossy do, so rpa's text matches theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rpa {

// The offset of the first byte of `text` that does not start a well-formed UTF-8 sequence,
// or std::string_view::npos when the whole text is well-formed.
size_t FindInvalidUtf8(std::string_view text);

// Length in bytes of the well-formed character starting at text[pos].
// REQUIRES: text is well-formed UTF-8 and pos < text.size() is the start of a character.
inline size_t Utf8CharLength(std::string_view text, size_t pos) {
  const uint8_t b = static_cast<uint8_t>(text[pos]);
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

// Decodes the well-formed character at text[pos] (REQUIRES as above).
char32_t DecodeUtf8Char(std::string_view text, size_t pos);

// Appends the UTF-8 encoding of `cp`. REQUIRES: cp <= 0x10FFFF and not a surrogate.
void AppendUtf8(char32_t cp, std::string* out);

// Byte pieces in, text out: Push returns the text that is complete so far and holds back a
// trailing incomplete character until the next piece completes it; Flush ends the stream.
class Utf8StreamDecoder {
 public:
  // Returns the decoded text of everything pushed so far that is no longer pending.
  std::string Push(std::string_view bytes);
  // Returns U+FFFD if an incomplete character is pending (the stream ended inside it), and
  // resets the decoder.
  std::string Flush();
  bool pending() const { return !pending_.empty(); }

 private:
  std::string pending_;  // an incomplete but so far valid prefix of one character
};

}  // namespace rpa
