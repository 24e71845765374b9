// The model loader on hand-made GGUF files: every hyper-parameter comes from the metadata,
// every weight lands in its role unchanged (F32 tensors dequantize exactly), and a file
// rpa cannot run fails with a message naming the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/model_loader.h"
#include "tests/model/gguf_builder.h"

namespace rpa {
namespace {

using testing::GgufBuilder;

constexpr uint32_t kF32 = 0;

std::vector<uint8_t> Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A tiny config of either architecture, and random weights for it.
DecoderConfig TinyConfig(bool gemma) {
  DecoderConfig c;
  c.vocab_size = 40;
  c.d_model = 16;
  c.num_layers = gemma ? 7 : 2;  // Gemma: one full period of 6 and one more local layer
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = gemma ? 8 : 4;  // Gemma's key_length differs from d_model / heads
  c.ffn_dim = 24;
  c.post_norms = gemma;
  c.qk_norm = gemma;
  return c;
}

struct TinyFile {
  DecoderConfig config;
  DecoderWeights weights;
  GgufBuilder builder;
  std::vector<uint8_t> bytes;
};

// Writes `w` as F32 tensors with the metadata of `arch`. `edit` may change the builder
// before the (optional) standard tensors and keys are added.
TinyFile MakeFile(bool gemma, bool tied = true,
                  const std::function<void(GgufBuilder&)>& edit = nullptr) {
  TinyFile f;
  f.config = TinyConfig(gemma);
  f.weights = RandomDecoderWeights(f.config, /*seed=*/7);
  if (!tied) f.weights.lm_head = RandomDecoderWeights(f.config, 8).embedding;
  const DecoderConfig& c = f.config;
  const std::string a = gemma ? "gemma3" : "llama";
  GgufBuilder& b = f.builder;
  b.KvString("general.architecture", a)
      .KvString("general.name", "tiny")
      .KvU32(a + ".block_count", c.num_layers)
      .KvU32(a + ".context_length", 256)
      .KvU32(a + ".embedding_length", c.d_model)
      .KvU32(a + ".feed_forward_length", c.ffn_dim)
      .KvU32(a + ".attention.head_count", c.num_q_heads)
      .KvU32(a + ".attention.head_count_kv", c.num_kv_heads)
      .KvF32(a + ".attention.layer_norm_rms_epsilon", gemma ? 1e-6f : 1e-5f)
      .KvF32(a + ".rope.freq_base", gemma ? 1e6f : 1e5f)
      .KvU32("tokenizer.ggml.bos_token_id", 1)
      .KvU32("tokenizer.ggml.eos_token_id", 2);
  if (gemma) {
    b.KvU32(a + ".attention.key_length", c.head_dim)
        .KvU32(a + ".attention.value_length", c.head_dim)
        .KvU32(a + ".attention.sliding_window", 5);
  }
  if (edit) edit(b);
  const int64_t d = c.d_model, f_dim = c.ffn_dim, q = c.num_q_heads * c.head_dim,
                kv = c.num_kv_heads * c.head_dim;
  auto tensor = [&](const std::string& name, const std::vector<float>& v, int64_t rows,
                    int64_t cols) {
    std::vector<int64_t> ne = {cols};
    if (rows >= 0) ne.push_back(rows);
    b.Tensor({name, kF32, ne, Bytes(v)});
  };
  const DecoderWeights& w = f.weights;
  tensor("token_embd.weight", w.embedding, c.vocab_size, d);
  tensor("output_norm.weight", w.final_norm, -1, d);
  if (!tied) tensor("output.weight", w.lm_head, c.vocab_size, d);
  for (int l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& lw = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    tensor(p + "attn_norm.weight", lw.attn_norm, -1, d);
    tensor(p + "ffn_norm.weight", lw.ffn_norm, -1, d);
    if (gemma) {
      tensor(p + "post_attention_norm.weight", lw.post_attention_norm, -1, d);
      tensor(p + "post_ffw_norm.weight", lw.post_ffn_norm, -1, d);
      tensor(p + "attn_q_norm.weight", lw.attention.q_norm, -1, c.head_dim);
      tensor(p + "attn_k_norm.weight", lw.attention.k_norm, -1, c.head_dim);
    }
    tensor(p + "attn_q.weight", lw.attention.wq, q, d);
    tensor(p + "attn_k.weight", lw.attention.wk, kv, d);
    tensor(p + "attn_v.weight", lw.attention.wv, kv, d);
    tensor(p + "attn_output.weight", lw.attention.wo, d, q);
    tensor(p + "ffn_gate.weight", lw.mlp.gate, f_dim, d);
    tensor(p + "ffn_up.weight", lw.mlp.up, f_dim, d);
    tensor(p + "ffn_down.weight", lw.mlp.down, d, f_dim);
  }
  f.bytes = b.Build();
  return f;
}

TEST(ModelLoaderConfig, LlamaHyperParametersComeFromTheMetadata) {
  TinyFile f = MakeFile(/*gemma=*/false);
  const DecoderConfig c = ReadDecoderConfig(GgufFile::Parse(f.bytes, "tiny-llama"));
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_q_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);  // embedding_length / head_count: no key_length in the file
  EXPECT_EQ(c.ffn_dim, 24);
  EXPECT_EQ(c.max_context, 256);
  EXPECT_EQ(c.bos_token, 1);
  EXPECT_EQ(c.eos_token, 2);
  EXPECT_FLOAT_EQ(c.norm.eps, 1e-5f);
  EXPECT_EQ(c.norm.weight_offset, 0.0f);
  EXPECT_EQ(c.activation, MlpActivation::kSilu);
  EXPECT_EQ(c.embedding_scale, 1.0f);
  EXPECT_FALSE(c.post_norms);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.sm_scale.has_value());
  EXPECT_EQ(c.local_layer_period, 0);
  EXPECT_FALSE(c.IsLocal(0));
  EXPECT_EQ(c.rope_global.style, RopeStyle::kAdjacentPairs);
  EXPECT_EQ(c.rope_global.theta, 1e5f);
  EXPECT_EQ(c.rope_global.position_scale, 1.0f);
}

