// KvCacheSpec: the shape of a model's KV cache, and what one token and one page cost.
//
// Every layer that owns storage holds, per token, K and V of every kv head:
// 2 * num_kv_heads * head_dim elements of `dtype` (the contract's [NP, PS, 2*Hkv, D]
// layout, ../shared/docs/rpa-contract.md §1). A layer may instead read an earlier
// layer's cache (KV sharing, as in models that reuse one layer's K/V in later layers);
// such a layer owns no storage and costs nothing.
//
// A plain value type; safe to share between threads once built.
#pragma once

#include <cstdint>
#include <vector>

#include "numerics/dtype.h"

namespace rpa {

struct KvCacheSpec {
  // Marks a layer in `kv_donor` that owns its own cache.
  static constexpr int32_t kOwnsStorage = -1;

  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;  // Hkv
  int32_t head_dim = 0;      // D
  int32_t page_size = 0;     // PS, tokens per page
  DType dtype = DType::kBFloat16;
  // Empty (every layer owns its cache), or [num_layers]: kOwnsStorage, or the index of an
  // earlier layer that owns storage and whose cache this layer reads.
  std::vector<int32_t> kv_donor;

  // Throws rpa::InvalidArgument naming the offending field unless: all sizes > 0, dtype is
  // a KV cache dtype (float32, bfloat16, float8_e4m3fn, float8_e5m2: the contract's list),
  // kv_donor is empty or has num_layers entries, and each donor is an earlier layer that
  // owns storage itself (no chains, so a layer's storage is found in one step).
  void Validate() const;

  // Returns true iff `layer` owns storage. REQUIRES: Validate() passed, 0 <= layer < num_layers.
  bool OwnsStorage(int32_t layer) const;
  // The layer whose storage `layer` reads: itself, or its donor.
  int32_t StorageLayer(int32_t layer) const;
  // Number of layers that own storage (<= num_layers).
  int32_t NumStorageLayers() const;

  // Bytes of one token in one storage layer: 2 * Hkv * D * sizeof(dtype).
  uint64_t BytesPerTokenPerLayer() const;
  // Bytes of one token over all layers (shared layers cost nothing).
  uint64_t BytesPerToken() const;
  // Bytes of one page over all layers: BytesPerToken() * page_size.
  uint64_t BytesPerPage() const;
  // Bytes of one page in one storage layer.
  uint64_t BytesPerPagePerLayer() const;

  // The same spec with another cache dtype (for "bfloat16 would hold N" comparisons).
  KvCacheSpec WithDType(DType other) const;
};

// Returns true iff `dtype` may be a KV cache dtype (rpa-contract.md §1).
bool IsKvCacheDType(DType dtype);

}  // namespace rpa
