#include "model/ggml_type.h"

#include "util/error.h"

namespace rpa {
namespace {

// K-quants ("_K") use super-blocks of 256 values; the legacy quants blocks of 32.
constexpr GgmlTypeTraits kTraits[] = {
    {GgmlType::kF32, "F32", 1, 4, true},       {GgmlType::kF16, "F16", 1, 2, true},
    {GgmlType::kQ4_0, "Q4_0", 32, 18, true},   {GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, true},   {GgmlType::kQ5_1, "Q5_1", 32, 24, false},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, true},   {GgmlType::kQ8_1, "Q8_1", 32, 40, false},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, false}, {GgmlType::kQ3_K, "Q3_K", 256, 110, false},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, true}, {GgmlType::kQ5_K, "Q5_K", 256, 176, false},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, true}, {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
    {GgmlType::kI8, "I8", 1, 1, false},        {GgmlType::kI16, "I16", 1, 2, false},
    {GgmlType::kI32, "I32", 1, 4, false},      {GgmlType::kI64, "I64", 1, 8, false},
    {GgmlType::kF64, "F64", 1, 8, false},      {GgmlType::kBF16, "BF16", 1, 2, true},
};

}  // namespace

std::optional<GgmlTypeTraits> FindGgmlType(uint32_t code) {
  for (const GgmlTypeTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == code) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type) {
  for (const GgmlTypeTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  CheckFailed("GgmlType outside the table", __FILE__, __LINE__);
}

}  // namespace rpa
