// JsonValue: a minimal, strict JSON (RFC 8259) reader for the CLI's small config files
// (the KV scales file, docs/kv-scales.md), plus the two writer helpers they need. No JSON
// library is installed for C++ here, and the files are a few KiB, so a tree of values is
// enough.
//
// Strict means: exactly one value, surrounded only by whitespace; no comments, trailing
// commas, single quotes, NaN/Infinity, leading zeros or '+' signs; raw control characters
// inside strings rejected; \uXXXX escapes (surrogate pairs included) decoded to UTF-8;
// duplicate object keys rejected (a file saying two things is an error, not a choice);
// nesting at most kMaxDepth deep. Errors throw rpa::InvalidArgument with line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rpa::cli {

class JsonValue {
 public:
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  static constexpr int kMaxDepth = 64;

  // Parses `text`. Throws InvalidArgument "bad JSON at line L, column C: <why>".
  static JsonValue Parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors; each REQUIRES the matching kind (throws InvalidArgument otherwise).
  bool boolean() const;
  // The number as written, parsed to the nearest double.
  double number() const;
  // The number's text as written (e.g. to parse it straight to float, avoiding a double
  // rounding through double).
  const std::string& number_text() const;
  const std::string& string() const;
  const std::vector<JsonValue>& array() const;
  // Members in file order.
  const std::vector<std::pair<std::string, JsonValue>>& object() const;
  // The member named `key`, or null if absent. REQUIRES: is_object().
  const JsonValue* Find(std::string_view key) const;

  // "null", "boolean", "number", "string", "array", "object" (for error messages).
  static std::string_view KindName(Kind kind);

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string text_;  // the string, or the number's text
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

// `s` as a JSON string literal, quotes included; control characters, '"' and '\' escaped.
std::string JsonQuote(std::string_view s);

// The shortest decimal text that reads back as exactly `x` (std::to_chars). REQUIRES: x
// finite (JSON has no NaN/Infinity; throws InvalidArgument otherwise).
std::string JsonFloat(float x);

}  // namespace rpa::cli
