// AttentionConfig::rotate_qk / DecoderConfig::rotate_qk: the Walsh-Hadamard rotation of
// query and key heads after RoPE (src/layers/hadamard.h).
// * The layer dispatches H·q and H·k (checked against an explicit matrix built here).
// * Over an f32 cache, rotation on and off give the same attention output within a bound
//   derived from the rotation's and the kernel's f32 roundings.
// * Over an fp8 cache, on keys with outlier channels, the logit error q·(k̂ - k) is smaller
//   with the rotation, by the ratio the relative-rounding model predicts.
// * The decoder with rotation agrees with the decoder without (f32 cache), and its fp8 path
//   is bit-identical to FakeQuantBackend's rotation emulation (what rpa kv-sensitivity
//   --rotate-qk measures).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/engine.h"
#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/fake_quant_backend.h"
#include "layers/kv_cache_config.h"
#include "model/decoder.h"
#include "numerics/convert.h"
#include "tests/layers/serving_test_util.h"
#include "util/error.h"

namespace rpa {
namespace {

using test::CacheStorage;
using test::RecordingBackend;
using test::ServingBatch;

constexpr double kU = 0x1p-24;  // f32 unit roundoff

std::vector<float> AsF32(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / DTypeSize(dtype));
  Convert(dtype, bytes.data(), DType::kFloat32, out.data(), out.size());
  return out;
}

// (-1)^popcount(i & j) / sqrt(d): Sylvester's Hadamard matrix, independent of the FWHT.
double H(int64_t i, int64_t j, int64_t d) {
  return ((std::popcount(static_cast<uint64_t>(i & j)) % 2) ? -1.0 : 1.0) / std::sqrt(1.0 * d);
}

// Largest L2 norm of a row of d elements.
double MaxRowNorm(const std::vector<float>& x, int64_t d) {
  double best = 0;
  for (size_t r = 0; r < x.size() / d; ++r) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += 1.0 * x[r * d + i] * x[r * d + i];
    best = std::max(best, std::sqrt(s));
  }
  return best;
}

double MaxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, 1.0 * std::fabs(v));
  return m;
}

AttentionConfig RotationConfig(bool rotate) {
  AttentionConfig c;
  c.d_model = 48;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.qk_norm = true;
  c.rotate_qk = rotate;
  return c;
}

TEST(QkRotation, NeedsAPowerOfTwoHeadDim) {
  AttentionConfig c = RotationConfig(true);
  c.head_dim = 24;
  KernelBackend kernel;
  EXPECT_THROW(Attention(c, test::RandomWeights(c, 1), kernel), InvalidArgument);
}