TEST(ModelLoaderConfig, Gemma3HyperParametersComeFromTheMetadata) {
  TinyFile f = MakeFile(/*gemma=*/true);
  const DecoderConfig c = ReadDecoderConfig(GgufFile::Parse(f.bytes, "tiny-gemma"));
  EXPECT_EQ(c.head_dim, 8);  // attention.key_length, not 16 / 4
  EXPECT_FLOAT_EQ(c.norm.eps, 1e-6f);
  // GGUF's Gemma norm weights already hold 1 + w.
  EXPECT_EQ(c.norm.weight_offset, 0.0f);
  EXPECT_EQ(c.activation, MlpActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, 4.0f);  // sqrt(16)
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.qk_norm);
  ASSERT_TRUE(c.sm_scale.has_value());
  EXPECT_FLOAT_EQ(*c.sm_scale, 1.0f / std::sqrt(8.0f));
  EXPECT_EQ(c.sliding_window, 5);
  for (int l = 0; l < 7; ++l) EXPECT_EQ(c.IsLocal(l), l != 5) << "layer " << l;
  EXPECT_EQ(c.rope_global.style, RopeStyle::kNeoxHalves);
  EXPECT_EQ(c.rope_local.style, RopeStyle::kNeoxHalves);
  EXPECT_EQ(c.rope_global.theta, 1e6f);
  EXPECT_EQ(c.rope_local.theta, 10000.0f);  // no rope.freq_base_swa: Gemma 3's default

  TinyFile swa = MakeFile(true, true, [](GgufBuilder& b) {
    b.KvF32("gemma3.rope.freq_base_swa", 20000.0f)
        .KvString("gemma3.rope.scaling.type", "linear")
        .KvF32("gemma3.rope.scaling.factor", 8.0f);
  });
  const DecoderConfig s = ReadDecoderConfig(GgufFile::Parse(swa.bytes));
  EXPECT_EQ(s.rope_local.theta, 20000.0f);
  EXPECT_EQ(s.rope_global.position_scale, 8.0f);  // linear scaling: global layers only
  EXPECT_EQ(s.rope_local.position_scale, 1.0f);
}

void ExpectSameWeights(const DecoderWeights& got, const DecoderWeights& want) {
  EXPECT_EQ(got.embedding, want.embedding);
  EXPECT_EQ(got.final_norm, want.final_norm);
  EXPECT_EQ(got.lm_head, want.lm_head);
  ASSERT_EQ(got.layers.size(), want.layers.size());
  for (size_t l = 0; l < got.layers.size(); ++l) {
    const DecoderLayerWeights &g = got.layers[l], &w = want.layers[l];
    SCOPED_TRACE(::testing::Message() << "layer " << l);
    EXPECT_EQ(g.attn_norm, w.attn_norm);
    EXPECT_EQ(g.ffn_norm, w.ffn_norm);
    EXPECT_EQ(g.post_attention_norm, w.post_attention_norm);
    EXPECT_EQ(g.post_ffn_norm, w.post_ffn_norm);
    EXPECT_EQ(g.attention.wq, w.attention.wq);
    EXPECT_EQ(g.attention.wk, w.attention.wk);
    EXPECT_EQ(g.attention.wv, w.attention.wv);
    EXPECT_EQ(g.attention.wo, w.attention.wo);
    EXPECT_EQ(g.attention.q_norm, w.attention.q_norm);
    EXPECT_EQ(g.attention.k_norm, w.attention.k_norm);
    EXPECT_EQ(g.mlp.gate, w.mlp.gate);
    EXPECT_EQ(g.mlp.up, w.mlp.up);
    EXPECT_EQ(g.mlp.down, w.mlp.down);
  }
}

