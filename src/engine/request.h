// Requests as the engine sees them, and what it reports back.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace rpa {

enum class FinishReason : uint8_t {
  kNone,    // still running
  kEos,     // emitted the model's EOS token
  kStop,    // emitted one of the request's stop tokens
  kLength,  // reached max_tokens
};
std::string_view FinishReasonName(FinishReason reason);

// One generated token, as streamed to a request's callback.
struct TokenEvent {
  int64_t request_id = 0;
  int32_t token = 0;
  int32_t index = 0;  // 0 for the first generated token
  FinishReason finish = FinishReason::kNone;  // != kNone on the request's last token
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct RequestResult {
  int64_t request_id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  FinishReason finish = FinishReason::kNone;
  int32_t num_preemptions = 0;  // times its pages were taken back and it was recomputed
};

}  // namespace rpa
