// FakeQuantBackend: its elementwise emulation against scalar conversions, its selection
// (layers, K / V), and how it relates to the real fp8 path: bit-identical for power-of-two
// scales (attention layer with f32 and bf16 activations; whole decoder through the engine,
// prefill and decode), within a derived bound for other scales (one kernel call).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "kernels/quantize_kv.h"
#include "kernels/ragged_paged_attention.h"
#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/fake_quant_backend.h"
#include "model/decoder.h"
#include "numerics/convert.h"
#include "tests/layers/serving_test_util.h"
#include "util/error.h"

namespace rpa {
namespace {

using test::CacheStorage;
using test::ServingBatch;
using ::testing::HasSubstr;

constexpr float kU = 0x1p-24f;  // f32 unit roundoff

KvCacheConfig Scales(std::vector<KvScales> s) {
  KvCacheConfig c = KvCacheConfig::Parse("fp8", DType::kFloat32, static_cast<int>(s.size()));
  for (size_t l = 0; l < s.size(); ++l) c.SetScales(static_cast<int>(l), s[l]);
  return c;
}

// x -> clip(x / scale) -> fp8 -> f32 -> * scale -> dtype, one element at a time through the
// scalar codec (LoadAsF32 / StoreFromF32), not through QuantizeSpan / Convert.
float ScalarFakeQuant(DType dtype, const void* x, DType fp8, float scale) {
  const float max = static_cast<float>(GetFInfo(fp8).max);
  const float y = std::clamp(LoadAsF32(dtype, x) / scale, -max, max);
  uint8_t code = 0;
  StoreFromF32(fp8, y, &code);
  uint8_t out[4];
  StoreFromF32(dtype, LoadAsF32(fp8, &code) * scale, out);
  return LoadAsF32(dtype, out);
}

TEST(FakeQuantizeSpan, EqualsTheScalarCodecElementwise) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-24, 18);
  std::vector<float> x(4099);  // odd length: SIMD tails
  for (float& e : x) e = std::ldexp(mant(rng), expo(rng));
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e30f, x[3] = -1e30f;  // clipped to +-max * scale
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    std::vector<uint8_t> in(x.size() * DTypeSize(dtype)), out(in.size());
    Convert(DType::kFloat32, x.data(), dtype, in.data(), x.size());
    for (const DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      for (const float scale : {1.0f, 0.125f, 0.0371f, 3.7f}) {
        std::vector<uint8_t> codes;
        std::vector<float> decoded;
        FakeQuantizeSpan(dtype, in.data(), fp8, scale, x.size(), out.data(), codes, decoded);
        for (size_t i = 0; i < x.size(); ++i) {
          const size_t off = i * DTypeSize(dtype);
          ASSERT_EQ(LoadAsF32(dtype, &out[off]), ScalarFakeQuant(dtype, &in[off], fp8, scale))
              << DTypeName(dtype) << " " << DTypeName(fp8) << " scale " << scale << " x " << x[i];
        }
      }
    }
  }
}

// Over a bf16 cache with f32 activations the emulation quantizes bf16(x), the real path x.
// The two codes differ only where bf16(x) / scale sits exactly on an fp8 rounding tie (the
// bf16 rounding moved x onto the midpoint, and ties-to-even may pick the other side), and
// then by one fp8 step. Checked over many values and both formats.
TEST(FakeQuantizeSpan, Bf16InputDiffersFromF32OnlyAtFp8TiesByOneStep) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  const size_t n = 1 << 16;
  std::vector<float> x(n), xb(n);
  for (float& e : x) e = u(rng);
  std::vector<uint16_t> b(n);
  Convert(DType::kFloat32, x.data(), DType::kBFloat16, b.data(), n);
  Convert(DType::kBFloat16, b.data(), DType::kFloat32, xb.data(), n);
  for (const DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    const float scale = 0.125f;
    std::vector<uint8_t> c_f32(n), c_b16(n);
    QuantizeSpan(DType::kFloat32, x.data(), fp8, c_f32.data(), n, scale);
    QuantizeSpan(DType::kBFloat16, b.data(), fp8, c_b16.data(), n, scale);
    int differ = 0;
    for (size_t i = 0; i < n; ++i) {
      if (c_f32[i] == c_b16[i]) continue;
      ++differ;
      const float lo = LoadAsF32(fp8, &c_f32[i]), hi = LoadAsF32(fp8, &c_b16[i]);
      // One step apart (adjacent codes of one sign), and bf16(x)/scale their midpoint.
      ASSERT_EQ(std::abs(int{c_f32[i]} - int{c_b16[i]}), 1) << x[i];
      ASSERT_EQ(xb[i] / scale, (lo + hi) / 2) << x[i];
    }
    // How often: of the 2^7 bf16 values in a binade, 2^m are fp8 ties (m = fp8 mantissa
    // bits: 3 for e4m3fn, 2 for e5m2), and x rounded onto a tie lies on the side that ties-to-
    // even does not pick half the time: a fraction 2^(m-8) = 1/32 (e4m3fn), 1/64 (e5m2).
    // Binomial sd ~ sqrt(n p) = 45 / 32 values; 20% is >= 6 sd.
    const double expected = n * std::ldexp(1.0, GetFInfo(fp8).mantissa_bits - 8);
    EXPECT_NEAR(differ, expected, 0.2 * expected) << DTypeName(fp8);
    RecordProperty(std::string(DTypeName(fp8)) + "_differ_per_65536", differ);
  }
}

