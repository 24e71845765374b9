// Placeholder dispatch: the SIMD paths replace this (see convert.h).
#include "numerics/convert.h"

namespace rpa {

void Convert(DType from, const void* src, DType to, void* dst, size_t n, Overflow overflow) {
  ConvertScalar(from, src, to, dst, n, overflow);
}

}  // namespace rpa
