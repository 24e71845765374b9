// GGUF v3 reader: metadata and tensor directory of a model file, over a read-only mapping.
//
// Layout (little-endian; ../shared/docs/MODELS.md §3):
//   "GGUF" u32 version u64 tensor_count u64 kv_count
//   kv_count x   { string key; u32 value_type; value }
//   tensor_count x { string name; u32 n_dims; i64 ne[n_dims]; u32 ggml_type; u64 offset }
//   padding to general.alignment (default 32), then the data section; tensor offsets are
//   relative to it and aligned.
// A string is u64 length + bytes (no terminator); an array is u32 element type + u64 count
// + elements.
//
// Everything read from the file is untrusted. Parsing validates every count, length, type
// code, dimension, offset and alignment against the file size before using it, so a
// malformed file — truncated, corrupted or hostile — throws rpa::ModelFormatError naming
// the problem and the byte offset where it was found; it never reads out of bounds, never
// allocates in proportion to an unchecked count, and never crashes.
//
// Views returned (keys, strings, tensor data) point into the mapping and live as long as
// the GgufFile. Thread safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/ggml_type.h"
#include "model/mapped_file.h"
#include "util/error.h"

namespace rpa {

// A model file that is not valid GGUF (or uses a feature rpa does not support).
class ModelFormatError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// On-disk codes of metadata value types.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u32", "string", "array", ...
std::string_view GgufValueTypeName(GgufValueType type);

// One metadata value; `data` points into the file.
struct GgufValue {
  GgufValueType type;
  GgufValueType elem_type;  // arrays only: type of the elements (never kArray)
  uint64_t count;           // arrays: number of elements; scalars: 1
  const uint8_t* data;      // payload: the scalar, the string's bytes, or the first element
  uint64_t size;            // payload bytes
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

// A tensor's directory entry. Shapes follow ggml: ne[0] is the row length (contiguous);
// a linear weight W[out][in] has ne = {in, out}. ne[i] = 1 for i >= n_dims.
struct GgufTensorInfo {
  std::string_view name;
  GgmlType type;
  uint32_t n_dims;            // 1..4
  std::array<int64_t, 4> ne;  // each >= 1
  int64_t n_elements;         // product of ne
  uint64_t offset;            // from the start of the file; a multiple of the alignment
  uint64_t n_bytes;           // n_elements / block_size * type_size
  const uint8_t* data;        // [n_bytes] inside the file

  int64_t row_length() const { return ne[0]; }
  int64_t num_rows() const { return n_elements / ne[0]; }
  uint64_t row_bytes() const { return n_bytes / static_cast<uint64_t>(num_rows()); }
  const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes(); }
};

class GgufFile {
 public:
  // Maps and parses the file at `path`. Throws rpa::InvalidArgument when it cannot be read
  // and rpa::ModelFormatError when it is not valid GGUF v3.
  static GgufFile Open(const std::string& path);
  // Parses bytes already in memory; `label` names them in error messages.
  // REQUIRES: `bytes` outlives the returned object.
  static GgufFile Parse(std::span<const uint8_t> bytes, std::string label = "<memory>");

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& label() const { return label_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  uint64_t file_size() const { return bytes_.size(); }

  // ---- metadata, in file order -------------------------------------------------------
  std::span<const GgufKeyValue> metadata() const { return kvs_; }
  // The value of `key`, or nullptr when absent.
  const GgufValue* FindKey(std::string_view key) const;

  // Typed getters: throw rpa::ModelFormatError naming the key when it is missing or has
  // another type. Integer getters accept any integer type whose value fits the result.
  std::string_view GetString(std::string_view key) const;
  uint32_t GetU32(std::string_view key) const;
  int32_t GetI32(std::string_view key) const;
  uint64_t GetU64(std::string_view key) const;
  float GetF32(std::string_view key) const;  // f32, or f64 rounded to f32
  bool GetBool(std::string_view key) const;
  // As above, but nullopt when the key is absent (a present key of the wrong type throws).
  std::optional<std::string_view> FindString(std::string_view key) const;
  std::optional<uint32_t> FindU32(std::string_view key) const;
  std::optional<float> FindF32(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;

  // Arrays: element types must match (integers: any integer type whose values fit).
  std::vector<std::string_view> GetStringArray(std::string_view key) const;
  std::vector<float> GetF32Array(std::string_view key) const;
  std::vector<int32_t> GetI32Array(std::string_view key) const;

  // ---- tensors, in file order --------------------------------------------------------
  std::span<const GgufTensorInfo> tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr.
  const GgufTensorInfo* Find(std::string_view name) const;
  // As Find, but throws rpa::ModelFormatError naming the missing tensor.
  const GgufTensorInfo& Get(std::string_view name) const;

 private:
  GgufFile() = default;
  void ParseAll();
  const GgufValue& Require(std::string_view key) const;
  [[noreturn]] void FailKey(std::string_view key, const GgufValue& v,
                            std::string_view wanted) const;
  int64_t GetInteger(std::string_view key, const GgufValue& v, int64_t lo, uint64_t hi) const;

  std::unique_ptr<MappedFile> map_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string label_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace rpa
