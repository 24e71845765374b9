// AlignedBuffer: a growable, uninitialized, 64-byte aligned array of trivially copyable T.
//
// Kernels keep one per worker as scratch and call Reserve() before each work item; after
// the first call of a given size it never allocates again.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace rpa {

template <typename T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr size_t kAlignment = 64;  // a cache line; also the widest SIMD vector

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { Reserve(n); }

  // Ensures capacity for n elements; contents are not preserved when it grows.
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    const size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<T*>(p));
    capacity_ = n;
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace rpa
