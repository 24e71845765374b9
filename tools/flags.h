// A small command-line flag reader for the `rpa` subcommands: `--name value` or
// `--name=value`, short aliases (`-m`), and typed values with range checks. Errors throw
// rpa::InvalidArgument naming the flag, which main() prints on one line (exit 2).
//
//   FlagReader f(args);
//   while (f.Next()) {
//     if (f.Is("--model", "-m")) model = f.Value();
//     else if (f.Is("-n")) n = f.Int(1, 1 << 20);
//     else f.Unknown();
//   }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tools/commands.h"

namespace rpa::cli {

class FlagReader {
 public:
  explicit FlagReader(Args args) : args_(args) {}

  // Moves to the next flag; returns false when there are no more words.
  bool Next();
  // Returns true iff the current flag is `name` (or its short alias).
  bool Is(std::string_view name, std::string_view alias = {}) const;
  // The current flag's value (the `=value` part or the next word). Throws if missing.
  std::string_view Value();
  int64_t Int(int64_t min, int64_t max);
  double Float(double min, double max);
  // Throws "unknown option" for the current flag.
  [[noreturn]] void Unknown() const;
  std::string_view flag() const { return flag_; }

 private:
  Args args_;
  size_t next_ = 0;
  std::string_view flag_;
  std::string_view inline_value_;
  bool has_inline_value_ = false;
};

}  // namespace rpa::cli
