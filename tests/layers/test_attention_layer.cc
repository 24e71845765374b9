// The Attention layer's own math and configuration: projections + RoPE against a float64
// reference, option threading (window only for local layers, sinks, soft cap, sm_scale),
// and validation of configs and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "layers/attention.h"
#include "tests/layers/serving_test_util.h"
#include "util/error.h"

namespace rpa {
namespace {

using test::CacheStorage;
using test::RecordingBackend;
using test::ServingBatch;

AttentionConfig Config() {
  AttentionConfig c;
  c.d_model = 40;
  c.num_q_heads = 6;
  c.num_kv_heads = 3;
  c.head_dim = 8;
  return c;
}

// q = RoPE(x · Wqᵀ) per head, in double, written from the formulas (NEOX halves).
std::vector<double> ReferenceQ(const AttentionConfig& c, const AttentionWeights& w,
                               const std::vector<float>& x, std::span<const int32_t> pos,
                               std::vector<double>* magnitude) {
  const int64_t t = static_cast<int64_t>(pos.size()), width = c.num_q_heads * c.head_dim;
  std::vector<double> q(t * width), mag(t * width);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t o = 0; o < width; ++o) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < c.d_model; ++k) {
        s += static_cast<double>(x[i * c.d_model + k]) * w.wq[o * c.d_model + k];
        m += std::fabs(static_cast<double>(x[i * c.d_model + k]) * w.wq[o * c.d_model + k]);
      }
      q[i * width + o] = s;
      mag[i * width + o] = m;
    }
    const int64_t half = c.head_dim / 2;
    for (int64_t h = 0; h < c.num_q_heads; ++h) {
      double* head = &q[i * width + h * c.head_dim];
      double* hm = &mag[i * width + h * c.head_dim];
      for (int64_t p = 0; p < half; ++p) {
        const double freq = std::pow(10000.0, -2.0 * p / c.head_dim);
        const std::complex<double> z =
            std::complex<double>(head[p], head[p + half]) * std::polar(1.0, pos[i] * freq);
        head[p] = z.real();
        head[p + half] = z.imag();
        hm[p] = hm[p + half] = hm[p] + hm[p + half];
      }
    }
  }
  *magnitude = mag;
  return q;
}

TEST(AttentionLayerTest, ProjectionAndRopeMatchFloat64Reference) {
  const AttentionConfig c = Config();
  const AttentionWeights w = test::RandomWeights(c, 1);
  RecordingBackend rec;
  Attention layer(c, w, rec);
  const std::vector<int32_t> pos = {0, 5, 6, 300};
  std::vector<uint8_t> hidden = test::RandomHidden(4, c.d_model, DType::kFloat32, 1.0f, 2);
  std::vector<float> x(4 * c.d_model);
  std::memcpy(x.data(), hidden.data(), hidden.size());
  const QkvProjections p =
      layer.ProjectQkv(TensorView::Contiguous(hidden.data(), DType::kFloat32, {4, c.d_model}), pos);
  ASSERT_EQ(p.q.shape_str(), "(4, 6, 8)");
  ASSERT_EQ(p.k.shape_str(), "(4, 3, 8)");
  std::vector<double> mag;
  const std::vector<double> ref = ReferenceQ(c, w, x, pos, &mag);
  for (size_t i = 0; i < ref.size(); ++i) {
    // f32 dot product of d_model terms: |error| <= d_model * u * sum|x w| (any summation
    // order, FMA or not); the rotation adds 5u relative to the pair's magnitudes (cos/sin
    // rounding, two products, one sum): (d_model + 5) u * (sum over the pair).
    const double tol = (c.d_model + 5) * 0x1p-24 * mag[i];
    EXPECT_NEAR(p.q.as<float>()[i], ref[i], tol) << i;
  }
}

