#include "model/model_loader.h"

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/dequant.h"

namespace rpa {
namespace {

// Gemma 3's layer pattern, which GGUF does not record (llama.cpp hard-codes it too): five
// local layers, then one global.
constexpr int32_t kGemma3LocalLayerPeriod = 6;
// RoPE base of Gemma 3's local layers when the file has no `rope.freq_base_swa`.
constexpr float kGemma3LocalRopeBase = 10000.0f;
// RoPE base when `rope.freq_base` is absent (llama.cpp's default).
constexpr float kDefaultRopeBase = 10000.0f;

// Metadata of one architecture: every key is `<arch>.<suffix>`.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& file, std::string_view arch) : file_(file), arch_(arch) {}

  std::string Key(std::string_view suffix) const { return Concat(arch_, ".", suffix); }

  // A required positive count that fits int32.
  int32_t Count(std::string_view suffix) const {
    const std::string key = Key(suffix);
    return Positive(key, file_.GetU32(key));
  }
  std::optional<int32_t> FindCount(std::string_view suffix) const {
    const std::string key = Key(suffix);
    const std::optional<uint32_t> v = file_.FindU32(key);
    if (!v) return std::nullopt;
    return Positive(key, *v);
  }
  float Float(std::string_view suffix) const { return file_.GetF32(Key(suffix)); }
  std::optional<float> FindFloat(std::string_view suffix) const {
    return file_.FindF32(Key(suffix));
  }
  std::optional<std::string_view> FindString(std::string_view suffix) const {
    return file_.FindString(Key(suffix));
  }
  bool Has(std::string_view suffix) const { return file_.FindKey(Key(suffix)) != nullptr; }

  [[noreturn]] void Fail(std::string_view what) const {
    throw ModelFormatError(Concat(file_.label(), ": ", what));
  }

 private:
  int32_t Positive(const std::string& key, uint32_t v) const {
    if (v == 0 || v > static_cast<uint32_t>(INT32_MAX)) {
      Fail(Concat(key, "=", v, " must be in [1, ", INT32_MAX, "]"));
    }
    return static_cast<int32_t>(v);
  }

  const GgufFile& file_;
  std::string_view arch_;
};

// RoPE's linear position scaling (`rope.scaling.type` linear + `rope.scaling.factor`);
// 1 when the file asks for none. Other scaling types (yarn, longrope) are not implemented.
float RopePositionScale(const ArchKeys& keys) {
  const std::optional<std::string_view> type = keys.FindString("rope.scaling.type");
  if (!type || *type == "none") return 1.0f;
  if (*type != "linear") {
    keys.Fail(Concat(keys.Key("rope.scaling.type"), "=\"", *type,
                     "\" is not supported (only \"none\" and \"linear\")"));
  }
  const float factor = keys.Float("rope.scaling.factor");
  if (!(factor > 0.0f) || !std::isfinite(factor)) {
    keys.Fail(Concat(keys.Key("rope.scaling.factor"), "=", factor, " must be positive"));
  }
  return factor;
}

// The tensor `name`, checked to be a matrix [rows, cols] (ne = {cols, rows}) or, when
// rows < 0, a vector [cols]; and dequantizable.
const GgufTensorInfo& RequireTensor(const GgufFile& file, const std::string& name, int64_t rows,
                                    int64_t cols) {
  const GgufTensorInfo& t = file.Get(name);
  const bool matrix = rows >= 0;
  const bool ok = matrix ? (t.n_dims == 2 && t.ne[0] == cols && t.ne[1] == rows)
                         : (t.n_dims == 1 && t.ne[0] == cols);
  if (!ok) {
    std::string shape;
    for (uint32_t i = 0; i < t.n_dims; ++i) shape += Concat(i ? ", " : "", t.ne[i]);
    throw ModelFormatError(Concat(file.label(), ": tensor ", name, " has ne = {", shape,
                                  "}; the metadata implies {", cols,
                                  matrix ? Concat(", ", rows) : std::string(), "}"));
  }
  if (!IsDequantizable(t.type)) {
    throw ModelFormatError(Concat(file.label(), ": tensor ", name, " has type ",
                                  GgmlTypeName(t.type), ", which rpa cannot dequantize"));
  }
  return t;
}

// [rows, cols] f32, row-major (ggml's ne = {cols, rows}).
std::vector<float> ReadMatrix(const GgufFile& file, const std::string& name, int64_t rows,
                              int64_t cols) {
  return DequantizeTensor(RequireTensor(file, name, rows, cols));
}

std::vector<float> ReadVector(const GgufFile& file, const std::string& name, int64_t n) {
  return DequantizeTensor(RequireTensor(file, name, -1, n));
}

// The options of the two architectures, after the keys they share.
void ReadLlama(const ArchKeys& keys, DecoderConfig& c) {
  c.norm.weight_offset = 0.0f;
  c.activation = MlpActivation::kSilu;
  c.rope_global.style = RopeStyle::kAdjacentPairs;
  c.rope_global.theta = keys.FindFloat("rope.freq_base").value_or(kDefaultRopeBase);
  c.rope_global.position_scale = RopePositionScale(keys);
  c.rope_local = c.rope_global;
}

void ReadGemma3(const ArchKeys& keys, DecoderConfig& c) {
  // The converter stored 1 + w for Gemma's x * (1 + w): use the weights as they are.
  c.norm.weight_offset = 0.0f;
  c.activation = MlpActivation::kGeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.d_model));
  c.post_norms = true;
  c.qk_norm = true;
  // Gemma 3 scales scores by query_pre_attn_scalar^-1/2, which GGUF does not store; it is
  // head_dim for every size but 27B (whose files llama.cpp special-cases).
  c.sm_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.local_layer_period = kGemma3LocalLayerPeriod;
  c.sliding_window = keys.Count("attention.sliding_window");
  c.rope_global.style = RopeStyle::kNeoxHalves;
  c.rope_global.theta = keys.FindFloat("rope.freq_base").value_or(kDefaultRopeBase);
  // Linear scaling (the larger Gemma 3s) stretches the global layers' positions only.
  c.rope_global.position_scale = RopePositionScale(keys);
  c.rope_local.style = RopeStyle::kNeoxHalves;
  c.rope_local.theta = keys.FindFloat("rope.freq_base_swa").value_or(kGemma3LocalRopeBase);
  c.rope_local.position_scale = 1.0f;
  for (const char* cap : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (keys.Has(cap))
      keys.Fail(Concat(keys.Key(cap), " is set; logit soft-capping is not supported"));
  }
}

