// rpa.Attention: the serving attention layer (layers/attention.h) and rpa.kv_cache_dtype,
// vLLM's kv_cache_dtype strings parsed as the engine parses them.
//
// A layer dispatches to the real kernel, or -- for tests and experiments -- to a Python
// callable `backend(q, k, v, kv_cache, options, out)` that sees exactly what the kernel
// would (arrays are views valid only during the call; copy what you keep) and must fill
// `out`.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/attention.h"
#include "layers/attention_backend.h"
#include "layers/kv_cache_config.h"
#include "python/array_view.h"
#include "python/bindings.h"
#include "python/dtype_arg.h"
#include "util/error.h"

namespace py = pybind11;

namespace rpa::python {
namespace {

// A numpy view of `t` (no copy); the capsule base keeps numpy from copying.
py::array ArrayOf(const TensorView& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.begin() + t.rank);
  std::vector<py::ssize_t> strides(t.rank);
  for (int i = 0; i < t.rank; ++i) {
    strides[i] = static_cast<py::ssize_t>(t.strides[i] * DTypeSize(t.dtype));
  }
  return py::array(NumpyDType(t.dtype), shape, strides, t.data, py::capsule(t.data, [](void*) {}));
}

py::object OptionalFloat(const std::optional<float>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

class PythonBackend final : public AttentionBackend {
 public:
  explicit PythonBackend(py::function fn) : fn_(std::move(fn)) {}
  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata, const AttentionOptions& o,
           const TensorView& output) override {
    (void)metadata;  // the caller of forward_serve passed it; it can keep its own copy
    py::dict options;
    options["sm_scale"] = o.sm_scale;
    options["sliding_window"] =
        o.sliding_window ? py::object(py::int_(*o.sliding_window)) : py::object(py::none());
    options["soft_cap"] = OptionalFloat(o.soft_cap);
    options["sinks"] = o.sinks ? py::object(ArrayOf(*o.sinks)) : py::object(py::none());
    options["q_scale"] = OptionalFloat(o.q_scale);
    options["k_scale"] = OptionalFloat(o.k_scale);
    options["v_scale"] = OptionalFloat(o.v_scale);
    options["use_causal_mask"] = o.use_causal_mask;
    options["update_kv_cache"] = o.update_kv_cache;
    fn_(ArrayOf(queries), ArrayOf(keys), ArrayOf(values), ArrayOf(kv_cache), options,
        ArrayOf(output));
  }

 private:
  py::function fn_;
};

std::vector<float> F32Vector(const py::object& obj, const char* what) {
  if (obj.is_none()) return {};
  py::array arr = py::array::ensure(obj, py::array::c_style);
  if (!arr || DTypeOf(arr, what) != DType::kFloat32) {
    throw InvalidArgument(Concat(what, " must be a float32 array."));
  }
  const float* p = static_cast<const float*>(arr.data());
  return std::vector<float>(p, p + arr.size());
}

std::span<const int32_t> Int32Span(py::array& arr, const char* what) {
  if (DTypeNameOf(arr) != "int32" || arr.ndim() != 1 || !(arr.flags() & py::array::c_style)) {
    throw InvalidArgument(Concat(
        "Expected ", what, " to be a contiguous 1-D int32 array; got dtype=", DTypeNameOf(arr),
        " ndim=", arr.ndim(), "."));
  }
  return std::span<const int32_t>(static_cast<const int32_t*>(arr.data()), arr.size());
}

// Owns the backend the layer dispatches to and the layer.
class PyAttention {
 public:
  PyAttention(const py::array& wq, const py::array& wk, const py::array& wv, const py::array& wo,
              int64_t num_q_heads, int64_t num_kv_heads, int64_t head_dim,
              const py::object& activation_dtype, const std::string& layer_type,
              int32_t sliding_window, const std::string& rope_style, float rope_theta,
              float rope_position_scale, const py::object& q_norm, const py::object& k_norm,
              float norm_eps, float norm_weight_offset, std::optional<float> sm_scale,
              std::optional<float> soft_cap, const py::object& sinks,
              std::optional<int> kv_share_donor, const py::object& backend) {
    AttentionConfig c;
    if (wq.ndim() != 2) throw InvalidArgument("wq must be 2-D [Hq*D, d_model].");
    c.d_model = wq.shape(1);
    c.num_q_heads = num_q_heads;
    c.num_kv_heads = num_kv_heads;
    c.head_dim = head_dim;
    c.activation_dtype = DTypeArg(activation_dtype, "activation_dtype");
    if (layer_type == "global") {
      c.layer_type = AttentionLayerType::kGlobal;
    } else if (layer_type == "local") {
      c.layer_type = AttentionLayerType::kLocal;
    } else {
      throw InvalidArgument(Concat("layer_type=\"", layer_type, "\"; expected global or local."));
    }
    c.sliding_window = sliding_window;
    if (rope_style == "neox") {
      c.rope.style = RopeStyle::kNeoxHalves;
    } else if (rope_style == "adjacent") {
      c.rope.style = RopeStyle::kAdjacentPairs;
    } else {
      throw InvalidArgument(Concat("rope_style=\"", rope_style, "\"; expected neox or adjacent."));
    }
    c.rope.theta = rope_theta;
    c.rope.position_scale = rope_position_scale;
    c.qk_norm = !q_norm.is_none() || !k_norm.is_none();
    c.qk_norm_config = RmsNormConfig{norm_eps, norm_weight_offset};
    c.sm_scale = sm_scale;
    c.soft_cap = soft_cap;
    c.has_sinks = !sinks.is_none();
    c.kv_share_donor = kv_share_donor;
    AttentionWeights w{F32Vector(wq, "wq"),         F32Vector(wk, "wk"),
                       F32Vector(wv, "wv"),         F32Vector(wo, "wo"),
                       F32Vector(q_norm, "q_norm"), F32Vector(k_norm, "k_norm"),
                       F32Vector(sinks, "sinks")};
    python_backend_ = !backend.is_none();
    if (python_backend_) {
      backend_ = std::make_unique<PythonBackend>(backend.cast<py::function>());
    } else {
      backend_ = std::make_unique<KernelBackend>();
    }
    layer_ = std::make_unique<Attention>(c, std::move(w), *backend_);
  }