// What the inner backend received.
struct Seen {
  std::vector<std::vector<uint8_t>> k, v;
};
class Capture final : public AttentionBackend {
 public:
  void Run(const TensorView&, const TensorView& k, const TensorView& v, const TensorView&,
           const AttentionMetadata&, const AttentionOptions&, const TensorView&) override {
    seen.k.push_back(test::Bytes(k));
    seen.v.push_back(test::Bytes(v));
  }
  Seen seen;
};

TEST(FakeQuantBackend, TouchesOnlyTheSelectedLayersAndTensors) {
  Capture inner;
  const KvCacheConfig scales = Scales({{1, 1}, {0.5f, 2}, {1, 1}});
  FakeQuantBackend fq(inner, DType::kFloat8E4M3FN, {false, true, false}, /*keys=*/true,
                      /*values=*/false, scales);
  std::vector<float> k = {0.3f, -1.7f, 100.0f, 1000.0f}, v = k;  // [T 2, Hkv 1, D 2]
  const TensorView kt = TensorView::Contiguous(k.data(), DType::kFloat32, {2, 1, 2});
  const TensorView vt = TensorView::Contiguous(v.data(), DType::kFloat32, {2, 1, 2});
  const AttentionMetadata m;
  for (int pass = 0; pass < 2; ++pass) {  // two forward passes of 3 layers
    for (int l = 0; l < 3; ++l) fq.Run(kt, kt, vt, kt, m, {}, kt);
  }
  ASSERT_EQ(inner.seen.k.size(), 6u);
  for (int n = 0; n < 6; ++n) {
    EXPECT_EQ(inner.seen.v[n], test::Bytes(vt)) << n;  // values never touched
    if (n % 3 != 1) {
      EXPECT_EQ(inner.seen.k[n], test::Bytes(kt)) << n;
      continue;
    }
    std::vector<float> got(4);
    std::memcpy(got.data(), inner.seen.k[n].data(), 16);
    // e4m3fn with k_scale 0.5: 0.3 -> 0.6 -> 0.625 -> 0.3125; -1.7 -> -3.4 -> -3.5 -> -1.75;
    // 100 -> 200 -> 192 (step 16 in [128, 256): a tie, to the even 192) -> 96;
    // 1000 -> 2000 -> clip 448 -> 224.
    EXPECT_EQ(got, (std::vector<float>{0.3125f, -1.75f, 96.0f, 224.0f})) << n;
  }
}

TEST(FakeQuantBackend, RejectsMisuse) {
  Capture inner;
  const KvCacheConfig two = Scales({{1, 1}, {1, 1}});
  EXPECT_THAT(
      [&] {
        FakeQuantBackend(inner, DType::kBFloat16, {true, true}, true, true, two);
      },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("emulates an fp8 cache")));
  EXPECT_THAT(
      [&] { FakeQuantBackend(inner, DType::kFloat8E5M2, {true}, true, true, two); },
      ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("has 1 entries and the scales 2")));
  FakeQuantBackend fq(inner, DType::kFloat8E5M2, {true, true}, true, true, two);
  std::vector<uint8_t> codes(4);
  const TensorView k8 = TensorView::Contiguous(codes.data(), DType::kFloat8E4M3FN, {2, 1, 2});
  EXPECT_THAT([&] { fq.Run(k8, k8, k8, k8, {}, {}, k8); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("keys.dtype=float8_e4m3fn")));
  std::vector<float> k(4);
  const TensorView kt = TensorView::Contiguous(k.data(), DType::kFloat32, {2, 1, 2});
  AttentionOptions with_scales;
  with_scales.k_scale = 1.0f;
  EXPECT_THROW(fq.Run(kt, kt, kt, kt, {}, with_scales, kt), InvalidArgument);
}

