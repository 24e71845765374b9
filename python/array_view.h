// numpy <-> TensorView glue shared by every binding file.
//
// bfloat16 and the fp8 formats are ml_dtypes' numpy dtypes; a dtype is recognised by its
// name ("bfloat16", "float8_e4m3fn", ...), which is how numpy and ml_dtypes spell them and
// how rpa::DTypeName spells them too.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "numerics/dtype.h"
#include "numerics/tensor_view.h"

namespace rpa::python {

// The numpy dtype name of `arr`, e.g. "float8_e4m3fn" or "int32".
std::string DTypeNameOf(const pybind11::array& arr);

// The rpa DType of `arr`; throws InvalidArgument (-> ValueError) for other dtypes, naming
// `what` (e.g. "queries").
DType DTypeOf(const pybind11::array& arr, const char* what);

// A view of `arr` (strides converted from bytes to elements). REQUIRES arr to stay alive.
// Throws InvalidArgument if rank > 4, the dtype is not an rpa dtype, or a stride is not a
// multiple of the element size. `writable` demands a writeable array.
TensorView ViewOf(pybind11::array& arr, const char* what, bool writable = false);

// The numpy dtype object for an rpa DType (imports ml_dtypes for bf16 / fp8).
pybind11::dtype NumpyDType(DType dtype);

// A new C-contiguous, uninitialised array.
pybind11::array NewArray(DType dtype, const std::vector<int64_t>& shape);

}  // namespace rpa::python