  py::array ForwardServe(py::array hidden, py::array positions, py::array kv_lens,
                         py::array page_indices, py::array cu_q_lens, py::array distribution,
                         py::array kv_cache, float k_scale, float v_scale) {
    const AttentionConfig& c = layer_->config();
    hidden = py::array::ensure(hidden, py::array::c_style);
    const TensorView h = ViewOf(hidden, "hidden");
    py::array out = NewArray(c.activation_dtype, {h.rank > 0 ? h.shape[0] : 0, c.d_model});
    const RaggedBatch batch{AttentionMetadata{
        Int32Span(kv_lens, "kv_lens"), Int32Span(page_indices, "page_indices"),
        Int32Span(cu_q_lens, "cu_q_lens"), Int32Span(distribution, "distribution")}};
    LayerKvCache cache{ViewOf(kv_cache, "kv_cache", /*writable=*/true), KvScales{k_scale, v_scale}};
    const std::span<const int32_t> pos = Int32Span(positions, "positions");
    const TensorView out_view = ViewOf(out, "output", true);
    if (python_backend_) {  // the callback needs the GIL
      layer_->ForwardServe(h, pos, batch, cache, out_view);
    } else {
      py::gil_scoped_release release;
      layer_->ForwardServe(h, pos, batch, cache, out_view);
    }
    return out;
  }

  py::tuple ProjectQkv(py::array hidden, py::array positions) {
    hidden = py::array::ensure(hidden, py::array::c_style);
    const QkvProjections p =
        layer_->ProjectQkv(ViewOf(hidden, "hidden"), Int32Span(positions, "positions"));
    // Copies: the views point into the layer's scratch.
    auto copy = [](const TensorView& t) { return ArrayOf(t).attr("copy")(); };
    return py::make_tuple(copy(p.q), copy(p.k), copy(p.v));
  }

 private:
  bool python_backend_ = false;
  std::unique_ptr<AttentionBackend> backend_;
  std::unique_ptr<Attention> layer_;
};

}  // namespace

void BindLayers(py::module_& m) {
  m.def(
      "kv_cache_dtype",
      [](const std::string& s, const py::object& activation_dtype) {
        return std::string(
            DTypeName(ParseKvCacheDtype(s, DTypeArg(activation_dtype, "activation_dtype"))));
      },
      py::arg("kv_cache_dtype"), py::arg("activation_dtype") = "float32",
      R"doc(The cache dtype name for vLLM's kv_cache_dtype string (auto, bfloat16, fp8,
fp8_e4m3, fp8_e5m2); "auto" is the activation dtype. ValueError for anything else.)doc");

  py::class_<PyAttention>(m, "Attention", R"doc(One layer's serving attention.

Weights are float32 in the nn.Linear layout: wq [Hq*D, d_model], wk/wv [Hkv*D, d_model],
wo [d_model, Hq*D]; q_norm/k_norm [D] enable per-head RMSNorm; sinks [Hq]. forward_serve
quantizes K/V with quantize_kv when kv_cache is fp8 (passing k_scale/v_scale to the
kernel) and leaves them unchanged otherwise. backend: None = the real kernel, or a
callable(q, k, v, kv_cache, options, out) that must fill out.)doc")
      .def(py::init<const py::array&, const py::array&, const py::array&, const py::array&, int64_t,
                    int64_t, int64_t, const py::object&, const std::string&, int32_t,
                    const std::string&, float, float, const py::object&, const py::object&, float,
                    float, std::optional<float>, std::optional<float>, const py::object&,
                    std::optional<int>, const py::object&>(),
           py::arg("wq"), py::arg("wk"), py::arg("wv"), py::arg("wo"), py::kw_only(),
           py::arg("num_q_heads"), py::arg("num_kv_heads"), py::arg("head_dim"),
           py::arg("activation_dtype") = "float32", py::arg("layer_type") = "global",
           py::arg("sliding_window") = 0, py::arg("rope_style") = "neox",
           py::arg("rope_theta") = 10000.0f, py::arg("rope_position_scale") = 1.0f,
           py::arg("q_norm") = py::none(), py::arg("k_norm") = py::none(),
           py::arg("norm_eps") = 1e-6f, py::arg("norm_weight_offset") = 0.0f,
           py::arg("sm_scale") = py::none(), py::arg("soft_cap") = py::none(),
           py::arg("sinks") = py::none(), py::arg("kv_share_donor") = py::none(),
           py::arg("backend") = py::none())
      .def("forward_serve", &PyAttention::ForwardServe, py::arg("hidden"), py::arg("positions"),
           py::arg("kv_lens"), py::arg("page_indices"), py::arg("cu_q_lens"),
           py::arg("distribution"), py::arg("kv_cache"), py::kw_only(), py::arg("k_scale") = 1.0f,
           py::arg("v_scale") = 1.0f,
           "hidden [T, d_model] -> [T, d_model]; kv_cache [NP, PS, 2*Hkv, D] is updated in place "
           "(unless the layer is KV-shared).")
      .def("project_qkv", &PyAttention::ProjectQkv, py::arg("hidden"), py::arg("positions"),
           "(q [T, Hq, D], k, v [T, Hkv, D]) after norm and RoPE, in the activation dtype.");
}

}  // namespace rpa::python
