// Regression tests of the serving attention path (issue 4), seen from the kernel's side of
// the AttentionBackend boundary with a recording fake: what K/V, dtypes and scales the
// layer hands to ragged_paged_attention for each KV cache dtype. The same properties with
// the real kernel (cache bytes, outputs) are in test_serving_path_kernel.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/quantize_kv.h"
#include "layers/attention.h"
#include "layers/kv_cache_config.h"
#include "numerics/convert.h"
#include "tests/layers/serving_test_util.h"
#include "util/error.h"

namespace rpa {
namespace {

using test::Bytes;
using test::CacheStorage;
using test::RecordedCall;
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

// Runs `layer` once over `cache` on random hidden states; returns them and the output.
struct LayerRun {
  std::vector<uint8_t> hidden;
  std::vector<uint8_t> output;
};
LayerRun Forward(Attention& layer, const ServingBatch& b, LayerKvCache cache, uint32_t seed,
                 float hidden_scale = 1.0f) {
  const AttentionConfig& c = layer.config();
  LayerRun run;
  run.hidden =
      test::RandomHidden(b.num_tokens(), c.d_model, c.activation_dtype, hidden_scale, seed);
  run.output.resize(run.hidden.size());
  const TensorView h =
      TensorView::Contiguous(run.hidden.data(), c.activation_dtype, {b.num_tokens(), c.d_model});
  const TensorView o =
      TensorView::Contiguous(run.output.data(), c.activation_dtype, {b.num_tokens(), c.d_model});
  layer.ForwardServe(h, b.positions(), b.batch(), cache, o);
  return run;
}

// quantize_kv of the layer's own projections of `hidden`: what the kernel must receive.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> QuantizedProjections(
    Attention& layer, const ServingBatch& b, std::vector<uint8_t>& hidden, DType cache_dtype,
    KvScales scales) {
  const AttentionConfig& c = layer.config();
  const TensorView h =
      TensorView::Contiguous(hidden.data(), c.activation_dtype, {b.num_tokens(), c.d_model});
  const QkvProjections p = layer.ProjectQkv(h, b.positions());
  std::vector<uint8_t> k(p.k.numel()), v(p.v.numel());
  QuantizeKv(
      cache_dtype, p.k, p.v, scales.k_scale, scales.v_scale,
      TensorView::Contiguous(k.data(), cache_dtype, {p.k.shape[0], p.k.shape[1], p.k.shape[2]}),
      TensorView::Contiguous(v.data(), cache_dtype, {p.v.shape[0], p.v.shape[1], p.v.shape[2]}));
  return {k, v};
}

struct Fp8Case {
  const char* kv_cache_dtype;  // vLLM's string
  DType expected_cache_dtype;
  DType activation;
};

void PrintTo(const Fp8Case& c, std::ostream* os) {
  *os << c.kv_cache_dtype << " with " << DTypeName(c.activation) << " activations";
}

class Fp8ServingPathTest : public ::testing::TestWithParam<Fp8Case> {};

// Tests 1 (e4m3fn, via "fp8" and "fp8_e4m3") and 2 (e5m2): one backend call whose K/V are
// in the cache dtype and bit-equal to quantize_kv(projections), queries in the activation
// dtype, k_scale/v_scale = the layer's scales, q_scale unset.
TEST_P(Fp8ServingPathTest, KvAreQuantizedBeforeDispatchAndScalesThreaded) {
  const Fp8Case& tc = GetParam();
  const KvCacheConfig kv = KvCacheConfig::Parse(tc.kv_cache_dtype, tc.activation, 1);
  ASSERT_EQ(kv.dtype(), tc.expected_cache_dtype);
  ASSERT_TRUE(kv.quantized());
  const AttentionConfig c = BaseConfig(tc.activation);
  const ServingBatch b = SmallBatch();
  CacheStorage cache(kv.dtype(), b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 11), rec);

  LayerRun run = Forward(layer, b, cache.layer_cache(kv.scales(0)), 12);

