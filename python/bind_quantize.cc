// rpa.quantize_kv: new K/V rows -> the fp8 cache dtype (rpa-contract.md §4).
#include <pybind11/numpy.h>

#include <vector>

#include "kernels/quantize_kv.h"
#include "python/array_view.h"
#include "python/bindings.h"
#include "python/dtype_arg.h"

namespace py = pybind11;

namespace rpa::python {
namespace {

py::tuple QuantizeKvPy(const py::object& dtype, const py::array& key, const py::array& value,
                       float k_scale, float v_scale) {
  const DType cache_dtype = DTypeArg(dtype, "dtype");
  py::array k = py::array::ensure(key, py::array::c_style);
  py::array v = py::array::ensure(value, py::array::c_style);
  const TensorView kv = ViewOf(k, "key"), vv = ViewOf(v, "value");
  // Outputs get the input shapes; QuantizeKv rejects mismatches and non-fp8 dtypes before
  // anything is written.
  std::vector<int64_t> k_shape(k.shape(), k.shape() + k.ndim());
  std::vector<int64_t> v_shape(v.shape(), v.shape() + v.ndim());
  const DType out_dtype = IsFp8(cache_dtype) ? cache_dtype : DType::kFloat8E4M3FN;
  py::array k_out = NewArray(out_dtype, k_shape), v_out = NewArray(out_dtype, v_shape);
  const TensorView ko = ViewOf(k_out, "key_out", true), vo = ViewOf(v_out, "value_out", true);
  {
    py::gil_scoped_release release;
    QuantizeKv(cache_dtype, kv, vv, k_scale, v_scale, ko, vo);
  }
  return py::make_tuple(k_out, v_out);
}

}  // namespace

void BindQuantize(py::module_& m) {
  m.def("quantize_kv", &QuantizeKvPy, py::arg("dtype"), py::arg("key"), py::arg("value"),
        py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
        R"doc(Quantizes new K/V rows to an fp8 KV-cache dtype; returns (k, v).

out = cast(clip(x / scale, -max, max)): f32 division by the f32 scale, clip to the
finite range (float8_e4m3fn 448, float8_e5m2 57344), one round-to-nearest-even cast.
NaN stays NaN, +-inf becomes +-max. dtype: "float8_e4m3fn" / "float8_e5m2" or the
ml_dtypes dtype; key and value: same shape, any rpa float dtype. Scales must be finite
and > 0. Raises ValueError otherwise.)doc");
}

}  // namespace rpa::python
