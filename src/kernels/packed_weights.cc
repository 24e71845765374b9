#include "kernels/packed_weights.h"

#include <cstring>
#include <vector>

#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {
namespace {

// Position of panel column j (< 32) within one K step of the panel (see the header).
size_t SlotOf(size_t j, WeightFormat format) {
  return format == WeightFormat::kFloat32 ? j : (j % 16) * 2 + j / 16;
}

}  // namespace

WeightFormat ParseWeightFormat(std::string_view name) {
  if (name == "f32" || name == "float32") return WeightFormat::kFloat32;
  if (name == "bf16" || name == "bfloat16") return WeightFormat::kBFloat16;
  throw InvalidArgument(
      Concat("Unknown weight format \"", name, "\"; expected one of: bf16, f32"));
}

std::string_view WeightFormatName(WeightFormat format) {
  return format == WeightFormat::kFloat32 ? "float32" : "bfloat16";
}

size_t WeightFormatBytes(WeightFormat format) {
  return format == WeightFormat::kFloat32 ? 4 : 2;
}

PackedWeights::PackedWeights(const float* w, size_t n, size_t k, WeightFormat format)
    : n_(n), k_(k), format_(format) {
  data_ = hwy::AllocateAligned<uint8_t>(std::max<size_t>(bytes(), 1));
  std::memset(data_.get(), 0, bytes());
  // One panel at a time through an f32 staging buffer in the final element order, then
  // (bf16) one bulk RNE conversion: the rounding is numerics' Convert, tested exhaustively.
  std::vector<float> staging(kPanelCols * k);
  if (staging.empty()) return;  // K = 0: no bytes (and memcpy from a null data())
  for (size_t p = 0; p < num_panels(); ++p) {
    std::fill(staging.begin(), staging.end(), 0.0f);
    for (size_t j = 0; j < kPanelCols && p * kPanelCols + j < n; ++j) {
      const float* row = w + (p * kPanelCols + j) * k;
      // Slot of column j within a K step.
      const size_t slot = SlotOf(j, format);
      for (size_t i = 0; i < k; ++i) staging[i * kPanelCols + slot] = row[i];
    }
    if (format == WeightFormat::kFloat32) {
      std::memcpy(const_cast<void*>(panel(p)), staging.data(), staging.size() * sizeof(float));
    } else {
      Convert(DType::kFloat32, staging.data(), DType::kBFloat16, const_cast<void*>(panel(p)),
              staging.size());
    }
  }
}

void PackedWeights::Row(size_t j, float* out) const {
  const size_t p = j / kPanelCols, slot = SlotOf(j % kPanelCols, format_);
  if (format_ == WeightFormat::kFloat32) {
    const float* src = static_cast<const float*>(panel(p)) + slot;
    for (size_t i = 0; i < k_; ++i) out[i] = src[i * kPanelCols];
  } else {
    const uint16_t* src = static_cast<const uint16_t*>(panel(p)) + slot;
    for (size_t i = 0; i < k_; ++i) {
      const uint32_t bits = static_cast<uint32_t>(src[i * kPanelCols]) << 16;
      std::memcpy(out + i, &bits, sizeof(float));
    }
  }
}

}  // namespace rpa
