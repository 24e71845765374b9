// KvCacheStorage: the KV bytes. One contiguous allocation per layer that owns storage, in
// the kernel's layout (rpa-contract.md §1):
//
//   [NP, PS, 2*Hkv, D] row-major, slot 2h = K of kv head h, slot 2h+1 = V of h
//
// so one page of one layer is PS * 2*Hkv * D contiguous elements and a token's K and V of one
// head are adjacent. Each allocation starts on a 4 KiB boundary (a multiple of the 64-byte
// cache line and of every SIMD width), so page p of a layer starts at a fixed offset from an
// aligned base. A layer that reads a donor's cache (KvCacheSpec::kv_donor) gets the donor's
// view and allocates nothing.
//
// Which page belongs to which sequence is not known here (kv/page_pool.h); views are plain
// non-owning TensorViews valid for the lifetime of this object.
//
// Thread safety: construction and destruction are not thread-safe; once built, Layer() may
// be called from any thread. Writes through the views are the kernels' business: distinct
// pages may be written concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_cache_spec.h"
#include "numerics/tensor_view.h"

namespace rpa {

struct KvCacheStorageOptions {
  enum class Fill : uint8_t {
    kZero,  // every element +0: a deterministic start (the default)
    kNaN,   // the dtype's quiet NaN: tests use it to prove unused slots never leak
  };
  Fill fill = Fill::kZero;
};

class KvCacheStorage {
 public:
  // Alignment of each layer's allocation, in bytes: one 4 KiB memory page.
  static constexpr size_t kAlignment = 4096;

  // Allocates and fills num_pages pages for every storage layer of `spec`. Throws
  // rpa::InvalidArgument if the spec is invalid, num_pages <= 0, or memory cannot be had
  // (the message names the bytes asked for).
  KvCacheStorage(const KvCacheSpec& spec, int32_t num_pages,
                 const KvCacheStorageOptions& options = {});
  KvCacheStorage(const KvCacheStorage&) = delete;
  KvCacheStorage& operator=(const KvCacheStorage&) = delete;
  KvCacheStorage(KvCacheStorage&&) noexcept = default;
  KvCacheStorage& operator=(KvCacheStorage&&) noexcept = default;
  ~KvCacheStorage() = default;

  const KvCacheSpec& spec() const { return spec_; }
  int32_t num_pages() const { return num_pages_; }
  // Bytes of one storage layer's cache: NP * PS * 2*Hkv * D * sizeof(dtype).
  size_t layer_bytes() const { return layer_bytes_; }
  // Bytes of all storage layers together.
  size_t total_bytes() const { return layer_bytes_ * buffers_.size(); }

  // The cache of `layer`, [NP, PS, 2*Hkv, D] in spec().dtype; a shared layer gets its
  // donor's view. Throws rpa::InvalidArgument unless 0 <= layer < num_layers.
  TensorView Layer(int32_t layer) const;

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };
  using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

  KvCacheSpec spec_;
  int32_t num_pages_ = 0;
  size_t layer_bytes_ = 0;
  std::vector<Buffer> buffers_;           // one per storage layer
  std::vector<int32_t> buffer_of_layer_;  // [num_layers] -> index into buffers_
};

}  // namespace rpa
