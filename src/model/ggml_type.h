// ggml tensor types: the element formats a GGUF file can store, and their block layouts.
//
// A ggml type packs `block_size` consecutive values of a row into `type_size` bytes (plain
// types: one value per block). A row of ne[0] values therefore takes
// ne[0] / block_size * type_size bytes and ne[0] must be a multiple of block_size.
// The numbers are ggml's (see ../shared/docs/MODELS.md §3); tests/model checks this table
// against the PyPI `gguf` package's GGML_QUANT_SIZES.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rpa {

// Values are the on-disk codes; only the types whose layout rpa knows are listed. Codes
// left out (the IQ* grids, TQ*, MXFP4, ...) are rejected by the GGUF reader as unsupported.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "Q4_K", "BF16", ...
  uint32_t block_size;    // values per block
  uint32_t type_size;     // bytes per block
  bool dequantizable;     // rpa/model/dequant.h can turn it into f32
};

// Traits of the type with on-disk code `code`, or nullopt when rpa does not know its layout.
std::optional<GgmlTypeTraits> FindGgmlType(uint32_t code);

// Traits of a listed type (never fails).
const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type);

inline std::string_view GgmlTypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

// Every type in the table, for tests and diagnostics.
inline constexpr GgmlType kAllGgmlTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
    GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K, GgmlType::kI8,
    GgmlType::kI16,  GgmlType::kI32,  GgmlType::kI64,  GgmlType::kF64,  GgmlType::kBF16,
};

}  // namespace rpa
