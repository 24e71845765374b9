// KvAmaxBackend and the calibration driver on a tiny random decoder, against an independent
// double-precision forward pass written here from the architecture's formulas (embedding,
// RMSNorm, projections, QK-norm, NEOX RoPE, causal / sliding-window GQA attention, sandwich
// norms, SwiGLU); and the layer-attribution assumption (call n belongs to layer n % L).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "layers/attention_backend.h"
#include "layers/kv_amax_backend.h"
#include "model/decoder.h"
#include "tools/kv_calibration.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using ::testing::HasSubstr;

// Gemma-like in miniature: QK-norm, sandwich norms, alternating local (window 8) and global
// layers with their own RoPE bases; 3 layers so that a wrong layer attribution shows.
DecoderConfig TinyConfig() {
  DecoderConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.num_layers = 3;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.ffn_dim = 48;
  c.max_context = 128;
  c.norm.eps = 1e-6f;
  c.qk_norm = true;
  c.post_norms = true;
  c.embedding_scale = 1.5f;
  c.local_layer_period = 2;  // layers 0 and 2 local, 1 global
  c.sliding_window = 8;
  c.rope_global.theta = 10000.0f;
  c.rope_local.theta = 500.0f;
  return c;
}

using Mat = std::vector<double>;

void RmsNorm(const DecoderConfig& c, const std::vector<float>& w, double* x, int64_t dim) {
  double ss = 0;
  for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / dim + c.norm.eps);
  for (int64_t i = 0; i < dim; ++i) x[i] = x[i] * r * (c.norm.weight_offset + w[i]);
}

// y [T, out] = x [T, in] · Wᵀ, W [out, in].
Mat Linear(const Mat& x, const std::vector<float>& w, int64_t t, int64_t out, int64_t in) {
  Mat y(t * out, 0.0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

// NEOX halves: pair i is (x[i], x[i + D/2]), angle pos * theta^(-2i/D).
void Rope(const RopeConfig& rope, double* x, int32_t pos, int64_t d) {
  for (int64_t i = 0; i < d / 2; ++i) {
    const double angle = pos / rope.position_scale * std::pow(rope.theta, -2.0 * i / d);
    const double a = x[i], b = x[i + d / 2];
    x[i] = a * std::cos(angle) - b * std::sin(angle);
    x[i + d / 2] = a * std::sin(angle) + b * std::cos(angle);
  }
}

// Runs one sequence (positions 0..T-1) and folds each layer's post-RoPE K and V into
// amax [L][2][Hkv] (0: K, 1: V).
void ReferenceAmax(const DecoderConfig& c, const DecoderWeights& w, const std::vector<int32_t>& tok,
                   std::vector<std::vector<std::vector<double>>>& amax) {
  const int64_t t = static_cast<int64_t>(tok.size()), d = c.d_model, hd = c.head_dim;
  const int64_t hq = c.num_q_heads, hkv = c.num_kv_heads, f = c.ffn_dim;
  Mat x(t * d);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t i = 0; i < d; ++i) x[r * d + i] = w.embedding[tok[r] * d + i] * c.embedding_scale;
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& lw = w.layers[l];
    Mat h = x;
    for (int64_t r = 0; r < t; ++r) RmsNorm(c, lw.attn_norm, &h[r * d], d);
    Mat q = Linear(h, lw.attention.wq, t, hq * hd, d);
    Mat k = Linear(h, lw.attention.wk, t, hkv * hd, d);
    Mat v = Linear(h, lw.attention.wv, t, hkv * hd, d);
    const RopeConfig& rope = c.IsLocal(l) ? c.rope_local : c.rope_global;
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t j = 0; j < hq; ++j) {
        RmsNorm(c, lw.attention.q_norm, &q[(r * hq + j) * hd], hd);
        Rope(rope, &q[(r * hq + j) * hd], static_cast<int32_t>(r), hd);
      }
      for (int64_t j = 0; j < hkv; ++j) {
        RmsNorm(c, lw.attention.k_norm, &k[(r * hkv + j) * hd], hd);
        Rope(rope, &k[(r * hkv + j) * hd], static_cast<int32_t>(r), hd);
        for (int64_t i = 0; i < hd; ++i) {
          amax[l][0][j] = std::max(amax[l][0][j], std::fabs(k[(r * hkv + j) * hd + i]));
          amax[l][1][j] = std::max(amax[l][1][j], std::fabs(v[(r * hkv + j) * hd + i]));
        }
      }
    }
    Mat attn(t * hq * hd, 0.0);
    const double sm = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t r = 0; r < t; ++r) {
      const int64_t lo = c.IsLocal(l) ? std::max<int64_t>(0, r - c.sliding_window + 1) : 0;
      for (int64_t j = 0; j < hq; ++j) {
        const int64_t g = j / (hq / hkv);
        std::vector<double> s;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t p = lo; p <= r; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i)
            dot += q[(r * hq + j) * hd + i] * k[(p * hkv + g) * hd + i];
          s.push_back(dot * sm);
          m = std::max(m, s.back());
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - m));
        for (int64_t p = lo; p <= r; ++p) {
          for (int64_t i = 0; i < hd; ++i) {
            attn[(r * hq + j) * hd + i] += s[p - lo] / z * v[(p * hkv + g) * hd + i];
          }
        }
      }
    }
    Mat y = Linear(attn, lw.attention.wo, t, d, hq * hd);
    for (int64_t r = 0; r < t; ++r) RmsNorm(c, lw.post_attention_norm, &y[r * d], d);
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
    h = x;
    for (int64_t r = 0; r < t; ++r) RmsNorm(c, lw.ffn_norm, &h[r * d], d);
    Mat gate = Linear(h, lw.mlp.gate, t, f, d), up = Linear(h, lw.mlp.up, t, f, d);
    for (int64_t i = 0; i < t * f; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    y = Linear(gate, lw.mlp.down, t, d, f);
    for (int64_t r = 0; r < t; ++r) RmsNorm(c, lw.post_ffn_norm, &y[r * d], d);
    for (int64_t i = 0; i < t * d; ++i) x[i] += y[i];
  }
}

