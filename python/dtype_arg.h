// Parses a Python dtype argument: a name ("float8_e4m3fn") or anything numpy accepts as a
// dtype (np.float32, ml_dtypes.bfloat16, np.dtype(...)). vLLM-style cache strings ("fp8",
// "auto") are not dtypes; the config layer parses those.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "numerics/dtype.h"
#include "util/error.h"

namespace rpa::python {

inline DType DTypeArg(const pybind11::handle& obj, const char* what) {
  std::string name;
  if (pybind11::isinstance<pybind11::str>(obj)) {
    name = obj.cast<std::string>();
  } else {
    try {
      name = pybind11::str(
                 pybind11::dtype::from_args(pybind11::reinterpret_borrow<pybind11::object>(obj))
                     .attr("name"))
                 .cast<std::string>();
    } catch (const pybind11::error_already_set&) {
      throw InvalidArgument(
          Concat(what, "=", pybind11::repr(obj).cast<std::string>(), " is not a dtype"));
    }
  }
  if (auto d = TryParseDType(name)) return *d;
  throw InvalidArgument(Concat(what, "='", name,
                               "' is not supported; expected one of float32, bfloat16, "
                               "float16, float8_e4m3fn, float8_e5m2"));
}

}  // namespace rpa::python
