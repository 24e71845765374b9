// LayerKvCache: one attention layer's view of the paged KV cache. Non-owning: the storage
// belongs to the KV-cache manager (src/kv/), which hands each layer this view per step.
// A KV-shared layer is given its donor's view.
#pragma once

#include "layers/kv_cache_config.h"
#include "numerics/dtype.h"
#include "numerics/tensor_view.h"

namespace rpa {

struct LayerKvCache {
  // [NP, PS, 2*Hkv, D] in the cache dtype; slot 2h = K of kv-head h, 2h+1 = V of h.
  TensorView pages;
  // Used only when the cache dtype is fp8: K/V are stored as x / scale.
  KvScales scales;

  DType dtype() const { return pages.dtype; }
};

}  // namespace rpa
