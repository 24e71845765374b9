// libFuzzer target over the GGUF reader: any byte string must parse or throw
// rpa::ModelFormatError — never crash, hang or read out of bounds (run it under ASan/UBSan).
// A parsed file is then exercised the way a model loader would: every metadata value read
// with its typed getter, the first and last rows of every tensor dequantized.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/dequant.h"
#include "model/gguf.h"

namespace {

void Exercise(const rpa::GgufFile& f) {
  using rpa::GgufValueType;
  for (const rpa::GgufKeyValue& kv : f.metadata()) {
    switch (kv.value.type) {
      case GgufValueType::kString:
        f.GetString(kv.key);
        break;
      case GgufValueType::kBool:
        f.GetBool(kv.key);
        break;
      case GgufValueType::kF32:
      case GgufValueType::kF64:
        f.GetF32(kv.key);
        break;
      case GgufValueType::kU64:
        f.GetU64(kv.key);
        break;
      case GgufValueType::kArray:
        if (kv.value.elem_type == GgufValueType::kString) f.GetStringArray(kv.key);
        if (kv.value.elem_type == GgufValueType::kF32) f.GetF32Array(kv.key);
        break;
      default:  // integers; values outside the getter's range throw ModelFormatError
        try {
          f.GetI32(kv.key);
        } catch (const rpa::ModelFormatError&) {
        }
        break;
    }
  }
  std::vector<float> row;
  for (const rpa::GgufTensorInfo& t : f.tensors()) {
    if (!rpa::IsDequantizable(t.type)) continue;
    // A row's data lies inside the input, so its f32 size is bounded by a small multiple
    // of the input size.
    row.resize(static_cast<size_t>(t.row_length()));
    rpa::DequantizeRow(t.type, t.row(0), row.data(), t.row_length());
    rpa::DequantizeRow(t.type, t.row(t.num_rows() - 1), row.data(), t.row_length());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rpa::GgufFile f = rpa::GgufFile::Parse({data, size}, "fuzz");
    Exercise(f);
  } catch (const rpa::ModelFormatError&) {
  }
  return 0;
}
