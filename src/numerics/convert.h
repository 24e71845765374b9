// Conversions between any two DTypes over spans of elements.
//
// Convert() is the bulk entry point: any length, any alignment, SIMD with runtime dispatch
// (Highway) plus a scalar path; it is bit-identical to converting element by element with
// ConvertScalar() (and so with numerics/scalar_codec.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "numerics/dtype.h"

namespace rpa {

enum class Overflow : uint8_t {
  kNonSaturating,  // ml_dtypes astype: e4m3fn -> NaN, others -> +-inf
  kSaturate,       // clamp finite overflow and +-inf to +-max; NaN stays NaN
};

// One element at `src` (of dtype `from`) decoded to f32. Exact for every dtype.
float LoadAsF32(DType from, const void* src);
// f32 -> one element of dtype `to` at `dst`, one rounding step.
void StoreFromF32(DType to, float value, void* dst, Overflow overflow = Overflow::kNonSaturating);

// Reference bulk conversion: element by element through f32. from == to is a plain copy
// (NaN payloads kept, `overflow` irrelevant), as numpy's astype to the same dtype.
void ConvertScalar(DType from, const void* src, DType to, void* dst, size_t n,
                   Overflow overflow = Overflow::kNonSaturating);

// Fast bulk conversion (SIMD, runtime dispatch). REQUIRES: src and dst do not overlap
// unless src == dst and the element sizes are equal.
void Convert(DType from, const void* src, DType to, void* dst, size_t n,
             Overflow overflow = Overflow::kNonSaturating);

}  // namespace rpa
