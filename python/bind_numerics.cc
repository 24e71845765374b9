#include "python/bindings.h"

namespace rpa::python {

void BindNumerics(pybind11::module_& m) {
  (void)m;  // rpa.cast lands with the numerics work.
}

}  // namespace rpa::python
