// rpa.cast: numpy arrays between rpa's float dtypes with the bulk SIMD Convert.
#include <pybind11/numpy.h>

#include <vector>

#include "numerics/convert.h"
#include "python/array_view.h"
#include "python/bindings.h"
#include "python/dtype_arg.h"

namespace py = pybind11;

namespace rpa::python {
namespace {

py::array Cast(const py::array& array, const py::object& dtype, bool saturate) {
  const DType to = DTypeArg(dtype, "dtype");
  const DType from = DTypeOf(array, "array");
  // A C-contiguous view of the input (copied only if it is strided).
  py::array src = py::array::ensure(array, py::array::c_style);
  std::vector<int64_t> shape(src.shape(), src.shape() + src.ndim());
  py::array out = NewArray(to, shape);
  const auto n = static_cast<size_t>(src.size());
  const void* s = src.data();
  void* d = out.mutable_data();
  {
    py::gil_scoped_release release;
    Convert(from, s, to, d, n, saturate ? Overflow::kSaturate : Overflow::kNonSaturating);
  }
  return out;
}

}  // namespace

void BindNumerics(py::module_& m) {
  m.def("cast", &Cast, py::arg("array"), py::arg("dtype"), py::kw_only(),
        py::arg("saturate") = false,
        R"doc(Returns a new C-contiguous array holding `array` converted to `dtype`.

dtype: "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2" or the matching
numpy / ml_dtypes dtype. One round-to-nearest-even step, bit-identical to ml_dtypes'
astype (saturate=False: e4m3fn overflow -> NaN, others -> inf). saturate=True clamps
finite overflow and +-inf to +-max instead; NaN stays NaN either way.)doc");
}

}  // namespace rpa::python
