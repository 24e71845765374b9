// The two real models (scripts/fetch-models) hold what ../shared/docs/MODELS.md §2-3 says.
// Skipped when a model is not fetched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "model/dequant.h"
#include "model/gguf.h"

namespace rpa {
namespace {

std::string ModelPath(const std::string& file) {
  const char* env = std::getenv("RPA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string dir = env && *env ? env : std::string(home ? home : "") + "/.cache/rpa/models";
  return dir + "/" + file;
}

std::map<std::string, int> TypeHistogram(const GgufFile& f) {
  std::map<std::string, int> h;
  for (const GgufTensorInfo& t : f.tensors()) ++h[std::string(GgmlTypeName(t.type))];
  return h;
}

// Every tensor dequantizes to finite values (spot-checks the first and last rows, which
// exercises the data offsets across the whole file).
void ExpectFiniteEdges(const GgufFile& f) {
  for (const GgufTensorInfo& t : f.tensors()) {
    std::vector<float> row(static_cast<size_t>(t.row_length()));
    for (int64_t r : {int64_t{0}, t.num_rows() - 1}) {
      DequantizeRow(t.type, t.row(r), row.data(), t.row_length());
      for (float v : row) ASSERT_TRUE(std::isfinite(v)) << t.name << " row " << r;
    }
  }
}

TEST(GgufModelsTest, SmolLM2) {
  const std::string path = ModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " not fetched (scripts/fetch-models)";
  const GgufFile f = GgufFile::Open(path);
  EXPECT_EQ(f.GetString("general.architecture"), "llama");
  EXPECT_EQ(f.GetU32("llama.block_count"), 30u);
  EXPECT_EQ(f.GetU32("llama.embedding_length"), 576u);
  EXPECT_EQ(f.GetU32("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(f.GetU32("llama.attention.head_count"), 9u);
  EXPECT_EQ(f.GetU32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.GetF32("llama.rope.freq_base"), 100000.f);
  EXPECT_EQ(f.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.GetString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.GetU32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.GetU32("tokenizer.ggml.eos_token_id"), 2u);
  // 30 layers x 7 matrices in Q4_1; embedding Q8_0; 30 x 2 norms + output_norm in F32.
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(TypeHistogram(f),
            (std::map<std::string, int>{{"Q4_1", 210}, {"Q8_0", 1}, {"F32", 61}}));
  const GgufTensorInfo& embd = f.Get("token_embd.weight");
  EXPECT_EQ(embd.type, GgmlType::kQ8_0);
  EXPECT_EQ(embd.ne[0], 576);
  EXPECT_EQ(embd.ne[1], 49152);
  EXPECT_EQ(f.Find("output.weight"), nullptr);  // tied lm_head
  EXPECT_EQ(f.Get("blk.0.attn_k.weight").ne[1], 3 * 64);
  ExpectFiniteEdges(f);
}

TEST(GgufModelsTest, Gemma3) {
  const std::string path = ModelPath("gemma-3-270m-q4_k_m.gguf");
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " not fetched (scripts/fetch-models)";
  const GgufFile f = GgufFile::Open(path);
  EXPECT_EQ(f.GetString("general.architecture"), "gemma3");
  EXPECT_EQ(f.GetU32("gemma3.block_count"), 18u);
  EXPECT_EQ(f.GetU32("gemma3.embedding_length"), 640u);
  EXPECT_EQ(f.GetU32("gemma3.feed_forward_length"), 2048u);
  EXPECT_EQ(f.GetU32("gemma3.attention.head_count"), 4u);
  EXPECT_EQ(f.GetU32("gemma3.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.GetU32("gemma3.attention.key_length"), 256u);
  EXPECT_EQ(f.GetU32("gemma3.attention.sliding_window"), 512u);
  EXPECT_EQ(f.GetF32("gemma3.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens").size(), 262144u);
  EXPECT_EQ(f.GetF32Array("tokenizer.ggml.scores").size(), 262144u);
  EXPECT_EQ(f.GetI32Array("tokenizer.ggml.token_type").size(), 262144u);
  EXPECT_EQ(f.GetU32("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(f.GetU32("tokenizer.ggml.eos_token_id"), 1u);
  EXPECT_TRUE(f.GetBool("tokenizer.ggml.add_bos_token"));
  // Measured with gguf-dump: 18 layers x 7 matrices = 126 quantized (81 Q5_0, 27 Q4_K,
  // 9 Q6_K, 9 Q8_0 attn_v) + token_embd Q8_0; 18 x 6 norms + output_norm in F32.
  EXPECT_EQ(f.tensors().size(), 236u);
  EXPECT_EQ(TypeHistogram(f),
            (std::map<std::string, int>{
                {"F32", 109}, {"Q5_0", 81}, {"Q4_K", 27}, {"Q8_0", 10}, {"Q6_K", 9}}));
  const GgufTensorInfo& embd = f.Get("token_embd.weight");
  EXPECT_EQ(embd.type, GgmlType::kQ8_0);
  EXPECT_EQ(embd.ne[0], 640);
  EXPECT_EQ(embd.ne[1], 262144);
  EXPECT_EQ(f.Find("output.weight"), nullptr);
  for (const char* name : {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight",
                           "blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"}) {
    EXPECT_EQ(f.Get(name).type, GgmlType::kF32) << name;
  }
  ExpectFiniteEdges(f);
}

}  // namespace
}  // namespace rpa
