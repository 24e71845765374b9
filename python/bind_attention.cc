#include "python/bindings.h"

namespace rpa::python {

void BindAttention(pybind11::module_& m) {
  (void)m;  // placeholder until this area's bindings land
}

}  // namespace rpa::python