struct Case {
  DType activation;  // the emulation's cache dtype too
  DType fp8;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << DTypeName(c.activation) << " activations, " << DTypeName(c.fp8);
}
class EmulationTest : public ::testing::TestWithParam<Case> {};

TensorView View2(std::vector<uint8_t>& bytes, DType dtype, int64_t t, int64_t w) {
  return TensorView::Contiguous(bytes.data(), dtype, {t, w});
}

// One attention layer (QK-norm, decode + prefill + mixed sequences over prior context):
// the real fp8 path, and the same layer over a cache of the activation dtype through
// FakeQuantBackend. With power-of-two scales every quantity of one run is the other's
// times a power of two (see fake_quant_backend.h), so outputs agree to the bit, and each
// stored value of the emulated cache is the real code decoded times its scale.
TEST_P(EmulationTest, AttentionLayerBitIdenticalForPowerOfTwoScales) {
  const Case tc = GetParam();
  AttentionConfig c;
  c.d_model = 48;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.qk_norm = true;
  c.activation_dtype = tc.activation;
  const AttentionWeights w = test::RandomWeights(c, 11);
  const ServingBatch b({{1, 9}, {5, 5}, {3, 11}}, 4);
  const int64_t t = b.num_tokens(), hkv = c.num_kv_heads, d = c.head_dim;
  const KvScales s{0.25f, 0.125f};
  CacheStorage real_cache(tc.fp8, b.num_pages(), b.page_size(), hkv, d);
  CacheStorage fake_cache(tc.activation, b.num_pages(), b.page_size(), hkv, d);
  CacheStorage plain_cache = fake_cache;
  plain_cache.view.data = plain_cache.bytes.data();
  // The same logical context: codes in the fp8 cache, code * scale in the other.
  test::FillPriorContext(b, real_cache, hkv, d, 12);
  test::FillPriorContext(b, fake_cache, hkv, d, 12, s.k_scale, s.v_scale);
  test::FillPriorContext(b, plain_cache, hkv, d, 12, s.k_scale, s.v_scale);

  KernelBackend kernel;
  FakeQuantBackend fake_backend(kernel, tc.fp8, {true}, true, true, Scales({s}));
  Attention real(c, w, kernel), fake(c, w, fake_backend), plain(c, w, kernel);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, tc.activation, 1.0f, 13);
  std::vector<uint8_t> out_real(hidden.size()), out_fake(hidden.size()), out_plain(hidden.size());
  LayerKvCache real_lc = real_cache.layer_cache(s), fake_lc = fake_cache.layer_cache(),
               plain_lc = plain_cache.layer_cache();
  const TensorView x = View2(hidden, tc.activation, t, c.d_model);
  real.ForwardServe(x, b.positions(), b.batch(), real_lc,
                    View2(out_real, tc.activation, t, c.d_model));
  fake.ForwardServe(x, b.positions(), b.batch(), fake_lc,
                    View2(out_fake, tc.activation, t, c.d_model));
  plain.ForwardServe(x, b.positions(), b.batch(), plain_lc,
                     View2(out_plain, tc.activation, t, c.d_model));

  EXPECT_EQ(out_real, out_fake);
  EXPECT_NE(out_plain, out_fake);  // not vacuous: the emulation changed something
  const int64_t n = real_cache.view.numel();
  for (int64_t i = 0; i < n; ++i) {
    const bool is_k = (i / d) % 2 == 0;  // slot 2h = K, 2h+1 = V
    const float want = LoadAsF32(tc.fp8, &real_cache.bytes[i]) * (is_k ? s.k_scale : s.v_scale);
    ASSERT_EQ(LoadAsF32(tc.activation, &fake_cache.bytes[i * DTypeSize(tc.activation)]), want)
        << "element " << i;
  }
}

// A CausalLm that keeps every logit the engine asks for, in order.
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

DecoderConfig TinyDecoder() {
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
  return c;
}