// Two steps over one f32 cache: prefills (5 and 7 tokens), then one decode token each,
// reading the keys the prefill stored (rotated or not).
TEST(QkRotation, F32CacheOutputMatchesUnrotatedWithinRoundingBound) {
  const ServingBatch prefill({{5, 5}, {7, 7}}, 4), decode({{1, 6}, {1, 8}}, 4);
  ASSERT_EQ(prefill.num_pages(), decode.num_pages());  // same page mapping (serving_test_util.h)
  const AttentionConfig off_c = RotationConfig(false), on_c = RotationConfig(true);
  const int64_t hq = off_c.num_q_heads, hkv = off_c.num_kv_heads, d = off_c.head_dim;
  const AttentionWeights w = test::RandomWeights(off_c, 11);
  KernelBackend kernel;
  RecordingBackend off_rec(&kernel), on_rec(&kernel);
  Attention off(off_c, w, off_rec), on(on_c, w, on_rec);
  CacheStorage off_cache(DType::kFloat32, prefill.num_pages(), 4, hkv, d);
  CacheStorage on_cache(DType::kFloat32, prefill.num_pages(), 4, hkv, d);
  off_cache.FillNaN();
  on_cache.FillNaN();
  LayerKvCache off_lc = off_cache.layer_cache(), on_lc = on_cache.layer_cache();

  std::vector<std::vector<float>> off_out, on_out;
  for (const ServingBatch* b : {&prefill, &decode}) {
    const int64_t t = b->num_tokens();
    std::vector<uint8_t> x = test::RandomHidden(t, off_c.d_model, DType::kFloat32, 1.0f, 5 + t);
    const TensorView xv = TensorView::Contiguous(x.data(), DType::kFloat32, {t, off_c.d_model});
    std::vector<float> y_off(t * off_c.d_model), y_on(t * off_c.d_model);
    off.ForwardServe(xv, b->positions(), b->batch(), off_lc,
                     TensorView::Contiguous(y_off.data(), DType::kFloat32, {t, off_c.d_model}));
    on.ForwardServe(xv, b->positions(), b->batch(), on_lc,
                    TensorView::Contiguous(y_on.data(), DType::kFloat32, {t, off_c.d_model}));
    off_out.push_back(y_off);
    on_out.push_back(y_on);
  }
  ASSERT_EQ(off_rec.calls.size(), 2u);
  ASSERT_EQ(on_rec.calls.size(), 2u);

  // What was dispatched: H·x per head, each element within hadamard.h's bound.
  const double c = (std::countr_zero(static_cast<uint64_t>(d)) + 3) * kU;
  double q_norm = 0, k_norm = 0, v_max = 0;
  for (int step = 0; step < 2; ++step) {
    const test::RecordedCall &a = off_rec.calls[step], &b = on_rec.calls[step];
    for (auto [plain_bytes, rotated_bytes] : {std::pair{&a.q, &b.q}, std::pair{&a.k, &b.k}}) {
      const std::vector<float> x = AsF32(DType::kFloat32, *plain_bytes);
      const std::vector<float> y = AsF32(DType::kFloat32, *rotated_bytes);
      for (size_t r = 0; r < x.size() / d; ++r) {
        double abs_sum = 0;
        for (int64_t i = 0; i < d; ++i) abs_sum += std::fabs(x[r * d + i]);
        for (int64_t j = 0; j < d; ++j) {
          double ref = 0;
          for (int64_t i = 0; i < d; ++i) ref += x[r * d + i] * H(i, j, d);
          ASSERT_NEAR(y[r * d + j], ref, c * abs_sum / std::sqrt(1.0 * d)) << "row " << r;
        }
      }
    }
    EXPECT_EQ(a.v, b.v);  // V is not rotated
    q_norm = std::max(q_norm, MaxRowNorm(AsF32(DType::kFloat32, a.q), d));
    k_norm = std::max(k_norm, MaxRowNorm(AsF32(DType::kFloat32, a.k), d));
    v_max = std::max(v_max, MaxAbs(AsF32(DType::kFloat32, a.v)));
  }

  // The bound on an output element. Logits s = sm·q·k: the rotated operands are off by
  // <= c·|x|₂ per element (Σ|x|/sqrt(D) <= |x|₂), so the rotated dot is off by
  // <= 2·c·sqrt(D)·|q||k| (Σ_j |Hk_j| <= sqrt(D)|k|); each run's kernel dot adds
  // <= (D + 2)·u·|q||k|. A logit shift of at most δ moves Σ_j|Δp_j| by <= 2δ(1 + 2δ), so
  // attention outputs by <= 2δ(1+2δ)·max|v|, plus each run's own softmax/accumulation
  // roundings (<= (kv_len + 16)·u·max|v| each, exp included, generously). Wo (rows of
  // |Wo|-sum <= rowsum) carries that to the output, plus each run's matmul rounding
  // (<= Hq·D·u·rowsum·max|attn|, max|attn| <= max|v|).
  const double sm = 1.0 / std::sqrt(1.0 * d);
  const double delta = sm * (2 * c * std::sqrt(1.0 * d) + 2 * (d + 2) * kU) * q_norm * k_norm;
  const int kv_len = 8;
  const double attn_bound = 2 * delta * (1 + 2 * delta) * v_max + 2 * (kv_len + 16) * kU * v_max;
  double rowsum = 0;
  for (int64_t i = 0; i < off_c.d_model; ++i) {
    double s = 0;
    for (int64_t j = 0; j < hq * d; ++j) s += std::fabs(w.wo[i * hq * d + j]);
    rowsum = std::max(rowsum, s);
  }
  const double bound = rowsum * (attn_bound + 2 * hq * d * kU * v_max);
  double out_max = 0, diff_max = 0;
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < off_out[step].size(); ++i) {
      ASSERT_TRUE(std::isfinite(on_out[step][i]));
      EXPECT_NEAR(on_out[step][i], off_out[step][i], bound) << "step " << step << " elem " << i;
      out_max = std::max(out_max, 1.0 * std::fabs(off_out[step][i]));
      diff_max = std::max(diff_max, 1.0 * std::fabs(on_out[step][i] - off_out[step][i]));
    }
  }
  // Not vacuous: a wrong rotation (e.g. of q alone) moves outputs by O(out_max).
  EXPECT_LT(bound, 1e-3 * out_max);
  EXPECT_GT(diff_max, 0.0);  // the rotated path really computed something else
}

