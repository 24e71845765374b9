// EngineConfig: the engine's typed settings (strings are parsed at the edge, in tools/).
#pragma once

#include <cstdint>

#include "layers/kv_cache_config.h"

namespace rpa {

struct EngineConfig {
  int32_t max_num_seqs = 32;             // sequences in one step (decode + prefill)
  int32_t max_num_batched_tokens = 512;  // token budget of one step
  int32_t page_size = 16;                // tokens per KV page
  uint64_t kv_cache_bytes = 256ull << 20;  // memory budget of the KV cache, all layers
  bool warmup = true;                    // run the start-up shape/dtype check
  bool nan_fill_cache = false;           // tests: fill the cache with NaN at start
};

}  // namespace rpa