std::string LayerTensor(int32_t layer, std::string_view what) {
  return Concat("blk.", layer, ".", what, ".weight");
}

}  // namespace

bool IsSupportedArchitecture(std::string_view architecture) {
  return architecture == "llama" || architecture == "gemma3";
}

DecoderConfig ReadDecoderConfig(const GgufFile& file, WeightFormat weights) {
  const std::string_view arch = file.GetString("general.architecture");
  if (!IsSupportedArchitecture(arch)) {
    throw ModelFormatError(Concat(file.label(), ": general.architecture=\"", arch,
                                  "\" is not supported (rpa runs \"llama\" and \"gemma3\")"));
  }
  const ArchKeys keys(file, arch);
  DecoderConfig c;
  c.weight_format = weights;
  c.num_layers = keys.Count("block_count");
  c.d_model = keys.Count("embedding_length");
  c.ffn_dim = keys.Count("feed_forward_length");
  c.max_context = keys.Count("context_length");
  c.num_q_heads = keys.Count("attention.head_count");
  c.num_kv_heads = keys.FindCount("attention.head_count_kv").value_or(c.num_q_heads);
  if (c.num_q_heads % c.num_kv_heads != 0) {
    keys.Fail(Concat(keys.Key("attention.head_count"), "=", c.num_q_heads, " is not a multiple of ",
                     keys.Key("attention.head_count_kv"), "=", c.num_kv_heads));
  }
  const std::optional<int32_t> key_length = keys.FindCount("attention.key_length");
  if (!key_length && c.d_model % c.num_q_heads != 0) {
    keys.Fail(Concat(keys.Key("embedding_length"), "=", c.d_model, " is not a multiple of ",
                     keys.Key("attention.head_count"), "=", c.num_q_heads, " and ",
                     keys.Key("attention.key_length"), " is absent"));
  }
  c.head_dim = key_length.value_or(c.d_model / c.num_q_heads);
  if (c.head_dim % 2 != 0) {
    keys.Fail(Concat("head dimension ", c.head_dim, " is odd; RoPE needs pairs"));
  }
  const int32_t value_length = keys.FindCount("attention.value_length").value_or(c.head_dim);
  if (value_length != c.head_dim) {
    keys.Fail(Concat(keys.Key("attention.value_length"), "=", value_length, " differs from ",
                     "the key length ", c.head_dim, "; rpa's cache stores K and V alike"));
  }
  const int32_t rope_dims = keys.FindCount("rope.dimension_count").value_or(c.head_dim);
  if (rope_dims != c.head_dim) {
    keys.Fail(Concat(keys.Key("rope.dimension_count"), "=", rope_dims,
                     " (partial RoPE) is not supported; the head dimension is ", c.head_dim));
  }
  c.norm.eps = keys.Float("attention.layer_norm_rms_epsilon");
  if (!(c.norm.eps > 0.0f) || !std::isfinite(c.norm.eps)) {
    keys.Fail(
        Concat(keys.Key("attention.layer_norm_rms_epsilon"), "=", c.norm.eps, " must be positive"));
  }

  // The vocabulary is the embedding's row count; `<arch>.vocab_size`, when present, agrees.
  const GgufTensorInfo& embd = file.Get("token_embd.weight");
  if (embd.n_dims != 2 || embd.ne[0] != c.d_model || embd.ne[1] > INT32_MAX) {
    keys.Fail(Concat("tensor token_embd.weight has ne = {", embd.ne[0], ", ", embd.ne[1],
                     "}; expected {", c.d_model, ", vocab}"));
  }
  c.vocab_size = static_cast<int32_t>(embd.ne[1]);
  if (const std::optional<int32_t> v = keys.FindCount("vocab_size"); v && *v != c.vocab_size) {
    keys.Fail(Concat(keys.Key("vocab_size"), "=", *v, " differs from the embedding's ",
                     c.vocab_size, " rows"));
  }
  auto token = [&](const char* key) {
    const std::optional<uint32_t> id = file.FindU32(key);
    if (!id) return -1;
    if (*id >= static_cast<uint32_t>(c.vocab_size)) {
      keys.Fail(Concat(key, "=", *id, " is outside the vocabulary of ", c.vocab_size));
    }
    return static_cast<int32_t>(*id);
  };
  c.bos_token = token("tokenizer.ggml.bos_token_id");
  c.eos_token = token("tokenizer.ggml.eos_token_id");

  if (arch == "llama") {
    ReadLlama(keys, c);
  } else {
    ReadGemma3(keys, c);
  }
  return c;
}

