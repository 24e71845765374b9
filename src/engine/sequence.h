// Sequence: the engine's running state of one request. Internal to the engine.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace rpa {

struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int32_t prompt_len = 0;
  SamplingParams params;
  TokenCallback callback;

  int32_t slot = -1;          // page-pool slot while running, else -1
  int32_t num_computed = 0;   // leading tokens whose K/V are in the cache
  int32_t num_preemptions = 0;

  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  // Tokens still to feed through the model; 1 for a sequence in decode.
  int32_t num_pending() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
};

}  // namespace rpa
