// PackedWeights: a projection's weight matrix w [N, K] (nn.Linear / GGUF layout, one row per
// output) repacked once, at load time, into the layout MatMul streams.
//
// Layout: the N outputs are cut into panels of kPanelCols = 32 consecutive columns of y
// (rows of w); a panel stores its 32 weights of k = 0, 1, ..., K-1 one after the other,
// so MatMul reads each panel front to back as one sequential stream and every K step
// yields the 32 weights of one row of x's broadcast. The last panel is zero-padded.
//   float32:  panel[k * 32 + j]          = w[32 p + j, k]
//   bfloat16: panel[k * 32 + 2 i]        = w[32 p + i, k]        (i < 16)
//             panel[k * 32 + 2 i + 1]    = w[32 p + 16 + i, k]
// bf16 pairs columns i and i + 16 in one 32-bit word, so a vector of words widens to two
// f32 vectors (columns i and i + 16) with one shift and one mask, no shuffles, on every
// vector width up to 16 lanes.
//
// Formats: float32 keeps the dequantized GGUF weights exactly; bfloat16 (round to nearest
// even) halves the bytes a memory-bound decode step streams. See docs/weights.md for the
// measurements behind the default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hwy/aligned_allocator.h"

namespace rpa {

enum class WeightFormat { kFloat32, kBFloat16 };

// "f32"/"float32" or "bf16"/"bfloat16"; throws InvalidArgument naming the accepted values.
WeightFormat ParseWeightFormat(std::string_view name);
std::string_view WeightFormatName(WeightFormat format);
size_t WeightFormatBytes(WeightFormat format);

class PackedWeights {
 public:
  static constexpr size_t kPanelCols = 32;

  PackedWeights() = default;
  // Packs w [n, k] (row-major, contiguous). REQUIRES: w holds n * k floats.
  PackedWeights(const float* w, size_t n, size_t k, WeightFormat format);

  size_t rows() const { return n_; }  // N, outputs
  size_t cols() const { return k_; }  // K, inputs
  WeightFormat format() const { return format_; }
  size_t num_panels() const { return (n_ + kPanelCols - 1) / kPanelCols; }
  // Bytes of weights stored (padding included): what one pass over the matrix reads.
  size_t bytes() const { return num_panels() * kPanelCols * k_ * WeightFormatBytes(format_); }
  bool empty() const { return n_ == 0; }

  // out[0..K) = row j of w as stored (bf16 widened exactly). For lookups such as an
  // embedding tied to the LM head. REQUIRES: j < rows(), out holds cols() floats.
  void Row(size_t j, float* out) const;

  // The first element of panel p (float or uint16_t bf16 bits, by format()).
  const void* panel(size_t p) const {
    return data_.get() + p * kPanelCols * k_ * WeightFormatBytes(format_);
  }

 private:
  size_t n_ = 0, k_ = 0;
  WeightFormat format_ = WeightFormat::kFloat32;
  hwy::AlignedFreeUniquePtr<uint8_t[]> data_;
};

}  // namespace rpa
