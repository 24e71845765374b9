// GPT-2's reversible byte <-> unicode map, the alphabet of byte-level BPE vocabularies.
//
// Byte-level BPE works on bytes, but its vocabulary is stored as text, so each byte is
// spelled by a printable code point: the bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF
// spell themselves; the other 68 (controls, space, U+00AD, ...) take U+0100, U+0101, ... in
// increasing byte order. So ' ' is spelled 'Ġ' (U+0120) and '\n' is 'Ċ' (U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rpa {

// The code point that spells `byte`.
char32_t ByteToUnicode(uint8_t byte);

// The byte `cp` spells, or -1 when cp is outside the alphabet.
int UnicodeToByte(char32_t cp);

// Spells raw bytes in the alphabet (UTF-8 of the spelling code points).
std::string BytesToBpeText(std::string_view bytes);

// Raw bytes of a token stored in the alphabet; characters outside the alphabet (which only
// hand-added tokens contain) are kept as their own UTF-8. REQUIRES: `text` well-formed UTF-8.
std::string BpeTextToBytes(std::string_view text);

}  // namespace rpa
