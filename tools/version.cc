#include <hwy/targets.h>

#include <cstdio>

#include "tools/commands.h"

namespace rpa::cli {

int RunVersion(Args) {
  std::printf("rpa %s\n", RPA_VERSION);
  std::printf("simd targets supported by this CPU:");
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) std::printf(" %s", hwy::TargetName(t));
  std::printf("\n");
  return 0;
}

}  // namespace rpa::cli
