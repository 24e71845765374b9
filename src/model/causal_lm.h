// CausalLm: what the engine needs from a model. One forward pass over a ragged step
// (decode tokens and prefill chunks of many sequences together), reading and writing the
// paged KV cache, returning next-token logits for the rows the engine asks for.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_spec.h"
#include "kv/kv_cache_storage.h"
#include "layers/kv_cache_config.h"
#include "layers/ragged_batch.h"

namespace rpa {

struct ModelInfo {
  int32_t vocab_size = 0;
  int32_t max_context = 0;  // longest sequence (prompt + generated) the model supports
  int32_t bos_token = -1;   // -1: none
  int32_t eos_token = -1;   // -1: none
  // The cache's geometry; page_size and dtype are left for the engine to choose.
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  std::vector<int32_t> kv_donor;  // see KvCacheSpec::kv_donor
};

// One step's input. All spans are in caller memory and stay valid during Forward().
struct StepInput {
  std::span<const int32_t> tokens;     // [T] token ids, sequence after sequence
  std::span<const int32_t> positions;  // [T] absolute positions
  RaggedBatch batch;                   // kernel metadata (cu_q_lens index into tokens)
  // Rows of `tokens` whose next-token logits are wanted (typically each sequence's last).
  std::span<const int32_t> logit_rows;
};

class CausalLm {
 public:
  virtual ~CausalLm() = default;

  virtual const ModelInfo& info() const = 0;

  // Runs the step. logits: [logit_rows.size(), vocab_size] f32. `cache` holds the storage
  // of every layer, `kv_config` its dtype and per-layer scales. Throws InvalidArgument on
  // bad input (the kernel's messages for bad metadata or a dtype mismatch).
  virtual void Forward(const StepInput& input, const KvCacheStorage& cache,
                       const KvCacheConfig& kv_config, std::span<float> logits) = 0;
};

}  // namespace rpa