std::vector<int32_t> Text(int n, int seed) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (seed * 13 + i * 7 + (i * i) % 11) % 50;
  return t;
}

TEST(KvAmax, MatchesAnIndependentForwardPerLayerAndHead) {
  const DecoderConfig c = TinyConfig();
  const DecoderWeights weights = RandomDecoderWeights(c, 7);
  KernelBackend kernel;
  KvAmaxBackend observer(kernel, c.num_layers);
  Decoder decoder(c, RandomDecoderWeights(c, 7), &observer);

  const std::vector<int32_t> text = Text(100, 3);
  KvCalibrationOptions options;
  options.ctx = 24;  // 4 whole chunks (96 tokens), window 8 exercised
  options.max_tokens = 1000;
  options.bos_token = 1;
  const auto chunks = CalibrationChunks(text, options);
  ASSERT_EQ(chunks.size(), 4u);
  int32_t last_done = 0;
  ObserveKvAmax(decoder, observer, chunks, [&](int32_t done, int32_t total) {
    EXPECT_EQ(total, 4);
    last_done = done;
  });
  EXPECT_EQ(last_done, 4);
  EXPECT_EQ(observer.calls(), 4 * c.num_layers);  // one prefill per chunk

  std::vector<std::vector<std::vector<double>>> ref(
      c.num_layers, std::vector<std::vector<double>>(2, std::vector<double>(c.num_kv_heads, 0.0)));
  for (const auto& chunk : chunks) ReferenceAmax(c, weights, chunk, ref);

  // Tolerance: rpa runs in f32, the reference in double. A dot product of n <= 48 terms
  // is off by <= n u sum|x w| (u = 2^-24, ~3e-6 relative for unit-scale rows), RoPE angles
  // by <= u * pos; three layers of attention and MLP compound this by a small factor.
  // 1e-4 relative is ~30x the one-layer estimate, and ~1000x below the gaps between the
  // amax of different layers and heads checked below (so a mix-up cannot hide in it).
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerKvAmax& got = observer.layers()[l];
    EXPECT_EQ(got.tokens, 4 * 24);
    EXPECT_FALSE(got.kv_shared);
    for (int h = 0; h < c.num_kv_heads; ++h) {
      EXPECT_NEAR(got.k[h], ref[l][0][h], 1e-4 * ref[l][0][h]) << "layer " << l << " head " << h;
      EXPECT_NEAR(got.v[h], ref[l][1][h], 1e-4 * ref[l][1][h]) << "layer " << l << " head " << h;
    }
  }
  // The observations are distinct across layers (attribution is testable).
  for (int32_t a = 0; a < c.num_layers; ++a) {
    for (int32_t b = a + 1; b < c.num_layers; ++b) {
      EXPECT_GT(std::fabs(ref[a][1][0] - ref[b][1][0]), 1e-2 * ref[a][1][0]) << a << " " << b;
    }
  }

  // The scales file from these observations: amax / 448, per-head amax kept.
  const KvScalesFile file = MakeKvScalesFile(observer, decoder.info(), "fp8_e4m3");
  ASSERT_EQ(file.layers.size(), 3u);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerKvAmax& got = observer.layers()[l];
    EXPECT_EQ(file.layers[l].k_amax, std::max(got.k[0], got.k[1]));
    EXPECT_EQ(file.layers[l].k_scale, file.layers[l].k_amax / 448.0f);
    EXPECT_EQ(file.layers[l].v_amax_per_head, got.v);
  }
}

