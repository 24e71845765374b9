// Declarations of the per-area binding functions that module.cc calls. Each area keeps its
// bindings in its own file (bind_<area>.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace rpa::python {

void BindNumerics(pybind11::module_& m);

}  // namespace rpa::python