DecoderWeights ReadDecoderWeights(const GgufFile& file, const DecoderConfig& c,
                                  const LoadProgress& progress) {
  const int64_t d = c.d_model, f = c.ffn_dim;
  const int64_t q_width = static_cast<int64_t>(c.num_q_heads) * c.head_dim;
  const int64_t kv_width = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  if (progress) progress(0, c.num_layers);
  DecoderWeights w;
  w.embedding = ReadMatrix(file, "token_embd.weight", c.vocab_size, d);
  w.final_norm = ReadVector(file, "output_norm.weight", d);
  if (file.Find("output.weight") != nullptr) {
    w.lm_head = ReadMatrix(file, "output.weight", c.vocab_size, d);
  }  // else tied: the decoder multiplies by the embedding
  w.layers.reserve(static_cast<size_t>(c.num_layers));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    auto matrix = [&](std::string_view what, int64_t rows, int64_t cols) {
      return ReadMatrix(file, LayerTensor(l, what), rows, cols);
    };
    auto vector = [&](std::string_view what, int64_t n) {
      return ReadVector(file, LayerTensor(l, what), n);
    };
    DecoderLayerWeights lw;
    lw.attn_norm = vector("attn_norm", d);
    lw.ffn_norm = vector("ffn_norm", d);
    if (c.post_norms) {
      lw.post_attention_norm = vector("post_attention_norm", d);
      lw.post_ffn_norm = vector("post_ffw_norm", d);
    }
    lw.attention.wq = matrix("attn_q", q_width, d);
    lw.attention.wk = matrix("attn_k", kv_width, d);
    lw.attention.wv = matrix("attn_v", kv_width, d);
    lw.attention.wo = matrix("attn_output", d, q_width);
    if (c.qk_norm) {
      lw.attention.q_norm = vector("attn_q_norm", c.head_dim);
      lw.attention.k_norm = vector("attn_k_norm", c.head_dim);
    }
    lw.mlp.gate = matrix("ffn_gate", f, d);
    lw.mlp.up = matrix("ffn_up", f, d);
    lw.mlp.down = matrix("ffn_down", d, f);
    w.layers.push_back(std::move(lw));
    if (progress) progress(l + 1, c.num_layers);
  }
  return w;
}

LoadedModel LoadModel(const std::string& path, const LoadProgress& progress,
                      WeightFormat weights) {
  return LoadModel(GgufFile::Open(path), progress, weights, /*rotate_qk=*/false);
}

LoadedModel LoadModel(const GgufFile& file, const LoadProgress& progress, WeightFormat weights,
                      bool rotate_qk) {
  LoadedModel m;
  DecoderConfig config = ReadDecoderConfig(file, weights);
  config.rotate_qk = rotate_qk;
  m.architecture = std::string(file.GetString("general.architecture"));
  m.name = std::string(file.FindString("general.name").value_or(""));
  m.decoder = std::make_unique<Decoder>(config, ReadDecoderWeights(file, config, progress));
  return m;
}

}  // namespace rpa
