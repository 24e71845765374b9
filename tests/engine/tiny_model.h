// A tiny random-weight decoder for engine tests: real layers, real kernel, small enough
// that a whole workload runs in milliseconds.
#pragma once

#include <memory>
#include <string_view>

#include "engine/engine.h"
#include "layers/kv_cache_config.h"
#include "model/decoder.h"

namespace rpa::testing {

inline DecoderConfig TinyDecoderConfig() {
  DecoderConfig c;
  c.vocab_size = 96;
  c.d_model = 64;
  c.num_layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 128;
  c.max_context = 512;
  c.norm.eps = 1e-5f;
  c.rope_global.theta = 10000.0f;
  c.rope_local = c.rope_global;
  return c;
}

inline std::unique_ptr<Decoder> MakeTinyDecoder(uint64_t seed = 1,
                                                AttentionBackend* backend = nullptr) {
  const DecoderConfig c = TinyDecoderConfig();
  return std::make_unique<Decoder>(c, RandomDecoderWeights(c, seed), backend);
}

inline KvCacheConfig TinyKvConfig(std::string_view kv_cache_dtype) {
  return KvCacheConfig::Parse(kv_cache_dtype, DType::kFloat32, TinyDecoderConfig().num_layers);
}

// Prompt i of a workload: deterministic, varied lengths and contents.
inline std::vector<int32_t> TestPrompt(int i, int len) {
  std::vector<int32_t> p(len);
  for (int j = 0; j < len; ++j) p[j] = (i * 31 + j * 7 + (i * j) % 5) % 96;
  return p;
}

}  // namespace rpa::testing
