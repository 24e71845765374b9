#include "model/bpe_byte_map.h"

#include <array>

#include "model/tokenizer_utf8.h"

namespace rpa {
namespace {

bool SpellsItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

struct Tables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 0x144> to_byte{};  // spellings are all below U+0100 + 68
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      t.to_unicode[b] = SpellsItself(b) ? static_cast<char32_t>(b) : next++;
      t.to_byte[t.to_unicode[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteToUnicode(uint8_t byte) { return GetTables().to_unicode[byte]; }

int UnicodeToByte(char32_t cp) {
  const Tables& t = GetTables();
  return cp < t.to_byte.size() ? t.to_byte[cp] : -1;
}

std::string BytesToBpeText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &out);
  return out;
}

std::string BpeTextToBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = Utf8CharLength(text, pos);
    const int b = UnicodeToByte(DecodeUtf8Char(text, pos));
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

}  // namespace rpa
