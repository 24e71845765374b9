#include "tools/flags.h"

#include <charconv>
#include <cmath>
#include <string>

#include "util/error.h"

namespace rpa::cli {

bool FlagReader::Next() {
  if (next_ >= args_.size()) return false;
  std::string_view word = args_[next_++];
  has_inline_value_ = false;
  const size_t eq = word.find('=');
  if (word.starts_with("--") && eq != std::string_view::npos) {
    inline_value_ = word.substr(eq + 1);
    has_inline_value_ = true;
    word = word.substr(0, eq);
  }
  flag_ = word;
  return true;
}

bool FlagReader::Is(std::string_view name, std::string_view alias) const {
  return flag_ == name || (!alias.empty() && flag_ == alias);
}

std::string_view FlagReader::Value() {
  if (has_inline_value_) return inline_value_;
  if (next_ >= args_.size()) throw InvalidArgument(Concat(flag_, " needs a value"));
  return args_[next_++];
}

int64_t FlagReader::Int(int64_t min, int64_t max) {
  const std::string_view text = Value();
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    throw InvalidArgument(Concat(flag_, " expects an integer in [", min, ", ", max, "], got '",
                                 text, "'"));
  }
  return v;
}

double FlagReader::Float(double min, double max) {
  const std::string_view text = Value();
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < min || v > max) {
    throw InvalidArgument(Concat(flag_, " expects a number in [", min, ", ", max, "], got '",
                                 text, "'"));
  }
  return v;
}

void FlagReader::Unknown() const {
  throw InvalidArgument(Concat("unknown option '", flag_, "' (see --help)"));
}

}  // namespace rpa::cli