class ModelLoaderWeights : public ::testing::TestWithParam<bool> {};

// Each tensor lands in its own role: the weights written are the weights read, bit for bit,
// with the lm_head tied (no output.weight) or not; progress reports every layer in order.
TEST_P(ModelLoaderWeights, EveryTensorLandsInItsRole) {
  const bool gemma = GetParam();
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TinyFile f = MakeFile(gemma, tied);
    const GgufFile file = GgufFile::Parse(f.bytes);
    const DecoderConfig c = ReadDecoderConfig(file);
    std::vector<std::pair<int32_t, int32_t>> calls;
    const DecoderWeights w =
        ReadDecoderWeights(file, c, [&](int32_t i, int32_t n) { calls.emplace_back(i, n); });
    ExpectSameWeights(w, f.weights);
    ASSERT_EQ(calls.size(), static_cast<size_t>(c.num_layers + 1));
    for (int32_t i = 0; i <= c.num_layers; ++i) {
      EXPECT_EQ(calls[i], std::make_pair(i, c.num_layers));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelLoaderWeights, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "gemma3" : "llama"; });

TEST(ModelLoader, LoadModelBuildsARunnableDecoderFromAFile) {
  TinyFile f = MakeFile(/*gemma=*/true);
  const std::string path = ::testing::TempDir() + "/rpa_tiny_gemma3.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(f.bytes.data()),
              static_cast<std::streamsize>(f.bytes.size()));
  }
  const LoadedModel m = LoadModel(path);
  std::remove(path.c_str());
  EXPECT_EQ(m.architecture, "gemma3");
  EXPECT_EQ(m.name, "tiny");
  ASSERT_NE(m.decoder, nullptr);
  const ModelInfo& info = m.decoder->info();
  EXPECT_EQ(info.vocab_size, 40);
  EXPECT_EQ(info.num_layers, 7);
  EXPECT_EQ(info.num_kv_heads, 2);
  EXPECT_EQ(info.head_dim, 8);
  EXPECT_EQ(info.max_context, 256);
  EXPECT_EQ(info.bos_token, 1);
  EXPECT_EQ(info.eos_token, 2);
}

// ---- files rpa cannot run -----------------------------------------------------------

void ExpectLoadError(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    const GgufFile file = GgufFile::Parse(bytes, "bad.gguf");
    const DecoderConfig c = ReadDecoderConfig(file);
    ReadDecoderWeights(file, c);
    ADD_FAILURE() << "loaded a file that should fail with \"" << needle << "\"";
  } catch (const ModelFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelLoaderErrors, UnsupportedArchitectureIsNamed) {
  GgufBuilder b;
  b.KvString("general.architecture", "gpt2");
  ExpectLoadError(b.Build(), "general.architecture=\"gpt2\" is not supported");
}

TEST(ModelLoaderErrors, MissingKeysAreNamed) {
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  ExpectLoadError(b.Build(), "llama.block_count");
  GgufBuilder g;
  g.KvString("general.architecture", "gemma3")
      .KvU32("gemma3.block_count", 1)
      .KvU32("gemma3.embedding_length", 16)
      .KvU32("gemma3.feed_forward_length", 24)
      .KvU32("gemma3.context_length", 64)
      .KvU32("gemma3.attention.head_count", 4);
  ExpectLoadError(g.Build(), "gemma3.attention.layer_norm_rms_epsilon");
}

TEST(ModelLoaderErrors, GemmaWithoutSlidingWindowIsRejected) {
  TinyFile f = MakeFile(true);
  // Rebuild without the window: the same file minus one key.
  GgufBuilder b;
  b.KvString("general.architecture", "gemma3")
      .KvU32("gemma3.block_count", 1)
      .KvU32("gemma3.embedding_length", 16)
      .KvU32("gemma3.feed_forward_length", 24)
      .KvU32("gemma3.context_length", 64)
      .KvU32("gemma3.attention.head_count", 4)
      .KvF32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f)
      .Tensor({"token_embd.weight", kF32, {16, 40}, Bytes(f.weights.embedding)});
  ExpectLoadError(b.Build(), "gemma3.attention.sliding_window");
}

