// The model loader on the two real models (scripts/fetch-models): the configuration
// matches ../shared/docs/MODELS.md §2, and SmolLM2 completes a factual prompt through the
// engine. Skipped when a model is not fetched. The logits themselves are checked against
// an independent implementation in tests/python/test_logits_vs_transformers.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/engine.h"
#include "model/gguf.h"
#include "model/model_loader.h"

namespace rpa {
namespace {

std::string ModelPath(const std::string& file) {
  const char* env = std::getenv("RPA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir = env && *env ? env : std::string(home ? home : "") + "/.cache/rpa/models";
  return dir + "/" + file;
}

#define RPA_REQUIRE_MODEL(path) \
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " not fetched (scripts/fetch-models)"

TEST(ModelLoaderModels, SmolLM2Config) {
  const std::string path = ModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  RPA_REQUIRE_MODEL(path);
  const DecoderConfig c = ReadDecoderConfig(GgufFile::Open(path));
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.d_model, 576);
  EXPECT_EQ(c.ffn_dim, 1536);
  EXPECT_EQ(c.num_q_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_context, 8192);
  EXPECT_EQ(c.bos_token, 1);
  EXPECT_EQ(c.eos_token, 2);
  EXPECT_FLOAT_EQ(c.norm.eps, 1e-5f);
  EXPECT_EQ(c.rope_global.style, RopeStyle::kAdjacentPairs);
  EXPECT_EQ(c.rope_global.theta, 100000.0f);
  EXPECT_EQ(c.local_layer_period, 0);
  EXPECT_EQ(c.activation, MlpActivation::kSilu);
}

TEST(ModelLoaderModels, Gemma3Config) {
  const std::string path = ModelPath("gemma-3-270m-q4_k_m.gguf");
  RPA_REQUIRE_MODEL(path);
  const DecoderConfig c = ReadDecoderConfig(GgufFile::Open(path));
  EXPECT_EQ(c.num_layers, 18);
  EXPECT_EQ(c.d_model, 640);
  EXPECT_EQ(c.ffn_dim, 2048);
  EXPECT_EQ(c.num_q_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262144);
  EXPECT_EQ(c.max_context, 32768);
  EXPECT_EQ(c.bos_token, 2);
  EXPECT_EQ(c.eos_token, 1);
  EXPECT_FLOAT_EQ(c.norm.eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(640.0f));
  EXPECT_FLOAT_EQ(*c.sm_scale, 1.0f / 16.0f);
  EXPECT_EQ(c.sliding_window, 512);
  for (int l = 0; l < 18; ++l) EXPECT_EQ(c.IsLocal(l), l % 6 != 5) << "layer " << l;
  EXPECT_EQ(c.rope_global.theta, 1e6f);
  EXPECT_EQ(c.rope_local.theta, 10000.0f);
  EXPECT_EQ(c.rope_global.style, RopeStyle::kNeoxHalves);
  EXPECT_EQ(c.activation, MlpActivation::kGeluTanh);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.qk_norm);
}

// "The capital of France is" -> " Paris": ids from the model's own tokenizer (PyPI
// transformers' GGUF loader), so this needs no rpa tokenizer.
TEST(ModelLoaderModels, SmolLM2KnowsTheCapitalOfFrance) {
  const std::string path = ModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  RPA_REQUIRE_MODEL(path);
  int32_t last_progress = -1;
  LoadedModel m = LoadModel(path, [&](int32_t i, int32_t n) {
    EXPECT_EQ(i, last_progress + 1);
    EXPECT_EQ(n, 30);
    last_progress = i;
  });
  EXPECT_EQ(last_progress, 30);
  EXPECT_EQ(m.architecture, "llama");
  EngineConfig config;
  config.max_num_seqs = 1;
  config.max_num_batched_tokens = 16;
  config.kv_cache_bytes = 16u << 20;
  config.warmup = false;
  for (const char* kv : {"auto", "fp8"}) {
    Engine engine(*m.decoder, KvCacheConfig::Parse(kv, DType::kFloat32, 30), config);
    SamplingParams greedy;
    greedy.max_tokens = 1;
    const int64_t id = engine.AddRequest({504, 3575, 282, 4649, 314}, greedy);
    EXPECT_EQ(engine.RunUntilDone()[id].generated, std::vector<int32_t>{7042}) << kv;
  }
}

}  // namespace
}  // namespace rpa
