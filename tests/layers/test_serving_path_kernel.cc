// Regression tests of the serving attention path (issue 4) with the real
// ragged_paged_attention kernel behind the layer: cache bytes, outputs, and the dtype error
// the fix exists to avoid. test_serving_path.cc holds the backend-boundary view.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/quantize_kv.h"
#include "kernels/ragged_paged_attention.h"
#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/kv_cache_config.h"
#include "numerics/convert.h"
#include "tests/layers/serving_test_util.h"
#include "util/error.h"

namespace rpa {
namespace {

using test::Bytes;
using test::CacheStorage;
using test::RecordingBackend;
using test::ServingBatch;

AttentionConfig BaseConfig(DType activation) {
  AttentionConfig c;
  c.d_model = 48;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.qk_norm = true;
  c.activation_dtype = activation;
  return c;
}

// decode (1, 9), prefill (5, 5), mixed (3, 11) over pages of 4 tokens.
ServingBatch SmallBatch() { return ServingBatch({{1, 9}, {5, 5}, {3, 11}}, 4); }

TensorView View2(std::vector<uint8_t>& bytes, DType dtype, int64_t t, int64_t w) {
  return TensorView::Contiguous(bytes.data(), dtype, {t, w});
}

// The cache after this step should equal `before` with every new token's K and V rows
// replaced by `k`/`v` ([T, Hkv, D] bytes in the cache dtype, rows in batch order).
std::vector<uint8_t> ExpectedCache(const ServingBatch& b, std::vector<uint8_t> before,
                                   const std::vector<uint8_t>& k, const std::vector<uint8_t>& v,
                                   DType dtype, int64_t hkv, int64_t d) {
  const size_t row = d * DTypeSize(dtype);
  int64_t token = 0;
  for (size_t i = 0; i < b.seqs().size(); ++i) {
    const test::SeqSpec s = b.seqs()[i];
    for (int32_t j = 0; j < s.q_len; ++j, ++token) {
      for (int64_t h = 0; h < hkv; ++h) {
        const int32_t pos = s.kv_len - s.q_len + j;
        const size_t src = (token * hkv + h) * row;
        std::memcpy(&before[b.SlotOffset(i, pos, 2 * h, hkv, d) * DTypeSize(dtype)], &k[src], row);
        std::memcpy(&before[b.SlotOffset(i, pos, 2 * h + 1, hkv, d) * DTypeSize(dtype)], &v[src],
                    row);
      }
    }
  }
  return before;
}

std::pair<std::vector<uint8_t>, std::vector<uint8_t>> Quantized(const QkvProjections& p,
                                                                DType dtype, KvScales s) {
  std::vector<uint8_t> k(p.k.numel()), v(p.v.numel());
  QuantizeKv(dtype, p.k, p.v, s.k_scale, s.v_scale,
             TensorView::Contiguous(k.data(), dtype, {p.k.shape[0], p.k.shape[1], p.k.shape[2]}),
             TensorView::Contiguous(v.data(), dtype, {p.v.shape[0], p.v.shape[1], p.v.shape[2]}));
  return {k, v};
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no error>";
}

struct PlainCase {
  const char* kv_cache_dtype;
  DType activation;
};
void PrintTo(const PlainCase& c, std::ostream* os) {
  *os << c.kv_cache_dtype << " with " << DTypeName(c.activation) << " activations";
}

class PlainPathKernelTest : public ::testing::TestWithParam<PlainCase> {};

// Test 3. "A build of the path without the quantization step" is assembled from the
// layer's own public stages with the K/V step left out: ProjectQkv -> kernel with the raw
// projections and KernelOptions() (no scales) -> ProjectOutput. A second, identical layer
// runs ForwardServe. Output and cache must agree to the bit: for a non-fp8 cache the K/V
// step is the identity and adds no scales.
TEST_P(PlainPathKernelTest, OutputBitIdenticalToPathWithoutQuantization) {
  const PlainCase& tc = GetParam();
  const KvCacheConfig kv = KvCacheConfig::Parse(tc.kv_cache_dtype, tc.activation, 1);
  const AttentionConfig c = BaseConfig(tc.activation);
  const AttentionWeights w = test::RandomWeights(c, 101);
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens();
  CacheStorage cache_a(kv.dtype(), b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  cache_a.FillNaN();
  test::FillPriorContext(b, cache_a, c.num_kv_heads, c.head_dim, 102);
  CacheStorage cache_b = cache_a;
  cache_b.view.data = cache_b.bytes.data();

  KernelBackend kernel;
  Attention served(c, w, kernel);
  Attention plain(c, w, kernel);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, c.activation_dtype, 1.0f, 103);
  std::vector<uint8_t> out_a(hidden.size()), out_b(hidden.size());
  LayerKvCache lc = cache_a.layer_cache(kv.scales(0));
  served.ForwardServe(View2(hidden, c.activation_dtype, t, c.d_model), b.positions(), b.batch(), lc,
                      View2(out_a, c.activation_dtype, t, c.d_model));

  const QkvProjections p =
      plain.ProjectQkv(View2(hidden, c.activation_dtype, t, c.d_model), b.positions());
  std::vector<uint8_t> attn(p.q.byte_size());
  const TensorView attn_view =
      TensorView::Contiguous(attn.data(), c.activation_dtype, {t, c.num_q_heads, c.head_dim});
  RaggedPagedAttention(p.q, p.k, p.v, cache_b.view, b.batch().metadata, plain.KernelOptions(),
                       attn_view);
  plain.ProjectOutput(attn_view, View2(out_b, c.activation_dtype, t, c.d_model));

  EXPECT_EQ(out_a, out_b);
  EXPECT_EQ(cache_a.bytes, cache_b.bytes);
  // Not vacuous: the outputs are real numbers.
  std::vector<float> y(t * c.d_model);
  ConvertScalar(c.activation_dtype, out_a.data(), DType::kFloat32, y.data(), y.size());
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(CacheAndActivationDtypes, PlainPathKernelTest,
                         ::testing::Values(PlainCase{"bfloat16", DType::kBFloat16},
                                           PlainCase{"auto", DType::kBFloat16},
                                           PlainCase{"auto", DType::kFloat32}),
                         [](const ::testing::TestParamInfo<PlainCase>& info) {
                           return std::string(info.param.kv_cache_dtype) + "_" +
                                  std::string(DTypeName(info.param.activation));
                         });

class Fp8KernelTest : public ::testing::TestWithParam<DType> {};

// Test 4 in the cache: projections far beyond the format's range are stored as exactly
// +-max; no NaN or Inf code appears in any newly written slot, and the output is finite.
TEST_P(Fp8KernelTest, OutOfRangeKvStoreFormatMaxNoNanOrInf) {
  const DType dtype = GetParam();
  const double fmax = GetFInfo(dtype).max;
  AttentionConfig c = BaseConfig(DType::kFloat32);
  c.qk_norm = false;  // the norm would pull |k| back to O(1)
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens();
  CacheStorage cache(dtype, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  KernelBackend kernel;
  Attention layer(c, test::RandomWeights(c, 111, static_cast<float>(8 * fmax)), kernel);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, DType::kFloat32, 1.0f, 112);
  std::vector<uint8_t> out(hidden.size());
  LayerKvCache lc = cache.layer_cache();
  layer.ForwardServe(View2(hidden, DType::kFloat32, t, c.d_model), b.positions(), b.batch(), lc,
                     View2(out, DType::kFloat32, t, c.d_model));

  const QkvProjections p =
      layer.ProjectQkv(View2(hidden, DType::kFloat32, t, c.d_model), b.positions());
  double max_in = 0, max_stored = 0;
  int64_t token = 0;
  for (size_t i = 0; i < b.seqs().size(); ++i) {
    const test::SeqSpec s = b.seqs()[i];
    for (int32_t j = 0; j < s.q_len; ++j, ++token) {
      for (int64_t slot = 0; slot < 2 * c.num_kv_heads; ++slot) {
        const int64_t off =
            b.SlotOffset(i, s.kv_len - s.q_len + j, slot, c.num_kv_heads, c.head_dim);
        for (int64_t e = 0; e < c.head_dim; ++e) {
          const float y = LoadAsF32(dtype, &cache.bytes[off + e]);
          ASSERT_TRUE(std::isfinite(y)) << "seq " << i << " token " << j << " slot " << slot;
          max_stored = std::max(max_stored, std::fabs(static_cast<double>(y)));
          const TensorView& src = slot % 2 == 0 ? p.k : p.v;
          max_in = std::max(
              max_in, std::fabs(static_cast<double>(
                          src.as<float>()[(token * c.num_kv_heads + slot / 2) * c.head_dim + e])));
        }
      }
    }
  }
  EXPECT_GT(max_in, fmax) << "precondition: some projection beyond the format's range";
  EXPECT_EQ(max_stored, fmax);
  const float* y = reinterpret_cast<const float*>(out.data());
  for (int64_t i = 0; i < t * c.d_model; ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
}

// Test 5: a KV-shared layer runs over its donor's fp8 cache right after the donor wrote
// it: no dtype error, update_kv_cache=false reaches the kernel, and the donor's bytes are
// unchanged.
TEST_P(Fp8KernelTest, KvSharedLayerReadsDonorCacheWithoutWriting) {
  const DType dtype = GetParam();
  const AttentionConfig donor_config = BaseConfig(DType::kBFloat16);
  AttentionConfig shared_config = donor_config;
  shared_config.kv_share_donor = 0;
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens();
  CacheStorage cache(dtype, b.num_pages(), b.page_size(), donor_config.num_kv_heads,
                     donor_config.head_dim);
  cache.FillNaN();
  test::FillPriorContext(b, cache, donor_config.num_kv_heads, donor_config.head_dim, 121);
  const KvScales scales{0.5f, 2.0f};
  KernelBackend kernel;
  RecordingBackend rec(&kernel);
  Attention donor(donor_config, test::RandomWeights(donor_config, 122), kernel);
  Attention shared(shared_config, test::RandomWeights(shared_config, 123), rec);
  std::vector<uint8_t> hidden = test::RandomHidden(t, 48, DType::kBFloat16, 1.0f, 124);
  std::vector<uint8_t> out(hidden.size());
  LayerKvCache lc = cache.layer_cache(scales);
  donor.ForwardServe(View2(hidden, DType::kBFloat16, t, 48), b.positions(), b.batch(), lc,
                     View2(out, DType::kBFloat16, t, 48));
  const std::vector<uint8_t> after_donor = cache.bytes;

  EXPECT_NO_THROW(shared.ForwardServe(View2(hidden, DType::kBFloat16, t, 48), b.positions(),
                                      b.batch(), lc, View2(out, DType::kBFloat16, t, 48)));
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_FALSE(rec.calls[0].options.update_kv_cache);
  EXPECT_EQ(rec.calls[0].k_dtype, dtype);
  EXPECT_EQ(cache.bytes, after_donor);
  std::vector<float> y(t * 48);
  ConvertScalar(DType::kBFloat16, out.data(), DType::kFloat32, y.data(), y.size());
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
}

// Test 8 in the cache: calibrated scales reach the kernel unchanged, and the new slots
// hold quantize_kv(projections, calibrated scales) -- which differs from scale 1.0.
TEST_P(Fp8KernelTest, CalibratedScalesChangeStoredBytesAsQuantizeKvSays) {
  const DType dtype = GetParam();
  const AttentionConfig c = BaseConfig(DType::kFloat32);
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens();
  CacheStorage cache(dtype, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  cache.FillNaN();
  test::FillPriorContext(b, cache, c.num_kv_heads, c.head_dim, 131);
  const std::vector<uint8_t> before = cache.bytes;
  const KvScales calibrated{0.0371f, 2.5f};
  KernelBackend kernel;
  RecordingBackend rec(&kernel);
  Attention layer(c, test::RandomWeights(c, 132), rec);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, DType::kFloat32, 1.0f, 133);
  std::vector<uint8_t> out(hidden.size());
  LayerKvCache lc = cache.layer_cache(calibrated);
  layer.ForwardServe(View2(hidden, DType::kFloat32, t, c.d_model), b.positions(), b.batch(), lc,
                     View2(out, DType::kFloat32, t, c.d_model));
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0].options.k_scale, std::optional<float>(calibrated.k_scale));
  EXPECT_EQ(rec.calls[0].options.v_scale, std::optional<float>(calibrated.v_scale));

  const QkvProjections p =
      layer.ProjectQkv(View2(hidden, DType::kFloat32, t, c.d_model), b.positions());
  const auto [k, v] = Quantized(p, dtype, calibrated);
  EXPECT_EQ(cache.bytes, ExpectedCache(b, before, k, v, dtype, c.num_kv_heads, c.head_dim));
  const auto [k1, v1] = Quantized(p, dtype, KvScales{});
  EXPECT_NE(cache.bytes, ExpectedCache(b, before, k1, v1, dtype, c.num_kv_heads, c.head_dim));
}

INSTANTIATE_TEST_SUITE_P(Fp8Formats, Fp8KernelTest,
                         ::testing::Values(DType::kFloat8E4M3FN, DType::kFloat8E5M2),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// Test 6, the negative control: the kernel refuses bf16 K/V over an fp8 cache with the
// contract's exact message -- both when called directly and when the layer's stages are
// run without the K/V step (the original bug).
TEST(ServingPathKernelTest, Bf16KvOverFp8CacheRaisesTheDtypeError) {
  const AttentionConfig c = BaseConfig(DType::kBFloat16);
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens();
  CacheStorage cache(DType::kFloat8E4M3FN, b.num_pages(), b.page_size(), c.num_kv_heads,
                     c.head_dim);
  const std::vector<uint8_t> before = cache.bytes;
  const std::string expected =
      "Expected kv_cache.dtype=float8_e4m3fn to be equal to k.dtype=bfloat16 and "
      "v.dtype=bfloat16.";

  std::vector<uint8_t> q(t * c.num_q_heads * c.head_dim * 2),
      k(t * c.num_kv_heads * c.head_dim * 2);
  std::vector<uint8_t> v = k, o = q;
  auto view3 = [&](std::vector<uint8_t>& bytes, int64_t h) {
    return TensorView::Contiguous(bytes.data(), DType::kBFloat16, {t, h, c.head_dim});
  };
  EXPECT_EQ(ErrorOf([&] {
              RaggedPagedAttention(view3(q, c.num_q_heads), view3(k, c.num_kv_heads),
                                   view3(v, c.num_kv_heads), cache.view, b.batch().metadata,
                                   AttentionOptions{}, view3(o, c.num_q_heads));
            }),
            expected);

  KernelBackend kernel;
  Attention layer(c, test::RandomWeights(c, 141), kernel);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, DType::kBFloat16, 1.0f, 142);
  const QkvProjections p =
      layer.ProjectQkv(View2(hidden, DType::kBFloat16, t, c.d_model), b.positions());
  EXPECT_EQ(ErrorOf([&] {
              kernel.Run(p.q, p.k, p.v, cache.view, b.batch().metadata, layer.KernelOptions(),
                         view3(o, c.num_q_heads));
            }),
            expected);
  EXPECT_EQ(cache.bytes, before);
}

// Test 7: end to end, an fp8 cache against an f32 cache holding the same logical context.
// The new slots hold exactly quantize_kv's bytes, and every output element is within a
// bound derived from the format's epsilon and the scales (below).
TEST_P(Fp8KernelTest, EndToEndCloseToF32CacheWithinDerivedBound) {
  const DType dtype = GetParam();
  const FInfo fi = GetFInfo(dtype);
  AttentionConfig c = BaseConfig(DType::kFloat32);
  // A head_dim-128 model's 1/sqrt(128) ~ 0.09: with this small D the default 1/sqrt(16)
  // would make logits (and the worst-case bound below) larger than in real models.
  c.sm_scale = 0.1f;
  const AttentionWeights w = test::RandomWeights(c, 151);
  const ServingBatch b = SmallBatch();
  const int64_t t = b.num_tokens(), hq = c.num_q_heads, hkv = c.num_kv_heads, d = c.head_dim;
  const int64_t g = hq / hkv;
  // Calibration-style scales, max |x| / format max: |k| stays below 6 (unit-RMS heads
  // times norm weights in [0.5, 1.5]) and |v| below 1.5 (48 terms of +-1 times
  // +-1/sqrt(48)); neither is a power of two. The no-clipping premise is asserted below.
  const KvScales scales{6.0f / static_cast<float>(fi.max), 1.5f / static_cast<float>(fi.max)};

  CacheStorage q8(dtype, b.num_pages(), b.page_size(), hkv, d);
  CacheStorage f32(DType::kFloat32, b.num_pages(), b.page_size(), hkv, d);
  q8.FillNaN();
  f32.FillNaN();
  // Same logical prior context: codes in q8 (times the scales on read), values in f32.
  test::FillPriorContext(b, q8, hkv, d, 152);
  test::FillPriorContext(b, f32, hkv, d, 152, scales.k_scale, scales.v_scale);
  const std::vector<uint8_t> q8_before = q8.bytes;

  KernelBackend kernel;
  Attention layer8(c, w, kernel), layer32(c, w, kernel);
  std::vector<uint8_t> hidden = test::RandomHidden(t, c.d_model, DType::kFloat32, 1.0f, 153);
  std::vector<uint8_t> out8(hidden.size()), out32(hidden.size());
  LayerKvCache lc8 = q8.layer_cache(scales), lc32 = f32.layer_cache();
  layer8.ForwardServe(View2(hidden, DType::kFloat32, t, c.d_model), b.positions(), b.batch(), lc8,
                      View2(out8, DType::kFloat32, t, c.d_model));
  layer32.ForwardServe(View2(hidden, DType::kFloat32, t, c.d_model), b.positions(), b.batch(), lc32,
                       View2(out32, DType::kFloat32, t, c.d_model));

  // The projections both runs used (f32 activations: the f32 cache stores them as is).
  const QkvProjections p =
      layer32.ProjectQkv(View2(hidden, DType::kFloat32, t, c.d_model), b.positions());
  const auto [kq, vq] = Quantized(p, dtype, scales);
  EXPECT_EQ(q8.bytes, ExpectedCache(b, q8_before, kq, vq, dtype, hkv, d));

  // The bound. Let u = eps/2 be fp8's unit roundoff and delta half its smallest
  // subnormal. A new element x is stored as code c = RNE(x / s) (no clipping: checked
  // below), read back as s*c, so |s*c - x| <= u|x| + s*delta. Prior context is identical
  // in both caches. For query row r, head n (kv head h = n / G), logit t moves by
  //   |ds_t| <= sm * sum_i |q_i| (u |k_ti| + s_k delta) <= E   (max over new tokens t),
  // so each softmax weight moves by a factor within [e^-2E, e^2E]: |dw_t| <= (e^2E - 1) w_t.
  // The head output o = sum_t w_t v_t then moves by at most
  //   B = (e^2E - 1)(1 + u) V + u V + s_v delta,   V = max_t |v_t| (per element)
  // and y_j = sum_i wo_ji o_i by at most sum_i |wo_ji| B_i. On top, both runs round in f32:
  // the kernel's attention (f32 throughout) is allowed 1e-5 V per element (far above its
  // ~Kc * 2^-24 accumulation error), the O projection HqD * 2^-24 relative, each run.
  // A second, a-posteriori bound replaces the worst-case rounding errors by the actual
  // ones (k^ - k, v^ - v from the stored codes): E_act = sm max_t |q . (k^_t - k_t)|,
  // B_act = (e^2E_act - 1)(V + dV) + dV with dV = max_t |v^_t - v_t|. Same derivation,
  // much tighter, so it also notices a wrongly applied scale (e.g. a dropped k_scale).
  const double u = fi.eps / 2, delta = fi.smallest_subnormal / 2;
  const double sm = *c.sm_scale;
  const auto& kv_lens = b.batch().metadata.kv_lens;
  const auto& cu = b.batch().metadata.cu_q_lens;
  const float* qf = p.q.as<float>();
  const float* kf = p.k.as<float>();
  const float* vf = p.v.as<float>();
  const float* prior = reinterpret_cast<const float*>(f32.bytes.data());
  const float* y8 = reinterpret_cast<const float*>(out8.data());
  const float* y32 = reinterpret_cast<const float*>(out32.data());
  double worst_ratio = 0, worst_ratio2 = 0, max_err = 0;
  for (size_t i = 0; i < b.seqs().size(); ++i) {
    const int32_t kc = kv_lens[i], first = cu[i], len = cu[i + 1] - cu[i], off = kc - len;
    for (int32_t r = first; r < first + len; ++r) {
      std::vector<double> bound_o(hq * d), v_max(hq * d), bound_act(hq * d);
      for (int64_t n = 0; n < hq; ++n) {
        const int64_t h = n / g;
        double e_max = 0, e_act = 0;
        for (int32_t j = first; j < first + len; ++j) {
          double e = 0, dot = 0;
          for (int64_t x = 0; x < d; ++x) {
            const double kx = kf[(j * hkv + h) * d + x];
            ASSERT_LT(std::fabs(kx) / scales.k_scale, fi.max);  // no clipping
            const double qx = qf[(r * hq + n) * d + x];
            e += std::fabs(qx) * (u * std::fabs(kx) + scales.k_scale * delta);
            const double k_hat =
                LoadAsF32(dtype, &kq[(j * hkv + h) * d + x]) * static_cast<double>(scales.k_scale);
            dot += qx * (k_hat - kx);
          }
          e_max = std::max(e_max, sm * e);
          e_act = std::max(e_act, sm * std::fabs(dot));
        }
        for (int64_t x = 0; x < d; ++x) {
          double vm = 0, dv = 0;
          for (int32_t pos = 0; pos < off; ++pos) {
            vm = std::max(
                vm,
                std::fabs(static_cast<double>(prior[b.SlotOffset(i, pos, 2 * h + 1, hkv, d) + x])));
          }
          for (int32_t j = first; j < first + len; ++j) {
            const double vx = vf[(j * hkv + h) * d + x];
            ASSERT_LT(std::fabs(vx) / scales.v_scale, fi.max);  // no clipping
            vm = std::max(vm, std::fabs(vx));
            const double v_hat =
                LoadAsF32(dtype, &vq[(j * hkv + h) * d + x]) * static_cast<double>(scales.v_scale);
            dv = std::max(dv, std::fabs(v_hat - vx));
          }
          bound_act[n * d + x] = std::expm1(2 * e_act) * (vm + dv) + dv;
          v_max[n * d + x] = vm;
          bound_o[n * d + x] =
              std::expm1(2 * e_max) * (1 + u) * vm + u * vm + scales.v_scale * delta;
        }
      }
      for (int64_t j = 0; j < c.d_model; ++j) {
        double bound = 0, bound2 = 0, trivial = 0;
        for (int64_t x = 0; x < hq * d; ++x) {
          const double a = std::fabs(static_cast<double>(w.wo[j * hq * d + x]));
          const double f32_slack = 2 * (1e-5 + hq * d * 0x1p-24) * v_max[x];
          bound += a * (bound_o[x] + f32_slack);
          bound2 += a * (bound_act[x] + f32_slack);
          trivial += a * 2 * v_max[x];
        }
        const double err =
            std::fabs(static_cast<double>(y8[r * c.d_model + j]) - y32[r * c.d_model + j]);
        EXPECT_LE(err, bound) << "row " << r << " col " << j;
        EXPECT_LE(err, bound2) << "row " << r << " col " << j;
        // The bound must say something: well below the trivial |y8| + |y32| bound.
        EXPECT_LT(bound, 0.5 * trivial) << "row " << r << " col " << j;
        worst_ratio = std::max(worst_ratio, err / bound);
        worst_ratio2 = std::max(worst_ratio2, err / bound2);
        max_err = std::max(max_err, err);
      }
    }
  }
  EXPECT_GT(max_err, 0.0) << "the fp8 cache should perturb the output at all";
  RecordProperty("worst_error_over_bound", std::to_string(worst_ratio));
  RecordProperty("worst_error_over_a_posteriori_bound", std::to_string(worst_ratio2));
}

}  // namespace
}  // namespace rpa
