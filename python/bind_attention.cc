// rpa.ragged_paged_attention: the kernel of rpa-contract.md §1-§3 on numpy arrays.
//
// The binding only adapts arrays: it makes the read-only inputs contiguous when they are
// not, checks what a TensorView cannot express (metadata dtypes and ranks, §3 items 10 and
// 11; cache dtypes numpy has but rpa does not), and leaves every other check, with its
// message, to the kernel. The cache is updated in place and returned as the same object.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "kernels/attention_validate.h"
#include "kernels/ragged_paged_attention.h"
#include "numerics/dtype.h"
#include "python/array_view.h"
#include "python/bindings.h"
#include "util/error.h"

namespace py = pybind11;

namespace rpa::python {
namespace {

// numpy's shape text: "(4,)", "(2, 3)", "()".
std::string ShapeText(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    if (d) s += ", ";
    s += std::to_string(a.shape(d));
  }
  if (a.ndim() == 1) s += ",";
  return s + ")";
}

// The metadata checks the kernel's int32 spans cannot see (§3 items 10, 11, and 14 for a
// distribution of the wrong rank), then a C-contiguous int32 array of it.
struct Metadata {
  py::array_t<int32_t> kv_lens, page_indices, cu_q_lens, distribution;
};
Metadata CheckedMetadata(const py::array& kv_lens, const py::array& page_indices,
                         const py::array& cu_q_lens, const py::array& distribution) {
  const std::string names[] = {DTypeNameOf(kv_lens), DTypeNameOf(page_indices),
                               DTypeNameOf(cu_q_lens), DTypeNameOf(distribution)};
  CheckMetadataArrays({names[0], ShapeText(kv_lens), static_cast<int>(kv_lens.ndim())},
                      {names[1], ShapeText(page_indices), static_cast<int>(page_indices.ndim())},
                      {names[2], ShapeText(cu_q_lens), static_cast<int>(cu_q_lens.ndim())},
                      {names[3], ShapeText(distribution), static_cast<int>(distribution.ndim())});
  if (distribution.ndim() != 1) {  // the span would hide the rank: item 14's message here
    throw InvalidArgument(
        Concat("Expected distribution.shape=", ShapeText(distribution), " to be (3,)."));
  }
  using Int32 = py::array_t<int32_t, py::array::c_style>;
  return {Int32::ensure(kv_lens), Int32::ensure(page_indices), Int32::ensure(cu_q_lens),
          Int32::ensure(distribution)};
}

std::span<const int32_t> SpanOf(const py::array_t<int32_t>& a) {
  return {a.data(), static_cast<size_t>(a.size())};
}

// §3 items 8 and 9 for cache dtypes that have no rpa DType (int8, uint8, bool, ...), which
// ViewOf could only call "unsupported". rpa's own dtypes are left to the kernel's checks.
void CheckForeignCacheDtype(const py::array& kv_cache, const py::array& keys,
                            const py::array& values) {
  const std::string cache = DTypeNameOf(kv_cache);
  if (TryParseDType(cache)) return;
  const std::string k = DTypeNameOf(keys), v = DTypeNameOf(values);
  if (cache != k || cache != v) {
    throw InvalidArgument(Concat("Expected kv_cache.dtype=", cache, " to be equal to k.dtype=", k,
                                 " and v.dtype=", v, "."));
  }
  const char kind = kv_cache.dtype().kind();
  if (kind != 'f' && kind != 'V') {  // ml_dtypes' floats have kind 'V'
    throw InvalidArgument(Concat("Expected kv_cache.dtype=", cache, " to be a floating point."));
  }
}

py::tuple RaggedPagedAttentionPy(const py::array& queries, const py::array& keys,
                                 const py::array& values, py::array kv_cache,
                                 const py::array& kv_lens, const py::array& page_indices,
                                 const py::array& cu_q_lens, const py::array& distribution,
                                 float sm_scale, std::optional<int32_t> sliding_window,
                                 std::optional<float> soft_cap, std::optional<py::array> sinks,
                                 std::optional<float> q_scale, std::optional<float> k_scale,
                                 std::optional<float> v_scale, bool use_causal_mask,
                                 bool update_kv_cache) {
  const Metadata md = CheckedMetadata(kv_lens, page_indices, cu_q_lens, distribution);
  CheckForeignCacheDtype(kv_cache, keys, values);
  // Read-only inputs: copied only when not C-contiguous. The cache is never copied.
  py::array q = py::array::ensure(queries, py::array::c_style);
  py::array k = py::array::ensure(keys, py::array::c_style);
  py::array v = py::array::ensure(values, py::array::c_style);
  const TensorView qv = ViewOf(q, "queries"), kv = ViewOf(k, "keys"), vv = ViewOf(v, "values");
  const TensorView cache = ViewOf(kv_cache, "kv_cache", /*writable=*/update_kv_cache);

  AttentionOptions options;
  options.sm_scale = sm_scale;
  options.sliding_window = sliding_window;
  options.soft_cap = soft_cap;
  options.q_scale = q_scale;
  options.k_scale = k_scale;
  options.v_scale = v_scale;
  options.use_causal_mask = use_causal_mask;
  options.update_kv_cache = update_kv_cache;
  py::array sinks_array;
  if (sinks) {
    sinks_array = py::array::ensure(*sinks, py::array::c_style);
    if (DTypeNameOf(sinks_array) != "float32") {  // §3 item 17: sinks must be f32 [Hq]
      throw InvalidArgument(Concat(
          "Expected attention_sink.shape[0]=", sinks_array.ndim() >= 1 ? sinks_array.shape(0) : 0,
          " to be equal to q.shape[1]=", queries.ndim() >= 2 ? queries.shape(1) : 0,
          " (num_q_heads)."));
    }
    options.sinks = ViewOf(sinks_array, "sinks");
  }

  // The output has the queries' shape and dtype; ViewOf already rejected ranks above 4.
  std::vector<int64_t> out_shape(q.shape(), q.shape() + q.ndim());
  py::array output = NewArray(qv.dtype, out_shape);
  const TensorView ov = ViewOf(output, "output", /*writable=*/true);
  const AttentionMetadata metadata{SpanOf(md.kv_lens), SpanOf(md.page_indices),
                                   SpanOf(md.cu_q_lens), SpanOf(md.distribution)};
  {
    py::gil_scoped_release release;
    RaggedPagedAttention(qv, kv, vv, cache, metadata, options, ov);
  }
  return py::make_tuple(output, kv_cache);
}

}  // namespace

