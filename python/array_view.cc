#include "python/array_view.h"

#include "util/error.h"

namespace py = pybind11;

namespace rpa::python {

std::string DTypeNameOf(const py::array& arr) {
  return py::str(arr.dtype().attr("name")).cast<std::string>();
}

DType DTypeOf(const py::array& arr, const char* what) {
  const std::string name = DTypeNameOf(arr);
  if (auto d = TryParseDType(name)) return *d;
  throw InvalidArgument(Concat(what, " has unsupported dtype ", name,
                               "; expected float32, bfloat16, float16, float8_e4m3fn or "
                               "float8_e5m2"));
}

TensorView ViewOf(py::array& arr, const char* what, bool writable) {
  if (arr.ndim() > TensorView::kMaxRank) {
    throw InvalidArgument(Concat(what, " has rank ", arr.ndim(), "; at most ",
                                 TensorView::kMaxRank, " is supported"));
  }
  if (writable && !arr.writeable()) throw InvalidArgument(Concat(what, " must be writeable"));
  TensorView v;
  v.dtype = DTypeOf(arr, what);
  v.rank = static_cast<int>(arr.ndim());
  v.data = writable ? arr.mutable_data() : const_cast<void*>(arr.data());
  const auto item = static_cast<py::ssize_t>(DTypeSize(v.dtype));
  for (int d = 0; d < v.rank; ++d) {
    v.shape[d] = arr.shape(d);
    if (arr.strides(d) % item != 0) {
      throw InvalidArgument(Concat(what, " has a stride not a multiple of its element size"));
    }
    v.strides[d] = arr.strides(d) / item;
  }
  return v;
}

py::dtype NumpyDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return py::dtype("float32");
    case DType::kFloat16: return py::dtype("float16");
    default: {
      py::module_ ml = py::module_::import("ml_dtypes");
      return py::dtype::from_args(ml.attr(std::string(DTypeName(dtype)).c_str()));
    }
  }
}

py::array NewArray(DType dtype, const std::vector<int64_t>& shape) {
  std::vector<py::ssize_t> s(shape.begin(), shape.end());
  return py::array(NumpyDType(dtype), s);
}

}  // namespace rpa::python