// Logits of two greedy requests (prefills, then decode steps batched with a prefill).
std::vector<float> RunEngine(AttentionBackend* backend, const KvCacheConfig& kv) {
  const DecoderConfig c = TinyDecoder();
  Decoder decoder(c, RandomDecoderWeights(c, 21), backend);
  LogitsRecorder model(decoder);
  EngineConfig config;
  config.max_num_seqs = 2;
  config.max_num_batched_tokens = 32;  // the 45-token prompt takes two chunks
  config.kv_cache_bytes = 4 << 20;
  config.warmup = false;
  Engine engine(model, kv, config);
  SamplingParams p;
  p.max_tokens = 6;
  p.ignore_eos = true;
  std::vector<int32_t> a(45), b(17);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i * 5 + 3) % 64;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (i * 11 + 1) % 64;
  engine.AddRequest(a, p);
  engine.AddRequest(b, p);
  engine.RunUntilDone();
  return model.all;
}

// The whole decoder through the engine (chunked prefill, decode steps reading the cache):
// an fp8 cache vs FakeQuantBackend on every layer over an f32 ("auto") cache. Scales are
// powers of two, different per layer and for K and V; logits agree to the bit.
TEST(FakeQuantBackend, DecoderThroughTheEngineBitIdenticalForPowerOfTwoScales) {
  const std::vector<KvScales> s = {{0.25f, 0.5f}, {0.0625f, 2.0f}, {1.0f, 0.125f}};
  const KvCacheConfig f32 = KvCacheConfig::Parse("auto", DType::kFloat32, 3);
  const std::vector<float> plain = RunEngine(nullptr, f32);
  for (const char* name : {"fp8_e4m3", "fp8_e5m2"}) {
    KvCacheConfig fp8 = KvCacheConfig::Parse(name, DType::kFloat32, 3);
    for (int l = 0; l < 3; ++l) fp8.SetScales(l, s[l]);
    const std::vector<float> real = RunEngine(nullptr, fp8);
    KernelBackend kernel;
    FakeQuantBackend fake(kernel, fp8.dtype(), {true, true, true}, true, true, Scales(s));
    const std::vector<float> emulated = RunEngine(&fake, f32);

    ASSERT_EQ(real.size(), emulated.size()) << name;
    ASSERT_GE(real.size(), 64u * 12) << name;  // 2 requests x 6 sampled tokens
    EXPECT_EQ(std::memcmp(real.data(), emulated.data(), real.size() * sizeof(float)), 0) << name;
    EXPECT_NE(plain, emulated) << name;  // not vacuous
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, EmulationTest,
                         ::testing::Values(Case{DType::kFloat32, DType::kFloat8E4M3FN},
                                           Case{DType::kFloat32, DType::kFloat8E5M2},
                                           Case{DType::kBFloat16, DType::kFloat8E4M3FN},
                                           Case{DType::kBFloat16, DType::kFloat8E5M2}));

// Scales that are not powers of two (calibrated ones: amax / 448): the two paths round
// differently, each by f32 roundings only. Bound, per output element of query row m:
//  logits  fp8 path: (q * fl(fl(sm * ks) * 256)) . (c * 2^-8); emulation: fl(q * sm) . fl(c * ks)
//          per term <= 3u relative apart, and each D-term sum carries its own rounding
//          <= gamma_D sum|terms|, so |ds| <= eps = (3u + 2 gamma_D) max_t sum_i |q_i sm k^_i|
//  softmax |dp_t| <= p_t (exp(2 eps) - 1) ~ 2 eps p_t
//  output  sum_t p_t v_t: V emulated is fl(c * vs) (<= u relative), the fp8 path scales once
//          at the end (<= u); each accumulation of n terms and its normalization <= (n + 4) u
//          sum p|v|, the exp approximations a few u each (16 u allowed for both)
//  => |do| <= max|v^| (2 eps + (2 (n + 4) + 2 + 16) u).
TEST(FakeQuantBackend, KernelCallWithinDerivedBoundForOtherScales) {
  for (const DType fp8 : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    const int64_t hq = 4, hkv = 2, d = 32;
    const ServingBatch b({{20, 20}, {9, 9}}, 8);
    const int64_t t = b.num_tokens();
    const KvScales s{0.0371f, 0.00913f};  // ~ amax / 448 for |K| ~ 16.6, |V| ~ 4.1
    std::mt19937 rng(3);
    const std::vector<float> q = test::RandomVector(t * hq * d, 1.0f, rng);
    const std::vector<float> k = test::RandomVector(t * hkv * d, 12.0f, rng);
    const std::vector<float> v = test::RandomVector(t * hkv * d, 3.0f, rng);
    auto view = [](const std::vector<float>& x, int64_t h, int64_t dd, int64_t tt) {
      return TensorView::Contiguous(const_cast<float*>(x.data()), DType::kFloat32, {tt, h, dd});
    };
    AttentionOptions options;
    options.sm_scale = 1.0f / std::sqrt(static_cast<float>(d));

    // The real path: quantize_kv, fp8 cache, scales to the kernel.
    std::vector<uint8_t> k8(k.size()), v8(v.size());
    const TensorView k8v = TensorView::Contiguous(k8.data(), fp8, {t, hkv, d});
    const TensorView v8v = TensorView::Contiguous(v8.data(), fp8, {t, hkv, d});
    QuantizeKv(fp8, view(k, hkv, d, t), view(v, hkv, d, t), s.k_scale, s.v_scale, k8v, v8v);
    CacheStorage real_cache(fp8, b.num_pages(), b.page_size(), hkv, d);
    AttentionOptions real_options = options;
    real_options.k_scale = s.k_scale;
    real_options.v_scale = s.v_scale;
    std::vector<float> out_real(t * hq * d), out_fake(t * hq * d);
    KernelBackend kernel;
    kernel.Run(view(q, hq, d, t), k8v, v8v, real_cache.view, b.batch().metadata, real_options,
               view(out_real, hq, d, t));
    // The emulation over an f32 cache.
    CacheStorage fake_cache(DType::kFloat32, b.num_pages(), b.page_size(), hkv, d);
    FakeQuantBackend fake(kernel, fp8, {true}, true, true, Scales({s}));
    fake.Run(view(q, hq, d, t), view(k, hkv, d, t), view(v, hkv, d, t), fake_cache.view,
             b.batch().metadata, options, view(out_fake, hq, d, t));

    // The bound from the data: dequantized K/V (exact in double), per (row, head) sums.
    std::vector<double> kd(k.size()), vd(v.size());
    double vmax = 0, qk = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      kd[i] = static_cast<double>(LoadAsF32(fp8, &k8[i])) * s.k_scale;
      vd[i] = static_cast<double>(LoadAsF32(fp8, &v8[i])) * s.v_scale;
      vmax = std::max(vmax, std::fabs(vd[i]));
    }
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t h = 0; h < hq; ++h) {
        for (int64_t p = 0; p < t; ++p) {  // every key (a superset of the visible ones)
          double sum = 0;
          for (int64_t i = 0; i < d; ++i) {
            sum += std::fabs(q[(r * hq + h) * d + i] * options.sm_scale) *
                   std::fabs(kd[(p * hkv + h / 2) * d + i]);
          }
          qk = std::max(qk, sum);
        }
      }
    }
    const double gamma_d = d * kU / (1 - d * kU);
    const double eps = (3 * kU + 2 * gamma_d) * qk;
    const int64_t n = 20;  // longest context
    const double tol = vmax * (2 * eps + (2 * (n + 4) + 2 + 16) * kU);
    double worst = 0, fp8_effect = 0;
    for (size_t i = 0; i < out_real.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(out_real[i]) - out_fake[i]));
    }
    // Not vacuous: against unquantized K/V the outputs move by fp8 rounding, far above tol.
    std::vector<float> out_plain(t * hq * d);
    CacheStorage plain_cache(DType::kFloat32, b.num_pages(), b.page_size(), hkv, d);
    kernel.Run(view(q, hq, d, t), view(k, hkv, d, t), view(v, hkv, d, t), plain_cache.view,
               b.batch().metadata, options, view(out_plain, hq, d, t));
    for (size_t i = 0; i < out_real.size(); ++i) {
      fp8_effect = std::max(fp8_effect, std::fabs(static_cast<double>(out_plain[i]) - out_fake[i]));
    }
    EXPECT_LE(worst, tol) << DTypeName(fp8);
    EXPECT_GT(fp8_effect, 100 * tol) << DTypeName(fp8);
    RecordProperty(std::string(DTypeName(fp8)) + "_worst_over_tol", std::to_string(worst / tol));
  }
}

}  // namespace
}  // namespace rpa
