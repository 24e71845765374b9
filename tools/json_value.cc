#include "tools/json_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace rpa::cli {

// A recursive-descent parser over the text; `pos_` is the next unread byte.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  JsonValue ParseDocument() {
    SkipSpace();
    JsonValue v = ParseValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void Fail(std::string_view why) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw InvalidArgument(Concat("bad JSON at line ", line, ", column ", column, ": ", why));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  void Expect(char c) {
    if (Peek() != c || AtEnd()) Fail(Concat("expected '", c, "'"));
    ++pos_;
  }

  void ExpectWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) Fail(Concat("expected '", word, "'"));
    pos_ += word.size();
  }

  JsonValue ParseValue(int depth) {
    if (depth >= JsonValue::kMaxDepth) Fail("nesting deeper than 64 levels");
    JsonValue v;
    switch (Peek()) {
      case '{':
        ParseObject(v, depth);
        break;
      case '[':
        ParseArray(v, depth);
        break;
      case '"':
        v.kind_ = JsonValue::Kind::kString;
        v.text_ = ParseString();
        break;
      case 't':
        ExpectWord("true");
        v.kind_ = JsonValue::Kind::kBool;
        v.bool_ = true;
        break;
      case 'f':
        ExpectWord("false");
        v.kind_ = JsonValue::Kind::kBool;
        break;
      case 'n':
        ExpectWord("null");
        break;
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
          ParseNumber(v);
        } else {
          Fail(AtEnd() ? "unexpected end of text" : "expected a value");
        }
    }
    return v;
  }

  void ParseObject(JsonValue& v, int depth) {
    v.kind_ = JsonValue::Kind::kObject;
    Expect('{');
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      SkipSpace();
      if (Peek() != '"') Fail("expected a member name in double quotes");
      const size_t key_pos = pos_;
      std::string key = ParseString();
      if (v.Find(key) != nullptr) {
        pos_ = key_pos;
        Fail(Concat("duplicate member \"", key, "\""));
      }
      SkipSpace();
      Expect(':');
      SkipSpace();
      JsonValue member = ParseValue(depth + 1);
      v.object_.emplace_back(std::move(key), std::move(member));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect('}');
      return;
    }
  }

  void ParseArray(JsonValue& v, int depth) {
    v.kind_ = JsonValue::Kind::kArray;
    Expect('[');
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      SkipSpace();
      v.array_.push_back(ParseValue(depth + 1));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect(']');
      return;
    }
  }

  // The grammar of RFC 8259 §6 checked by hand; the value by from_chars (locale-free).
  void ParseNumber(JsonValue& v) {
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
      if (Peek() >= '0' && Peek() <= '9') Fail("leading zeros are not allowed in numbers");
    } else if (digits() == 0) {
      Fail("expected a digit");
    }
    if (Peek() == '.') {
      ++pos_;
      if (digits() == 0) Fail("expected a digit after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (digits() == 0) Fail("expected a digit in the exponent");
    }
    v.kind_ = JsonValue::Kind::kNumber;
    v.text_ = std::string(text_.substr(start, pos_ - start));
    const auto [end, ec] =
        std::from_chars(v.text_.data(), v.text_.data() + v.text_.size(), v.number_);
    if (ec != std::errc() || end != v.text_.data() + v.text_.size()) {
      pos_ = start;
      Fail(Concat("number ", v.text_, " is out of range"));
    }
  }

  uint32_t ParseHex4() {
    if (pos_ + 4 > text_.size()) Fail("truncated \\u escape");
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= c - '0';
      else if (c >= 'a' && c <= 'f')
        u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        u |= c - 'A' + 10;
      else
        Fail("bad hex digit in \\u escape");
    }
    return u;
  }

  static void AppendUtf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string ParseString() {
    Expect('"');
    std::string out;
    while (true) {
      if (AtEnd()) Fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) Fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      const char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = ParseHex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) Fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") Fail("high surrogate without its low half");
            pos_ += 2;
            const uint32_t lo = ParseHex4();
            if (lo < 0xDC00 || lo > 0xDFFF) Fail("high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          --pos_;
          Fail("unknown escape in a string");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

JsonValue JsonValue::Parse(std::string_view text) { return JsonParser(text).ParseDocument(); }

std::string_view JsonValue::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kNumber:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kObject:
      return "object";
  }
  return "?";
}

namespace {

void Require(const JsonValue& v, JsonValue::Kind kind) {
  if (v.kind() != kind) {
    throw InvalidArgument(Concat("JSON value is a ", JsonValue::KindName(v.kind()), ", not a ",
                                 JsonValue::KindName(kind)));
  }
}

}  // namespace

bool JsonValue::boolean() const {
  Require(*this, Kind::kBool);
  return bool_;
}
double JsonValue::number() const {
  Require(*this, Kind::kNumber);
  return number_;
}
const std::string& JsonValue::number_text() const {
  Require(*this, Kind::kNumber);
  return text_;
}
const std::string& JsonValue::string() const {
  Require(*this, Kind::kString);
  return text_;
}
const std::vector<JsonValue>& JsonValue::array() const {
  Require(*this, Kind::kArray);
  return array_;
}
const std::vector<std::pair<std::string, JsonValue>>& JsonValue::object() const {
  Require(*this, Kind::kObject);
  return object_;
}
const JsonValue* JsonValue::Find(std::string_view key) const {
  Require(*this, Kind::kObject);
  for (const auto& [k, v] : object_) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonFloat(float x) {
  if (!std::isfinite(x)) throw InvalidArgument(Concat("cannot write ", x, " in JSON"));
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  RPA_CHECK(ec == std::errc());
  return std::string(buf, end);
}

}  // namespace rpa::cli
