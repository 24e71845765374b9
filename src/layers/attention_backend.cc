#include "layers/attention_backend.h"

namespace rpa {

void KernelBackend::Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                        const TensorView& kv_cache, const AttentionMetadata& metadata,
                        const AttentionOptions& options, const TensorView& output) {
  RaggedPagedAttention(queries, keys, values, kv_cache, metadata, options, output);
}

}  // namespace rpa