  ASSERT_EQ(rec.calls.size(), 1u);
  const RecordedCall& call = rec.calls[0];
  EXPECT_EQ(call.cache_dtype, kv.dtype());
  EXPECT_EQ(call.k_dtype, kv.dtype());
  EXPECT_EQ(call.v_dtype, kv.dtype());
  EXPECT_EQ(call.q_dtype, tc.activation);
  const auto [k, v] = QuantizedProjections(layer, b, run.hidden, kv.dtype(), kv.scales(0));
  EXPECT_EQ(call.k, k);
  EXPECT_EQ(call.v, v);
  ASSERT_TRUE(call.options.k_scale.has_value());
  ASSERT_TRUE(call.options.v_scale.has_value());
  EXPECT_EQ(*call.options.k_scale, kv.scales(0).k_scale);
  EXPECT_EQ(*call.options.v_scale, kv.scales(0).v_scale);
  EXPECT_FALSE(call.options.q_scale.has_value());
  EXPECT_TRUE(call.options.update_kv_cache);
}

INSTANTIATE_TEST_SUITE_P(
    CacheAndActivationDtypes, Fp8ServingPathTest,
    ::testing::Values(Fp8Case{"fp8", DType::kFloat8E4M3FN, DType::kFloat32},
                      Fp8Case{"fp8_e4m3", DType::kFloat8E4M3FN, DType::kBFloat16},
                      Fp8Case{"fp8", DType::kFloat8E4M3FN, DType::kBFloat16},
                      Fp8Case{"fp8_e5m2", DType::kFloat8E5M2, DType::kFloat32},
                      Fp8Case{"fp8_e5m2", DType::kFloat8E5M2, DType::kBFloat16}),
    [](const ::testing::TestParamInfo<Fp8Case>& info) {
      return std::string(info.param.kv_cache_dtype) + "_" +
             std::string(DTypeName(info.param.activation));
    });

struct PlainCase {
  const char* kv_cache_dtype;
  DType activation;
};

void PrintTo(const PlainCase& c, std::ostream* os) {
  *os << c.kv_cache_dtype << " with " << DTypeName(c.activation) << " activations";
}

class PlainServingPathTest : public ::testing::TestWithParam<PlainCase> {};

// Test 3 (the backend's view): for a bf16 / "auto" cache the K/V handed over are the
// projections themselves and no scale is set. (Output bit-identity against the path
// without the quantization step needs the real kernel: test_serving_path_kernel.cc.)
TEST_P(PlainServingPathTest, KvAreTheProjectionsAndScalesUnset) {
  const PlainCase& tc = GetParam();
  const KvCacheConfig kv = KvCacheConfig::Parse(tc.kv_cache_dtype, tc.activation, 1);
  ASSERT_FALSE(kv.quantized());
  ASSERT_EQ(kv.dtype(), tc.activation);
  const AttentionConfig c = BaseConfig(tc.activation);
  const ServingBatch b = SmallBatch();
  CacheStorage cache(kv.dtype(), b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 21), rec);

  LayerRun run = Forward(layer, b, cache.layer_cache(kv.scales(0)), 22);

  ASSERT_EQ(rec.calls.size(), 1u);
  const RecordedCall& call = rec.calls[0];
  const QkvProjections p = layer.ProjectQkv(
      TensorView::Contiguous(run.hidden.data(), c.activation_dtype, {b.num_tokens(), c.d_model}),
      b.positions());
  EXPECT_EQ(call.k_dtype, tc.activation);
  EXPECT_EQ(call.v_dtype, tc.activation);
  EXPECT_EQ(call.q_dtype, tc.activation);
  EXPECT_EQ(call.k, Bytes(p.k));
  EXPECT_EQ(call.v, Bytes(p.v));
  EXPECT_EQ(call.q, Bytes(p.q));
  EXPECT_FALSE(call.options.k_scale.has_value());
  EXPECT_FALSE(call.options.v_scale.has_value());
  EXPECT_FALSE(call.options.q_scale.has_value());
}

