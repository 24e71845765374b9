// Runs a test body once per SIMD target that this CPU supports and this binary compiled,
// forcing HWY_DYNAMIC_DISPATCH to pick that target, so every dispatched path is tested
// (not only the best one). Restores normal dispatch afterwards.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "hwy/targets.h"

namespace rpa::test {

template <class Body>
void ForEachSupportedTarget(const Body& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace rpa::test
