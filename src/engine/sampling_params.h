// Per-request sampling parameters and their validation.
#pragma once

#include <cstdint>
#include <vector>

namespace rpa {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax); otherwise logits / temperature
  int32_t top_k = 0;         // 0 = off; else keep the k most likely tokens
  float top_p = 1.0f;        // nucleus: smallest set whose probability mass >= top_p
  uint64_t seed = 0;         // per-request stream: same seed + same logits = same tokens
  int32_t max_tokens = 16;   // tokens to generate, >= 1
  std::vector<int32_t> stop_tokens;  // generation ends after emitting any of these
  bool ignore_eos = false;           // keep going past the model's EOS token

  bool greedy() const { return temperature == 0.0f; }
};

// Throws rpa::InvalidArgument naming the bad field (temperature < 0 or not finite,
// top_k < 0, top_p outside (0, 1], max_tokens < 1, stop token outside [0, vocab_size)).
void ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size);

}  // namespace rpa