// Keys whose two RoPE-paired channels (5 and 5 + D/2) are ~24x the others, queries likewise,
// over an fp8 e4m3 cache with scale 1. fp8 rounds each element relatively (relative error
// δ_i, roughly independent, of similar RMS whatever the value), so the logit error
// Σ_i q_i k_i δ_i has RMS ∝ sqrt(Σ q_i² k_i²): the prediction for the ratio rotated /
// unrotated is sqrt(Σ (Hq)_i² (Hk)_i² / Σ q_i² k_i²) over all (query, key) pairs of a head.
// The RMS of δ varies by up to ~2x with where values sit in their binade (and values under
// 2^-6 are subnormal), so the measured ratio must match the prediction within 2x.
TEST(QkRotation, Fp8LogitErrorShrinksOnOutlierChannels) {
  AttentionConfig c;
  c.d_model = 64;
  c.num_q_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  const int64_t d = c.head_dim, t = 48;
  AttentionWeights w = test::RandomWeights(c, 3);
  for (int64_t h = 0; h < c.num_q_heads; ++h) {
    for (int64_t ch : {5, 5 + 32}) {
      for (int64_t i = 0; i < c.d_model; ++i) w.wq[(h * d + ch) * c.d_model + i] *= 24.0f;
    }
  }
  for (int64_t ch : {5, 5 + 32}) {
    for (int64_t i = 0; i < c.d_model; ++i) w.wk[ch * c.d_model + i] *= 24.0f;
  }
  const ServingBatch b({{static_cast<int32_t>(t), static_cast<int32_t>(t)}}, 16);
  std::vector<uint8_t> x = test::RandomHidden(t, c.d_model, DType::kFloat32, 1.0f, 9);
  const TensorView xv = TensorView::Contiguous(x.data(), DType::kFloat32, {t, c.d_model});

  // Returns the dispatched q and k (k decoded from fp8 codes, scale 1) as f32.
  auto run = [&](bool rotate, DType cache_dtype, std::vector<float>& q, std::vector<float>& k) {
    AttentionConfig cc = c;
    cc.rotate_qk = rotate;
    RecordingBackend rec;  // records, writes zeros: only the dispatched tensors matter here
    Attention layer(cc, w, rec);
    CacheStorage cache(cache_dtype, b.num_pages(), 16, c.num_kv_heads, d);
    LayerKvCache lc = cache.layer_cache(KvScales{1.0f, 1.0f});
    std::vector<float> y(t * c.d_model);
    layer.ForwardServe(xv, b.positions(), b.batch(), lc,
                       TensorView::Contiguous(y.data(), DType::kFloat32, {t, c.d_model}));
    ASSERT_EQ(rec.calls.size(), 1u);
    q = AsF32(rec.calls[0].q_dtype, rec.calls[0].q);
    k = AsF32(rec.calls[0].k_dtype, rec.calls[0].k);  // fp8 decode is exact; scale 1
  };
  double err2[2], pred2[2];
  for (int rotate = 0; rotate < 2; ++rotate) {
    std::vector<float> q, k, q_fp8, k_hat;
    run(rotate, DType::kFloat32, q, k);
    run(rotate, DType::kFloat8E4M3FN, q_fp8, k_hat);
    ASSERT_EQ(q, q_fp8);
    ASSERT_NE(k, k_hat);
    err2[rotate] = pred2[rotate] = 0;
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < t; ++j) {
          double e = 0;
          for (int64_t ch = 0; ch < d; ++ch) {
            const double qi = q[(i * c.num_q_heads + h) * d + ch], kj = k[j * d + ch];
            e += qi * (k_hat[j * d + ch] - kj);
            pred2[rotate] += qi * qi * kj * kj;
          }
          err2[rotate] += e * e;
        }
      }
    }
  }
  const double measured = std::sqrt(err2[1] / err2[0]);
  const double predicted = std::sqrt(pred2[1] / pred2[0]);
  EXPECT_LT(predicted, 0.35);  // the keys really have outlier channels
  EXPECT_LT(measured, 0.5);
  EXPECT_GT(measured, predicted / 2);
  EXPECT_LT(measured, predicted * 2);
}

// --- The decoder (through the engine: chunked prefill, then decode steps reading the cache).