TEST(ModelLoaderErrors, InconsistentOrUnsupportedOptionsAreNamed) {
  ExpectLoadError(
      MakeFile(false, true, [](GgufBuilder& b) { b.KvU32("llama.rope.dimension_count", 2); }).bytes,
      "partial RoPE");
  ExpectLoadError(
      MakeFile(false, true, [](GgufBuilder& b) { b.KvString("llama.rope.scaling.type", "yarn"); })
          .bytes,
      "llama.rope.scaling.type=\"yarn\" is not supported");
  ExpectLoadError(
      MakeFile(true, true, [](GgufBuilder& b) { b.KvF32("gemma3.final_logit_softcapping", 30.0f); })
          .bytes,
      "soft-capping");
  ExpectLoadError(
      MakeFile(false, true, [](GgufBuilder& b) { b.KvU32("llama.vocab_size", 41); }).bytes,
      "llama.vocab_size=41 differs from the embedding's 40 rows");
  ExpectLoadError(
      MakeFile(false, true, [](GgufBuilder& b) { b.KvU32("llama.attention.value_length", 6); })
          .bytes,
      "llama.attention.value_length=6 differs from the key length 4");
}

TEST(ModelLoaderErrors, CountsMustBePositiveAndConsistent) {
  GgufBuilder b;
  b.KvString("general.architecture", "llama").KvU32("llama.block_count", 0);
  ExpectLoadError(b.Build(), "llama.block_count=0 must be in [1, ");
  GgufBuilder h;
  h.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 1)
      .KvU32("llama.embedding_length", 16)
      .KvU32("llama.feed_forward_length", 24)
      .KvU32("llama.context_length", 64)
      .KvU32("llama.attention.head_count", 4)
      .KvU32("llama.attention.head_count_kv", 3);
  ExpectLoadError(h.Build(), "llama.attention.head_count=4 is not a multiple of");
}

TEST(ModelLoaderErrors, WrongTensorShapeOrMissingTensorIsNamed) {
  TinyFile f = MakeFile(false);
  // A file whose blk.1.ffn_up has its two dimensions swapped.
  GgufBuilder b;
  const DecoderConfig& c = f.config;
  b.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 1)
      .KvU32("llama.embedding_length", c.d_model)
      .KvU32("llama.feed_forward_length", c.ffn_dim)
      .KvU32("llama.context_length", 64)
      .KvU32("llama.attention.head_count", c.num_q_heads)
      .KvU32("llama.attention.head_count_kv", c.num_kv_heads)
      .KvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .Tensor({"token_embd.weight", kF32, {c.d_model, c.vocab_size}, Bytes(f.weights.embedding)})
      .Tensor({"output_norm.weight", kF32, {c.d_model}, Bytes(f.weights.final_norm)});
  ExpectLoadError(b.Build(), "blk.0.attn_norm.weight");  // missing
  const DecoderLayerWeights& lw = f.weights.layers[0];
  b.Tensor({"blk.0.attn_norm.weight", kF32, {c.d_model}, Bytes(lw.attn_norm)})
      .Tensor({"blk.0.ffn_norm.weight", kF32, {c.d_model}, Bytes(lw.ffn_norm)})
      .Tensor({"blk.0.attn_q.weight", kF32, {c.d_model, 16}, Bytes(lw.attention.wq)})
      .Tensor({"blk.0.attn_k.weight", kF32, {c.d_model, 8}, Bytes(lw.attention.wk)})
      .Tensor({"blk.0.attn_v.weight", kF32, {c.d_model, 8}, Bytes(lw.attention.wv)})
      .Tensor({"blk.0.attn_output.weight", kF32, {16, c.d_model}, Bytes(lw.attention.wo)})
      .Tensor({"blk.0.ffn_gate.weight", kF32, {c.d_model, c.ffn_dim}, Bytes(lw.mlp.gate)})
      .Tensor({"blk.0.ffn_up.weight", kF32, {c.ffn_dim, c.d_model}, Bytes(lw.mlp.up)});
  ExpectLoadError(b.Build(),
                  "tensor blk.0.ffn_up.weight has ne = {24, 16}; the metadata implies {16, 24}");
}

}  // namespace
}  // namespace rpa
