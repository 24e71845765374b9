#include "layers/attention.h"

#include <cmath>
#include <utility>

#include "kernels/matmul.h"
#include "kernels/quantize_kv.h"
#include "layers/hadamard.h"
#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {
namespace {

void CheckWeightSize(const std::vector<float>& w, int64_t expected, const char* name) {
  if (static_cast<int64_t>(w.size()) != expected) {
    throw InvalidArgument(Concat("Attention weight ", name, " has ", w.size(),
                                 " elements; expected ", expected, "."));
  }
}

// Packs w [n, k] and frees the f32 copy.
PackedWeights Pack(std::vector<float>& w, int64_t n, int64_t k, WeightFormat format) {
  PackedWeights packed(w.data(), static_cast<size_t>(n), static_cast<size_t>(k), format);
  std::vector<float>().swap(w);
  return packed;
}

// Grows `buf` to hold at least `bytes` and returns its data.
void* Reserve(std::vector<uint8_t>& buf, size_t bytes) {
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}
float* Reserve(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Checks a [T, width] activation tensor: rank 2, contiguous, `dtype`.
void CheckActivation(const TensorView& t, const char* name, int64_t width, DType dtype) {
  if (t.rank != 2 || t.shape[1] != width || !t.is_contiguous()) {
    throw InvalidArgument(Concat("Expected ", name, ".shape=", t.shape_str(),
                                 " to be a contiguous (T, ", width, ")."));
  }
  if (t.dtype != dtype) {
    throw InvalidArgument(Concat("Expected ", name, ".dtype=", DTypeName(t.dtype),
                                 " to be the activation dtype ", DTypeName(dtype), "."));
  }
}

}  // namespace

Attention::Attention(const AttentionConfig& config, AttentionWeights weights,
                     AttentionBackend& backend)
    : config_(config), weights_(std::move(weights)), backend_(backend) {
  const AttentionConfig& c = config_;
  if (c.d_model <= 0 || c.num_q_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
      c.head_dim % 2 != 0 || c.num_q_heads % c.num_kv_heads != 0) {
    throw InvalidArgument(Concat("Invalid attention shape: d_model=", c.d_model,
                                 ", num_q_heads=", c.num_q_heads, ", num_kv_heads=", c.num_kv_heads,
                                 ", head_dim=", c.head_dim,
                                 " (need positive sizes, even head_dim, Hq % Hkv == 0)."));
  }
  if (c.activation_dtype != DType::kFloat32 && c.activation_dtype != DType::kBFloat16) {
    throw InvalidArgument(Concat("activation dtype=", DTypeName(c.activation_dtype),
                                 " must be float32 or bfloat16."));
  }
  if (c.layer_type == AttentionLayerType::kLocal && c.sliding_window <= 0) {
    throw InvalidArgument(
        Concat("A local attention layer needs sliding_window > 0; got ", c.sliding_window, "."));
  }
  if (c.layer_type == AttentionLayerType::kGlobal && c.sliding_window != 0) {
    throw InvalidArgument(Concat("sliding_window=", c.sliding_window,
                                 " is set on a global attention layer; only local layers "
                                 "have a window."));
  }
  if (c.rotate_qk && !IsPowerOfTwo(c.head_dim)) {
    throw InvalidArgument(
        Concat("rotate_qk needs a power-of-two head_dim; got head_dim=", c.head_dim, "."));
  }
  if (c.kv_share_donor && *c.kv_share_donor < 0) {
    throw InvalidArgument(Concat("kv_share_donor=", *c.kv_share_donor, " must be >= 0."));
  }
  const int64_t q_width = c.num_q_heads * c.head_dim;
  const int64_t kv_width = c.num_kv_heads * c.head_dim;
  CheckWeightSize(weights_.wq, q_width * c.d_model, "wq");
  CheckWeightSize(weights_.wk, kv_width * c.d_model, "wk");
  CheckWeightSize(weights_.wv, kv_width * c.d_model, "wv");
  CheckWeightSize(weights_.wo, c.d_model * q_width, "wo");
  CheckWeightSize(weights_.q_norm, c.qk_norm ? c.head_dim : 0, "q_norm");
  CheckWeightSize(weights_.k_norm, c.qk_norm ? c.head_dim : 0, "k_norm");
  CheckWeightSize(weights_.sinks, c.has_sinks ? c.num_q_heads : 0, "sinks");
  wq_ = Pack(weights_.wq, q_width, c.d_model, c.weight_format);
  wk_ = Pack(weights_.wk, kv_width, c.d_model, c.weight_format);
  wv_ = Pack(weights_.wv, kv_width, c.d_model, c.weight_format);
  wo_ = Pack(weights_.wo, c.d_model, q_width, c.weight_format);
}

QkvProjections Attention::ProjectQkv(const TensorView& hidden, std::span<const int32_t> positions) {
  const AttentionConfig& c = config_;
  CheckActivation(hidden, "hidden", c.d_model, c.activation_dtype);
  const int64_t t = hidden.shape[0];
  if (static_cast<int64_t>(positions.size()) != t) {
    throw InvalidArgument(Concat("Expected positions.size()=", positions.size(),
                                 " to be equal to hidden.shape[0]=", t, "."));
  }
  const float* x = hidden.as<const float>();
  if (c.activation_dtype != DType::kFloat32) {
    float* x_f32 = Reserve(x_f32_, t * c.d_model);
    Convert(c.activation_dtype, hidden.data, DType::kFloat32, x_f32, t * c.d_model);
    x = x_f32;
  }
  const int64_t hq = c.num_q_heads, hkv = c.num_kv_heads, d = c.head_dim;
  float* q = Reserve(q_f32_, t * hq * d);   // [T, Hq, D]
  float* k = Reserve(k_f32_, t * hkv * d);  // [T, Hkv, D]
  float* v = Reserve(v_f32_, t * hkv * d);  // [T, Hkv, D]
  MatMul(x, wq_, q, t);
  MatMul(x, wk_, k, t);
  MatMul(x, wv_, v, t);
  if (c.qk_norm) {
    RmsNormRows(c.qk_norm_config, weights_.q_norm.data(), q, t * hq, d);
    RmsNormRows(c.qk_norm_config, weights_.k_norm.data(), k, t * hkv, d);
  }
  ApplyRope(c.rope, positions, q, t, hq, d);
  ApplyRope(c.rope, positions, k, t, hkv, d);
  if (c.rotate_qk) {  // after RoPE (which is position-dependent), before any K rounding
    HadamardRotateRows(q, t * hq, d);
    HadamardRotateRows(k, t * hkv, d);
  }

  // Hand the projections on in the activation dtype: one rounding, after RoPE.
  auto as_activation = [&](float* src, std::vector<uint8_t>& buf, int64_t heads) {
    if (c.activation_dtype == DType::kFloat32) {
      return TensorView::Contiguous(src, DType::kFloat32, {t, heads, d});
    }
    void* dst = Reserve(buf, t * heads * d * DTypeSize(c.activation_dtype));
    Convert(DType::kFloat32, src, c.activation_dtype, dst, t * heads * d);
    return TensorView::Contiguous(dst, c.activation_dtype, {t, heads, d});
  };
  return QkvProjections{as_activation(q, q_act_, hq), as_activation(k, k_act_, hkv),
                        as_activation(v, v_act_, hkv)};
}

AttentionOptions Attention::KernelOptions() const {
  const AttentionConfig& c = config_;
  AttentionOptions options;
  options.sm_scale = c.sm_scale.value_or(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  // The window is a property of local layers only; a global layer passes none.
  if (c.layer_type == AttentionLayerType::kLocal) options.sliding_window = c.sliding_window;
  options.soft_cap = c.soft_cap;
  if (c.has_sinks) {
    // The kernel only reads sinks; TensorView has no const flavour.
    options.sinks = TensorView::Contiguous(const_cast<float*>(weights_.sinks.data()),
                                           DType::kFloat32, {c.num_q_heads});
  }
  options.update_kv_cache = !kv_shared();
  return options;
}

void Attention::PrepareKv(const QkvProjections& qkv, const LayerKvCache& cache, TensorView& keys,
                          TensorView& values, AttentionOptions& options) {
  const DType cache_dtype = cache.dtype();
  if (cache_dtype == config_.activation_dtype) {  // e.g. "auto", or bf16 over bf16
    keys = qkv.k;
    values = qkv.v;
    return;
  }
  keys = qkv.k;
  values = qkv.v;
  keys.data = Reserve(k_cache_, qkv.k.numel() * DTypeSize(cache_dtype));
  values.data = Reserve(v_cache_, qkv.v.numel() * DTypeSize(cache_dtype));
  keys.dtype = values.dtype = cache_dtype;
  if (IsFp8(cache_dtype)) {
    // The fix: quantize before dispatch, through the one shared helper, and thread the
    // scales so the kernel dequantizes (it never casts K/V itself).
    QuantizeKv(cache_dtype, qkv.k, qkv.v, cache.scales.k_scale, cache.scales.v_scale, keys, values);
    options.k_scale = cache.scales.k_scale;
    options.v_scale = cache.scales.v_scale;
    return;
  }
  // A non-fp8 cache of another dtype (f32 activations over a bf16 cache): a plain cast,
  // the same rounding the cache would apply to any stored activation; no scales.
  Convert(qkv.k.dtype, qkv.k.data, cache_dtype, keys.data, qkv.k.numel());
  Convert(qkv.v.dtype, qkv.v.data, cache_dtype, values.data, qkv.v.numel());
}

void Attention::ProjectOutput(const TensorView& attn, const TensorView& output) {
  const AttentionConfig& c = config_;
  const int64_t q_width = c.num_q_heads * c.head_dim;
  const int64_t t = attn.shape[0];
  if (attn.rank != 3 || attn.shape[1] != c.num_q_heads || attn.shape[2] != c.head_dim ||
      !attn.is_contiguous() || attn.dtype != c.activation_dtype) {
    throw InvalidArgument(Concat("Expected attn.shape=", attn.shape_str(), " dtype=",
                                 DTypeName(attn.dtype), " to be a contiguous (T, ", c.num_q_heads,
                                 ", ", c.head_dim, ") ", DTypeName(c.activation_dtype), "."));
  }
  CheckActivation(output, "output", c.d_model, c.activation_dtype);
  if (output.shape[0] != t) {
    throw InvalidArgument(Concat("Expected output.shape[0]=", output.shape[0],
                                 " to be equal to attn.shape[0]=", t, "."));
  }
  const float* a = attn.as<const float>();
  if (c.activation_dtype != DType::kFloat32) {
    float* a_f32 = Reserve(attn_f32_, t * q_width);
    Convert(c.activation_dtype, attn.data, DType::kFloat32, a_f32, t * q_width);
    a = a_f32;
  }
  if (c.activation_dtype == DType::kFloat32) {
    MatMul(a, wo_, output.as<float>(), t);
    return;
  }
  float* y = Reserve(out_f32_, t * c.d_model);
  MatMul(a, wo_, y, t);
  Convert(DType::kFloat32, y, c.activation_dtype, output.data, t * c.d_model);
}

void Attention::ForwardServe(const TensorView& hidden, std::span<const int32_t> positions,
                             const RaggedBatch& batch, LayerKvCache& cache,
                             const TensorView& output) {
  const AttentionConfig& c = config_;
  CheckActivation(output, "output", c.d_model, c.activation_dtype);
  if (output.shape[0] != hidden.shape[0]) {
    throw InvalidArgument(Concat("Expected output.shape=", output.shape_str(),
                                 " to be equal to hidden.shape=", hidden.shape_str(), "."));
  }
  const QkvProjections qkv = ProjectQkv(hidden, positions);
  AttentionOptions options = KernelOptions();
  TensorView keys, values;
  PrepareKv(qkv, cache, keys, values, options);

  const int64_t t = hidden.shape[0];
  void* attn = Reserve(attn_out_, t * c.num_q_heads * c.head_dim * DTypeSize(c.activation_dtype));
  const TensorView attn_view =
      TensorView::Contiguous(attn, c.activation_dtype, {t, c.num_q_heads, c.head_dim});
  backend_.RunWithPlans(batch.plans, qkv.q, keys, values, cache.pages, batch.metadata, options,
                        attn_view);
  ProjectOutput(attn_view, output);
}

}  // namespace rpa