// Records what identifies a layer in each call: its window (local layers only).
class WindowRecorder final : public AttentionBackend {
 public:
  explicit WindowRecorder(AttentionBackend& next) : next_(next) {}
  void Run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cache,
           const AttentionMetadata& m, const AttentionOptions& o, const TensorView& out) override {
    windows.push_back(o.sliding_window);
    next_.Run(q, k, v, cache, m, o, out);
  }
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& cache, const AttentionMetadata& m,
                    const AttentionOptions& o, const TensorView& out) override {
    windows.push_back(o.sliding_window);
    next_.RunWithPlans(plans, q, k, v, cache, m, o, out);
  }
  std::vector<std::optional<int32_t>> windows;

 private:
  AttentionBackend& next_;
};

// The assumption KvAmaxBackend and FakeQuantBackend rest on (Decoder::Forward loops over its
// layers in order, one backend call each): seen through the calls' windows, which differ
// between local and global layers, over several forward passes of the engine.
TEST(KvAmax, CallNBelongsToLayerNModL) {
  DecoderConfig c = TinyConfig();
  c.num_layers = 5;  // local, global, local, global, local
  KernelBackend kernel;
  WindowRecorder recorder(kernel);
  KvAmaxBackend observer(recorder, c.num_layers);
  Decoder decoder(c, RandomDecoderWeights(c, 2), &observer);
  KvCalibrationOptions options;
  options.ctx = 10;
  options.max_tokens = 30;
  ObserveKvAmax(decoder, observer, CalibrationChunks(Text(40, 1), options));
  ASSERT_EQ(recorder.windows.size(), 15u);  // 3 forward passes x 5 layers
  for (size_t n = 0; n < recorder.windows.size(); ++n) {
    const int32_t layer = static_cast<int32_t>(n % 5);
    EXPECT_EQ(recorder.windows[n], c.IsLocal(layer) ? std::optional<int32_t>(8) : std::nullopt)
        << "call " << n;
  }
}

// A backend that does nothing (the observer is tested alone).
class NullBackend final : public AttentionBackend {
 public:
  void Run(const TensorView&, const TensorView&, const TensorView&, const TensorView&,
           const AttentionMetadata&, const AttentionOptions&, const TensorView&) override {}
};

TEST(KvAmax, IgnoresRowsPastTheScheduledTokensAndKeepsNaN) {
  NullBackend null;
  KvAmaxBackend observer(null, 2);
  // 4 rows, 1 head, D 2; only cu_q_lens[num_seqs] = 2 rows are tokens.
  std::vector<float> k = {1, -3, 2, 0.5f, 100, 100, 100, 100};
  std::vector<float> v = {-0.25f, 0, 0.5f, 0, -100, 100, 100, 100};
  const TensorView kt = TensorView::Contiguous(k.data(), DType::kFloat32, {4, 1, 2});
  const TensorView vt = TensorView::Contiguous(v.data(), DType::kFloat32, {4, 1, 2});
  const std::vector<int32_t> kv_lens = {2}, pages = {0}, cu = {0, 2}, dist = {0, 1, 1};
  const AttentionMetadata m{kv_lens, pages, cu, dist};
  AttentionOptions o;
  observer.Run(kt, kt, vt, kt, m, o, kt);
  EXPECT_EQ(observer.layers()[0].k, std::vector<float>{3.0f});
  EXPECT_EQ(observer.layers()[0].v, std::vector<float>{0.5f});
  EXPECT_EQ(observer.layers()[0].tokens, 2);
  o.update_kv_cache = false;  // the second layer reads a donor's cache
  k[0] = std::numeric_limits<float>::quiet_NaN();
  observer.Run(kt, kt, vt, kt, m, o, kt);
  EXPECT_TRUE(std::isnan(observer.layers()[1].k[0]));
  EXPECT_TRUE(observer.layers()[1].kv_shared);
  EXPECT_FALSE(observer.layers()[0].kv_shared);
  observer.Reset();
  EXPECT_EQ(observer.calls(), 0);
  EXPECT_TRUE(observer.layers()[1].k.empty());
}

TEST(KvCalibration, ChunksAsTheEvaluationCutsThem) {
  KvCalibrationOptions o;
  o.ctx = 4;
  o.max_tokens = 9;  // two whole chunks
  o.bos_token = 99;
  const auto chunks = CalibrationChunks(Text(30, 0), o);
  ASSERT_EQ(chunks.size(), 2u);
  const std::vector<int32_t> t = Text(30, 0);
  EXPECT_EQ(chunks[1], (std::vector<int32_t>{99, t[5], t[6], t[7]}));
  o.max_tokens = 3;
  EXPECT_THAT([&] { CalibrationChunks(t, o); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("less than one chunk")));
  o.max_tokens = 100;
  EXPECT_THAT(
      [&] {
        CalibrationChunks(std::vector<int32_t>{1, 2}, o);
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("fewer than one chunk of 4")));
}

}  // namespace
}  // namespace rpa::cli
