// TensorView: the plain (pointer, dtype, shape, strides) view that kernels take as their ABI.
// A view owns nothing; the caller keeps the memory alive for the duration of the call.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "numerics/dtype.h"

namespace rpa {

struct TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};    // shape[0] is the outermost dimension
  std::array<int64_t, kMaxRank> strides{};  // in elements, not bytes

  // A row-major contiguous view. REQUIRES: shape.size() <= kMaxRank.
  static TensorView Contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape);

  int64_t numel() const;
  bool is_contiguous() const;
  size_t byte_size() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  // numpy-style shape text, e.g. "(4, 8, 128)", for error messages.
  std::string shape_str() const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace rpa
