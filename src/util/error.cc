#include "util/error.h"

#include <cstdio>
#include <cstdlib>

namespace rpa {

void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "rpa: internal check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace rpa