INSTANTIATE_TEST_SUITE_P(CacheAndActivationDtypes, PlainServingPathTest,
                         ::testing::Values(PlainCase{"bfloat16", DType::kBFloat16},
                                           PlainCase{"auto", DType::kBFloat16},
                                           PlainCase{"auto", DType::kFloat32}),
                         [](const ::testing::TestParamInfo<PlainCase>& info) {
                           return std::string(info.param.kv_cache_dtype) + "_" +
                                  std::string(DTypeName(info.param.activation));
                         });

// f32 activations over a bf16 cache: a plain round-to-nearest-even cast, still no scales.
TEST(ServingPathTest, Float32ActivationsOverBf16CacheCastWithoutScales) {
  const AttentionConfig c = BaseConfig(DType::kFloat32);
  const ServingBatch b = SmallBatch();
  CacheStorage cache(DType::kBFloat16, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 31), rec);
  LayerRun run = Forward(layer, b, cache.layer_cache(), 32);
  ASSERT_EQ(rec.calls.size(), 1u);
  const QkvProjections p = layer.ProjectQkv(
      TensorView::Contiguous(run.hidden.data(), DType::kFloat32, {b.num_tokens(), c.d_model}),
      b.positions());
  std::vector<uint8_t> k(p.k.numel() * 2);
  ConvertScalar(DType::kFloat32, p.k.data, DType::kBFloat16, k.data(), p.k.numel());
  EXPECT_EQ(rec.calls[0].k_dtype, DType::kBFloat16);
  EXPECT_EQ(rec.calls[0].k, k);
  EXPECT_EQ(rec.calls[0].q_dtype, DType::kFloat32);
  EXPECT_FALSE(rec.calls[0].options.k_scale.has_value());
  EXPECT_FALSE(rec.calls[0].options.v_scale.has_value());
}

class SaturationTest : public ::testing::TestWithParam<DType> {};