class LogitsRecorder final : public CausalLm {
 public:
  explicit LogitsRecorder(Decoder& d) : d_(d) {}
  const ModelInfo& info() const override { return d_.info(); }
  void Forward(const StepInput& in, const KvCacheStorage& cache, const KvCacheConfig& kv,
               std::span<float> logits) override {
    d_.Forward(in, cache, kv, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  std::vector<float> all;

 private:
  Decoder& d_;
};

DecoderConfig TinyDecoder(bool rotate) {
  DecoderConfig c;
  c.vocab_size = 64;
  c.d_model = 48;
  c.num_layers = 3;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_dim = 96;
  c.max_context = 256;
  c.norm.eps = 1e-5f;
  c.qk_norm = true;
  c.rotate_qk = rotate;
  return c;
}

// Logits of two greedy requests (a 45-token prompt in two chunks, a 17-token one, 6 new
// tokens each).
std::vector<float> RunEngine(bool rotate, AttentionBackend* backend, const KvCacheConfig& kv) {
  const DecoderConfig c = TinyDecoder(rotate);
  Decoder decoder(c, RandomDecoderWeights(c, 21), backend);
  LogitsRecorder model(decoder);
  EngineConfig config;
  config.max_num_seqs = 2;
  config.max_num_batched_tokens = 32;
  config.kv_cache_bytes = 4 << 20;
  config.warmup = false;
  Engine engine(model, kv, config);
  SamplingParams p;
  p.max_tokens = 6;
  p.ignore_eos = true;
  std::vector<int32_t> a(45), bb(17);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i * 5 + 3) % 64;
  for (size_t i = 0; i < bb.size(); ++i) bb[i] = (i * 11 + 1) % 64;
  engine.AddRequest(a, p);
  engine.AddRequest(bb, p);
  engine.RunUntilDone();
  return model.all;
}

// f32 cache: the rotation changes only roundings. Per layer the attention output moves by
// a few times sqrt(D)·log2(D)·u relative (the layer test above derives it: ~1e-6 here);
// three layers of O(1) gain (random weights with unit-variance projections, norms) and the
// LM head keep that within ~1e-5 of the logits' scale; 1e-4 leaves a 10x margin while a
// wrong rotation (e.g. q rotated but not k) moves logits by O(1).
TEST(QkRotation, DecoderWithF32CacheAgreesWithUnrotated) {
  const KvCacheConfig f32 = KvCacheConfig::Parse("auto", DType::kFloat32, 3);
  const std::vector<float> off = RunEngine(false, nullptr, f32);
  const std::vector<float> on = RunEngine(true, nullptr, f32);
  ASSERT_EQ(off.size(), on.size());
  ASSERT_GE(off.size(), 64u * 12);
  const double scale = MaxAbs(off);
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_NEAR(on[i], off[i], 1e-4 * scale) << "logit " << i;
  }
  EXPECT_NE(off, on);  // not the same code path by accident
}

// The fp8 serving path with rotate_qk is what FakeQuantBackend(rotate_qk) emulates over an
// f32 cache: both rotate the same f32 q/k with the same transform, and fake_quant_backend.h
// establishes bit-identity of the quantization for power-of-two scales.
TEST(QkRotation, Fp8DecoderMatchesFakeQuantRotationEmulationBitForBit) {
  const std::vector<KvScales> s = {{0.25f, 0.5f}, {0.0625f, 2.0f}, {1.0f, 0.125f}};
  KvCacheConfig fp8 = KvCacheConfig::Parse("fp8_e4m3", DType::kFloat32, 3);
  for (int l = 0; l < 3; ++l) fp8.SetScales(l, s[l]);
  const KvCacheConfig f32 = KvCacheConfig::Parse("auto", DType::kFloat32, 3);
  const std::vector<float> real = RunEngine(true, nullptr, fp8);
  KernelBackend kernel;
  FakeQuantBackend fake(kernel, fp8.dtype(), {true, true, true}, true, true, fp8,
                        /*rotate_qk=*/true);
  const std::vector<float> emulated = RunEngine(false, &fake, f32);
  ASSERT_EQ(real.size(), emulated.size());
  ASSERT_GE(real.size(), 64u * 12);
  EXPECT_EQ(std::memcmp(real.data(), emulated.data(), real.size() * sizeof(float)), 0);
  const std::vector<float> unrotated = RunEngine(false, nullptr, fp8);
  EXPECT_NE(real, unrotated);  // the rotation changed what fp8 rounds
}

}  // namespace
}  // namespace rpa
