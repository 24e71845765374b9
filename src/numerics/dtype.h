// The element types of rpa's tensors and their facts.
//
// Names are spelled exactly as numpy / ml_dtypes spell them ("float32", "bfloat16",
// "float16", "float8_e4m3fn", "float8_e5m2"), because they appear in error messages that
// must match the kernel contract (../shared/docs/rpa-contract.md §3) and in Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rpa {

enum class DType : uint8_t {
  kFloat32,
  kBFloat16,
  kFloat16,
  kFloat8E4M3FN,  // OCP e4m3 "fn": no inf, NaN = 0x7F/0xFF, max 448
  kFloat8E5M2,    // OCP e5m2: IEEE-like, inf = 0x7C, max 57344
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16,
                                       DType::kFloat8E4M3FN, DType::kFloat8E5M2};

// numpy / ml_dtypes spelling, e.g. "float8_e4m3fn".
std::string_view DTypeName(DType dtype);

// Parses a numpy / ml_dtypes name. Returns nullopt for anything else.
std::optional<DType> TryParseDType(std::string_view name);
// As above, but throws rpa::InvalidArgument naming the accepted values.
DType ParseDType(std::string_view name);

// Bytes per element: 4, 2, 2, 1, 1.
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16:
    case DType::kFloat16: return 2;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: return 1;
  }
  return 0;  // unreachable for valid enumerators
}

// True for the 1-byte float formats, the ones a KV cache quantizes to.
constexpr bool IsFp8(DType dtype) {
  return dtype == DType::kFloat8E4M3FN || dtype == DType::kFloat8E5M2;
}

// numpy.finfo facts. All values are exactly representable in double.
struct FInfo {
  double max;                  // largest finite value
  double lowest;               // -max
  double eps;                  // distance from 1.0 to the next representable value
  double min_normal;           // smallest positive normal ("tiny" / "smallest_normal")
  double smallest_subnormal;   // smallest positive value
  int mantissa_bits;           // explicit fraction bits
  int exponent_bits;
  bool has_inf;
};
FInfo GetFInfo(DType dtype);

}  // namespace rpa