// Test 4 (the backend's view): projections far beyond the format's range reach the
// kernel as exactly +-max, never NaN/Inf.
TEST_P(SaturationTest, OutOfRangeKvSaturateToFormatMax) {
  const DType cache_dtype = GetParam();
  const double fmax = GetFInfo(cache_dtype).max;
  AttentionConfig c = BaseConfig(DType::kFloat32);
  c.qk_norm = false;  // the norm would pull |k| back to O(1)
  const ServingBatch b = SmallBatch();
  CacheStorage cache(cache_dtype, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  RecordingBackend rec;
  // Projections of +-1 inputs through these weights reach a few times the format max.
  Attention layer(c, test::RandomWeights(c, 41, static_cast<float>(8 * fmax)), rec);
  LayerRun run = Forward(layer, b, cache.layer_cache(), 42);
  ASSERT_EQ(rec.calls.size(), 1u);

  const QkvProjections p = layer.ProjectQkv(
      TensorView::Contiguous(run.hidden.data(), DType::kFloat32, {b.num_tokens(), c.d_model}),
      b.positions());
  for (const auto& [proj, got] : {std::pair{p.k, rec.calls[0].k}, std::pair{p.v, rec.calls[0].v}}) {
    double max_in = 0.0, max_out = 0.0;
    int beyond = 0;
    for (int64_t i = 0; i < proj.numel(); ++i) {
      const float x = proj.as<float>()[i];
      const float y = LoadAsF32(cache_dtype, &got[i]);
      ASSERT_TRUE(std::isfinite(y)) << "element " << i << " from " << x;
      max_in = std::max(max_in, std::fabs(static_cast<double>(x)));
      max_out = std::max(max_out, std::fabs(static_cast<double>(y)));
      if (std::fabs(x) > fmax) {
        ++beyond;
        EXPECT_EQ(std::fabs(y), fmax) << "element " << i << " from " << x;
      }
    }
    EXPECT_GT(beyond, 0) << "precondition: some |x| > " << fmax << "; max |x| = " << max_in;
    EXPECT_EQ(max_out, fmax);
  }
}

INSTANTIATE_TEST_SUITE_P(Fp8Formats, SaturationTest,
                         ::testing::Values(DType::kFloat8E4M3FN, DType::kFloat8E5M2),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// Test 5 (the backend's view): a KV-shared layer over an fp8 cache still hands fp8 K/V
// (so the kernel's dtype check passes) and asks the kernel not to write.
TEST(ServingPathTest, KvSharedLayerOverFp8CacheDoesNotWrite) {
  AttentionConfig c = BaseConfig(DType::kBFloat16);
  c.kv_share_donor = 0;
  const ServingBatch b = SmallBatch();
  CacheStorage donor_cache(DType::kFloat8E4M3FN, b.num_pages(), b.page_size(), c.num_kv_heads,
                           c.head_dim);
  RecordingBackend rec;
  Attention shared(c, test::RandomWeights(c, 51), rec);
  ASSERT_TRUE(shared.kv_shared());
  Forward(shared, b, donor_cache.layer_cache(KvScales{0.5f, 2.0f}), 52);
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_FALSE(rec.calls[0].options.update_kv_cache);
  EXPECT_EQ(rec.calls[0].k_dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(rec.calls[0].v_dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(rec.calls[0].options.k_scale, std::optional<float>(0.5f));
  EXPECT_EQ(rec.calls[0].options.v_scale, std::optional<float>(2.0f));
}

class CalibratedScalesTest : public ::testing::TestWithParam<DType> {};

// Test 8 (the backend's view): calibrated scales reach the kernel unchanged and change the
// quantized bytes exactly as quantize_kv says.
TEST_P(CalibratedScalesTest, ScalesFlowUnchangedAndChangeTheBytes) {
  const DType cache_dtype = GetParam();
  KvCacheConfig kv = KvCacheConfig::Parse(
      cache_dtype == DType::kFloat8E5M2 ? "fp8_e5m2" : "fp8_e4m3", DType::kFloat32, 3);
  // Not powers of two, so dividing by them moves values between fp8 codes.
  const KvScales calibrated{0.0371f, 2.5f};
  kv.SetScales(2, calibrated);
  const AttentionConfig c = BaseConfig(DType::kFloat32);
  const ServingBatch b = SmallBatch();
  CacheStorage cache(kv.dtype(), b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 61), rec);
  LayerRun run = Forward(layer, b, cache.layer_cache(kv.scales(2)), 62);

  ASSERT_EQ(rec.calls.size(), 1u);
  const RecordedCall& call = rec.calls[0];
  EXPECT_EQ(call.options.k_scale, std::optional<float>(calibrated.k_scale));
  EXPECT_EQ(call.options.v_scale, std::optional<float>(calibrated.v_scale));
  const auto [k, v] = QuantizedProjections(layer, b, run.hidden, kv.dtype(), calibrated);
  EXPECT_EQ(call.k, k);
  EXPECT_EQ(call.v, v);
  const auto [k1, v1] = QuantizedProjections(layer, b, run.hidden, kv.dtype(), KvScales{});
  EXPECT_NE(call.k, k1);
  EXPECT_NE(call.v, v1);
}

INSTANTIATE_TEST_SUITE_P(Fp8Formats, CalibratedScalesTest,
                         ::testing::Values(DType::kFloat8E4M3FN, DType::kFloat8E5M2),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// A bad scale on the layer's cache is refused before anything reaches the kernel.
TEST(ServingPathTest, NonPositiveScaleIsRefused) {
  const AttentionConfig c = BaseConfig(DType::kFloat32);
  const ServingBatch b = SmallBatch();
  CacheStorage cache(DType::kFloat8E4M3FN, b.num_pages(), b.page_size(), c.num_kv_heads,
                     c.head_dim);
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 71), rec);
  EXPECT_THROW(Forward(layer, b, cache.layer_cache(KvScales{0.0f, 1.0f}), 72), InvalidArgument);
  EXPECT_TRUE(rec.calls.empty());
}

}  // namespace
}  // namespace rpa
