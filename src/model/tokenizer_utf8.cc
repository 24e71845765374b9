#include "model/tokenizer_utf8.h"

namespace rpa {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The shape of a sequence that starts with `lead`: its length (0: the byte cannot start
// one) and the allowed range of its second byte, which is what rules out overlong forms,
// surrogates and code points past U+10FFFF (Table 3-7).
struct Lead {
  int length;
  uint8_t lo, hi;
};
Lead LeadOf(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

enum class Step { kValid, kInvalid, kIncomplete };

// Classifies the sequence at s[pos]; `len` gets its length (valid), the length of the
// maximal subpart to replace (invalid), or the bytes present (incomplete).
Step Classify(std::string_view s, size_t pos, size_t* len) {
  const Lead lead = LeadOf(static_cast<uint8_t>(s[pos]));
  if (lead.length == 0) {
    *len = 1;
    return Step::kInvalid;
  }
  for (int k = 1; k < lead.length; ++k) {
    if (pos + k >= s.size()) {
      *len = static_cast<size_t>(k);
      return Step::kIncomplete;
    }
    const uint8_t b = static_cast<uint8_t>(s[pos + k]);
    const bool ok = k == 1 ? (b >= lead.lo && b <= lead.hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *len = static_cast<size_t>(k);
      return Step::kInvalid;
    }
  }
  *len = static_cast<size_t>(lead.length);
  return Step::kValid;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len = 0;
    if (Classify(text, pos, &len) != Step::kValid) return pos;
    pos += len;
  }
  return std::string_view::npos;
}

char32_t DecodeUtf8Char(std::string_view text, size_t pos) {
  const auto b = [&](size_t i) {
    return static_cast<char32_t>(static_cast<uint8_t>(text[pos + i]));
  };
  switch (Utf8CharLength(text, pos)) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  std::string buf;
  std::string_view s = bytes;
  if (!pending_.empty()) {
    buf = std::move(pending_);
    buf.append(bytes);
    s = buf;
  }
  pending_.clear();
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    switch (Classify(s, pos, &len)) {
      case Step::kValid:
        out.append(s.substr(pos, len));
        break;
      case Step::kInvalid:
        out.append(kReplacement);
        break;
      case Step::kIncomplete:
        pending_.assign(s.substr(pos));
        return out;
    }
    pos += len;
  }
  return out;
}

std::string Utf8StreamDecoder::Flush() {
  const bool had = !pending_.empty();
  pending_.clear();
  return had ? std::string(kReplacement) : std::string();
}

}  // namespace rpa
