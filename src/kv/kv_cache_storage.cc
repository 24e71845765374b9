#include "kv/kv_cache_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kv/memory_budget.h"
#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {
namespace {

// Fills `bytes` bytes at `dst` with copies of the `elem_size`-byte pattern.
// REQUIRES: bytes % elem_size == 0.
void FillPattern(std::byte* dst, size_t bytes, const std::byte* pattern, size_t elem_size) {
  if (bytes == 0) return;
  std::memcpy(dst, pattern, elem_size);
  // Doubling copies: O(log n) memcpy calls, each a memory stream.
  size_t done = elem_size;
  while (done < bytes) {
    const size_t n = std::min(done, bytes - done);
    std::memcpy(dst + done, dst, n);
    done += n;
  }
}

}  // namespace

void KvCacheStorage::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

KvCacheStorage::KvCacheStorage(const KvCacheSpec& spec, int32_t num_pages,
                               const KvCacheStorageOptions& options)
    : spec_(spec), num_pages_(num_pages) {
  spec_.Validate();
  if (num_pages <= 0) {
    throw InvalidArgument(Concat("KvCacheStorage num_pages=", num_pages, " must be positive"));
  }
  const uint64_t per_page = spec_.BytesPerPagePerLayer();
  if (static_cast<uint64_t>(num_pages) >
      (std::numeric_limits<size_t>::max() - kAlignment) / per_page) {
    throw InvalidArgument(Concat("KvCacheStorage: num_pages=", num_pages, " x ", per_page,
                                 " bytes per page overflows size_t"));
  }
  layer_bytes_ = static_cast<size_t>(per_page) * static_cast<size_t>(num_pages);
  // aligned_alloc wants a size that is a multiple of the alignment. Plain pages: a
  // 2 MiB-aligned, MADV_HUGEPAGE-backed cache made DRAM-bound decode slower here
  // (bench-attention 8/8/128 fp8 ctx 8K / 16K, calls alternated: 0.89x / 0.84x).
  const size_t alloc_bytes = (layer_bytes_ + kAlignment - 1) / kAlignment * kAlignment;

  std::byte pattern[sizeof(float)] = {};
  const size_t elem_size = DTypeSize(spec_.dtype);
  if (options.fill == KvCacheStorageOptions::Fill::kNaN) {
    StoreFromF32(spec_.dtype, std::numeric_limits<float>::quiet_NaN(), pattern);
  }

  buffer_of_layer_.assign(static_cast<size_t>(spec_.num_layers), -1);
  for (int32_t l = 0; l < spec_.num_layers; ++l) {
    if (!spec_.OwnsStorage(l)) continue;
    Buffer buf(static_cast<std::byte*>(std::aligned_alloc(kAlignment, alloc_bytes)));
    if (!buf) {
      throw InvalidArgument(
          Concat("Cannot allocate the KV cache of layer ", l, ": ", FormatBytes(alloc_bytes), " (",
                 alloc_bytes, " bytes; ",
                 FormatBytes(alloc_bytes * static_cast<size_t>(spec_.NumStorageLayers())),
                 " for all layers)"));
    }
    if (options.fill == KvCacheStorageOptions::Fill::kZero) {
      std::memset(buf.get(), 0, layer_bytes_);
    } else {
      FillPattern(buf.get(), layer_bytes_, pattern, elem_size);
    }
    buffer_of_layer_[l] = static_cast<int32_t>(buffers_.size());
    buffers_.push_back(std::move(buf));
  }
  for (int32_t l = 0; l < spec_.num_layers; ++l) {
    if (!spec_.OwnsStorage(l)) buffer_of_layer_[l] = buffer_of_layer_[spec_.StorageLayer(l)];
  }
}

TensorView KvCacheStorage::Layer(int32_t layer) const {
  if (layer < 0 || layer >= spec_.num_layers) {
    throw InvalidArgument(
        Concat("KvCacheStorage::Layer: layer=", layer, " is outside [0, ", spec_.num_layers, ")"));
  }
  return TensorView::Contiguous(
      buffers_[buffer_of_layer_[layer]].get(), spec_.dtype,
      {num_pages_, spec_.page_size, 2 * int64_t{spec_.num_kv_heads}, spec_.head_dim});
}

}  // namespace rpa