void BindAttention(py::module_& m) {
  m.def("ragged_paged_attention", &RaggedPagedAttentionPy, py::arg("queries"), py::arg("keys"),
        py::arg("values"), py::arg("kv_cache"), py::arg("kv_lens"), py::arg("page_indices"),
        py::arg("cu_q_lens"), py::arg("distribution"), py::kw_only(), py::arg("sm_scale") = 1.0f,
        py::arg("sliding_window") = py::none(), py::arg("soft_cap") = py::none(),
        py::arg("sinks") = py::none(), py::arg("q_scale") = py::none(),
        py::arg("k_scale") = py::none(), py::arg("v_scale") = py::none(),
        py::arg("use_causal_mask") = true, py::arg("update_kv_cache") = true,
        R"doc(Ragged paged attention (rpa-contract.md); returns (output, kv_cache).

queries [T, Hq, D] float32/bfloat16; keys, values [T, Hkv, D] in the cache dtype (already
quantized, e.g. by rpa.quantize_kv); kv_cache [NP, PS, 2*Hkv, D] float32, bfloat16,
float8_e4m3fn or float8_e5m2 (slot 2h = K of kv head h, 2h+1 = V), updated in place unless
update_kv_cache is False and returned as the same object; kv_lens [S], page_indices
[S*PPS], cu_q_lens [S+1], distribution [3]: int32. output [T, Hq, D] has the queries'
dtype; rows past cu_q_lens[distribution[2]] are unspecified. Raises ValueError with the
contract's messages. The GIL is released while the kernel runs.)doc");
}

}  // namespace rpa::python
