// Errors that cross rpa's public entry points.
//
// Every public entry point validates its inputs and throws rpa::InvalidArgument with a
// message naming the offending values. The Python binding maps it to ValueError with the
// same text; the CLI prints the message on one line and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace rpa {

class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Builds a message from streamable parts: throw InvalidArgument(Concat("x=", x, " < 0")).
template <typename... Parts>
std::string Concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// Always-on invariant check (not for hot loops): aborts with file/line on failure,
// because a broken invariant means rpa's own state is corrupt, not the caller's input.
[[noreturn]] void CheckFailed(const char* expr, const char* file, int line);

}  // namespace rpa

#define RPA_CHECK(expr) \
  ((expr) ? static_cast<void>(0) : ::rpa::CheckFailed(#expr, __FILE__, __LINE__))
