// The _rpa extension module. rpa::InvalidArgument surfaces as ValueError with the same text.
#include <pybind11/pybind11.h>

#include "python/bindings.h"
#include "util/error.h"

PYBIND11_MODULE(_rpa, m) {
  m.doc() = "rpa: ragged paged attention with an fp8 KV cache (C++ core)";
  pybind11::register_exception<rpa::InvalidArgument>(m, "InvalidArgument", PyExc_ValueError);
  rpa::python::BindNumerics(m);
  rpa::python::BindQuantize(m);
  rpa::python::BindAttention(m);
  rpa::python::BindLayers(m);
  rpa::python::BindTokenizer(m);
}
