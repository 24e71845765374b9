// GoogleTest glue for ragged paged attention: runs one case through the kernel and checks
// it against the float64 reference (outputs within the derived bound, the cache bit-exact,
// inputs untouched, canaries intact).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tests/kernels/rpa_cases.h"

namespace rpa::testing {

// How a check calls the kernel: the public entry point by default; tests of the plan API
// pass their own. The views are the problem's own buffers and `output`.
using AttentionCall = std::function<void(RpaProblem& problem, const TensorView& output)>;

// The public entry point, RaggedPagedAttention, on the problem's buffers.
void CallPublicEntryPoint(RpaProblem& problem, const TensorView& output);

// Builds the case, runs `call` and EXPECTs everything the contract promises. Returns the
// output check (for logging or further assertions).
OutputCheck ExpectKernelMatchesReference(const RpaCase& spec,
                                         const AttentionCall& call = CallPublicEntryPoint);

// gtest parameter names: the case's name.
struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<RpaCase>& info) const {
    return info.param.name;
  }
};

}  // namespace rpa::testing
