// Declarations of the per-area binding functions that module.cc calls. Each area keeps its
// bindings in its own file (bind_<area>.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace rpa::python {

void BindNumerics(pybind11::module_& m);   // bind_numerics.cc: rpa.cast
void BindQuantize(pybind11::module_& m);   // bind_quantize.cc: rpa.quantize_kv
void BindAttention(pybind11::module_& m);  // bind_attention.cc: rpa.ragged_paged_attention
void BindLayers(pybind11::module_& m);     // bind_layers.cc: rpa.Attention, rpa.kv_cache_dtype
void BindTokenizer(pybind11::module_& m);  // bind_tokenizer.cc: rpa.Tokenizer

}  // namespace rpa::python
