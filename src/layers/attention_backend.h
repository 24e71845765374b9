// AttentionBackend: where a layer's attention step is dispatched. Production uses
// KernelBackend (rpa's ragged_paged_attention); tests substitute a recording fake to see
// exactly what the serving path hands to the kernel.
#pragma once

#include "kernels/ragged_paged_attention.h"
#include "numerics/tensor_view.h"

namespace rpa {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // Same arguments and contract as RaggedPagedAttention (rpa-contract.md): keys/values
  // [T, Hkv, D] in the cache dtype, kv_cache [NP, PS, 2*Hkv, D], output [T, Hq, D].
  virtual void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                   const TensorView& kv_cache, const AttentionMetadata& metadata,
                   const AttentionOptions& options, const TensorView& output) = 0;
};

// The real kernel.
class KernelBackend final : public AttentionBackend {
 public:
  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override;
};

}  // namespace rpa