TEST(AttentionLayerTest, WindowOnlyForLocalLayersAndOptionsThreaded) {
  const ServingBatch b({{1, 3}, {2, 2}}, 4);
  AttentionConfig global = Config();
  global.soft_cap = 30.0f;
  global.sm_scale = 0.125f;
  AttentionConfig local = Config();
  local.layer_type = AttentionLayerType::kLocal;
  local.sliding_window = 5;
  local.has_sinks = true;
  for (const AttentionConfig& c : {global, local}) {
    RecordingBackend rec;
    const AttentionWeights w = test::RandomWeights(c, 3);
    Attention layer(c, w, rec);
    CacheStorage cache(DType::kFloat32, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
    std::vector<uint8_t> hidden =
        test::RandomHidden(b.num_tokens(), c.d_model, DType::kFloat32, 1, 4);
    std::vector<float> out(b.num_tokens() * c.d_model);
    LayerKvCache lc = cache.layer_cache();
    layer.ForwardServe(
        TensorView::Contiguous(hidden.data(), DType::kFloat32, {b.num_tokens(), c.d_model}),
        b.positions(), b.batch(), lc,
        TensorView::Contiguous(out.data(), DType::kFloat32, {b.num_tokens(), c.d_model}));
    ASSERT_EQ(rec.calls.size(), 1u);
    const AttentionOptions& o = rec.calls[0].options;
    if (c.layer_type == AttentionLayerType::kLocal) {
      EXPECT_EQ(o.sliding_window, std::optional<int32_t>(5));
      ASSERT_TRUE(o.sinks.has_value());
      EXPECT_EQ(o.sinks->shape_str(), "(6,)");
      EXPECT_EQ(o.sinks->dtype, DType::kFloat32);
      EXPECT_EQ(o.sinks->as<float>()[5], w.sinks[5]);
      EXPECT_EQ(o.sm_scale, 1.0f / std::sqrt(8.0f));
      EXPECT_FALSE(o.soft_cap.has_value());
    } else {
      EXPECT_FALSE(o.sliding_window.has_value());
      EXPECT_FALSE(o.sinks.has_value());
      EXPECT_EQ(o.soft_cap, std::optional<float>(30.0f));
      EXPECT_EQ(o.sm_scale, 0.125f);
    }
    EXPECT_TRUE(o.use_causal_mask);
    EXPECT_TRUE(o.update_kv_cache);
  }
}

TEST(AttentionLayerTest, RejectsInconsistentConfigs) {
  RecordingBackend rec;
  auto make = [&](AttentionConfig c) { Attention(c, test::RandomWeights(Config(), 5), rec); };
  AttentionConfig c = Config();
  c.num_kv_heads = 4;  // 6 % 4 != 0
  EXPECT_THROW(make(c), InvalidArgument);
  c = Config();
  c.layer_type = AttentionLayerType::kLocal;  // no window
  EXPECT_THROW(make(c), InvalidArgument);
  c = Config();
  c.sliding_window = 8;  // a window on a global layer
  EXPECT_THROW(make(c), InvalidArgument);
  c = Config();
  c.qk_norm = true;  // weights lack q_norm / k_norm
  EXPECT_THROW(make(c), InvalidArgument);
  c = Config();
  c.activation_dtype = DType::kFloat16;
  EXPECT_THROW(make(c), InvalidArgument);
  c = Config();
  AttentionWeights w = test::RandomWeights(c, 5);
  w.wo.pop_back();
  try {
    Attention(c, w, rec);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "Attention weight wo has 1919 elements; expected 1920.");
  }
}

TEST(AttentionLayerTest, RejectsMismatchedInputs) {
  const AttentionConfig c = Config();
  RecordingBackend rec;
  Attention layer(c, test::RandomWeights(c, 6), rec);
  const ServingBatch b({{2, 2}}, 4);
  CacheStorage cache(DType::kFloat32, b.num_pages(), b.page_size(), c.num_kv_heads, c.head_dim);
  LayerKvCache lc = cache.layer_cache();
  std::vector<float> h(2 * c.d_model), out(2 * c.d_model);
  const TensorView hv = TensorView::Contiguous(h.data(), DType::kFloat32, {2, c.d_model});
  const TensorView ov = TensorView::Contiguous(out.data(), DType::kFloat32, {2, c.d_model});
  // Activation dtype mismatch.
  const TensorView hb = TensorView::Contiguous(h.data(), DType::kBFloat16, {2, c.d_model});
  try {
    layer.ForwardServe(hb, b.positions(), b.batch(), lc, ov);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "Expected hidden.dtype=bfloat16 to be the activation dtype float32.");
  }
  // Positions of the wrong length.
  const int32_t one = 0;
  EXPECT_THROW(layer.ForwardServe(hv, std::span(&one, 1), b.batch(), lc, ov), InvalidArgument);
  // Wrong width.
  const TensorView narrow = TensorView::Contiguous(h.data(), DType::kFloat32, {4, c.d_model / 2});
  EXPECT_THROW(layer.ForwardServe(narrow, b.positions(), b.batch(), lc, ov), InvalidArgument);
  EXPECT_TRUE(rec.calls.empty());
}

}  // namespace
}  // namespace rpa
