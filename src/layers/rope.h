// Rotary position embedding (RoPE), applied in place to token-major heads.
//
// Dimension pairs (a, b) of one head are rotated by angle pos * theta^(-2i/D) for pair i
// of D/2:  a' = a cos - b sin,  b' = a sin + b cos. The two layouts in the wild differ
// only in which elements form pair i:
//   kAdjacentPairs (GPT-J / llama.cpp "normal"): (x[2i], x[2i+1])
//   kNeoxHalves    (GPT-NeoX / HF Llama, Gemma):  (x[i],  x[i + D/2])
#pragma once

#include <cstdint>
#include <span>

namespace rpa {

enum class RopeStyle { kAdjacentPairs, kNeoxHalves };

struct RopeConfig {
  RopeStyle style = RopeStyle::kNeoxHalves;
  float theta = 10000.0f;
  // Linear position scaling (positions are divided by it); Gemma 3 global layers use 8.
  float position_scale = 1.0f;
};

// x: [T, H, D] f32, contiguous, rotated in place; positions: [T].
// REQUIRES: D even, positions.size() == T (throws InvalidArgument otherwise).
void ApplyRope(const RopeConfig& config, std::span<const int32_t> positions, float* x,
               int64_t num_tokens, int64_t num_heads, int64_t head_dim);

}  // namespace rpa
