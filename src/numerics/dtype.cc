#include "numerics/dtype.h"

#include <cmath>
#include <string>

#include "util/error.h"

namespace rpa {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
  }
  return "invalid_dtype";
}

std::optional<DType> TryParseDType(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

DType ParseDType(std::string_view name) {
  if (auto d = TryParseDType(name)) return *d;
  throw InvalidArgument(Concat("unknown dtype '", name,
                               "'; expected one of float32, bfloat16, float16, "
                               "float8_e4m3fn, float8_e5m2"));
}

FInfo GetFInfo(DType dtype) {
  // max = (2 - 2^-m) * 2^emax except e4m3fn, whose top code 0x7F is NaN, so its largest
  // finite value is 1.75 * 2^8 = 448 (mantissa 110 at the top exponent).
  switch (dtype) {
    case DType::kFloat32:
      return {std::ldexp(2.0 - std::ldexp(1.0, -23), 127), -std::ldexp(2.0 - std::ldexp(1.0, -23), 127),
              std::ldexp(1.0, -23), std::ldexp(1.0, -126), std::ldexp(1.0, -149), 23, 8, true};
    case DType::kBFloat16:
      return {std::ldexp(2.0 - std::ldexp(1.0, -7), 127), -std::ldexp(2.0 - std::ldexp(1.0, -7), 127),
              std::ldexp(1.0, -7), std::ldexp(1.0, -126), std::ldexp(1.0, -133), 7, 8, true};
    case DType::kFloat16:
      return {65504.0, -65504.0, std::ldexp(1.0, -10), std::ldexp(1.0, -14), std::ldexp(1.0, -24),
              10, 5, true};
    case DType::kFloat8E4M3FN:
      return {448.0, -448.0, 0.125, std::ldexp(1.0, -6), std::ldexp(1.0, -9), 3, 4, false};
    case DType::kFloat8E5M2:
      return {57344.0, -57344.0, 0.25, std::ldexp(1.0, -14), std::ldexp(1.0, -16), 2, 5, true};
  }
  throw InvalidArgument("GetFInfo: invalid dtype");
}

}  // namespace rpa
