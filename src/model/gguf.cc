#include "model/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace rpa {
namespace {

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Smallest encodings, used to bound counts read from the header by the bytes left, so no
// vector is ever sized from an unchecked count: a key-value pair is at least an empty key
// (8) + a type (4) + a 1-byte value; a tensor info at least an empty name (8) + n_dims (4)
// + one dimension (8) + a type (4) + an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; a big-endian host would need byte swaps");

// Byte size of one scalar of `type`; 0 for string and array (variable length).
uint64_t ScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsValidValueType(uint32_t code) { return code <= static_cast<uint32_t>(GgufValueType::kF64); }

bool IsInteger(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

template <typename T>
T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The integer at `p` of integer type `t`, as (is_negative, magnitude-or-value) folded into
// an __int128 so every u64 and i64 value is representable.
__int128 LoadInteger(GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::kU8:
      return LoadLE<uint8_t>(p);
    case GgufValueType::kI8:
      return LoadLE<int8_t>(p);
    case GgufValueType::kU16:
      return LoadLE<uint16_t>(p);
    case GgufValueType::kI16:
      return LoadLE<int16_t>(p);
    case GgufValueType::kU32:
      return LoadLE<uint32_t>(p);
    case GgufValueType::kI32:
      return LoadLE<int32_t>(p);
    case GgufValueType::kU64:
      return LoadLE<uint64_t>(p);
    case GgufValueType::kI64:
      return LoadLE<int64_t>(p);
    default:
      RPA_CHECK(false && "not an integer type");
  }
  return 0;
}

// Bounds-checked reading of the untrusted header; every failure names the file, the byte
// offset and what was being read.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }
  const uint8_t* at(uint64_t pos) const { return bytes_.data() + pos; }

  // What is being read ("key 'general.name'", "tensor 'blk.0.attn_q.weight'"), named in
  // every failure; empty between entries.
  void set_context(std::string context) { context_ = std::move(context); }

  template <typename... Parts>
  [[noreturn]] void Fail(uint64_t where, const Parts&... parts) const {
    throw ModelFormatError(Concat("GGUF '", label_, "': ", context_, context_.empty() ? "" : ": ",
                                  parts..., " (at byte ", where, " of ", bytes_.size(), ")"));
  }

  // Advances past `n` bytes and returns their start.
  const uint8_t* Take(uint64_t n, std::string_view what) {
    if (n > left()) {
      Fail(pos_, "truncated file: ", what, " needs ", n, " bytes, only ", left(), " left");
    }
    const uint8_t* p = at(pos_);
    pos_ += n;
    return p;
  }

  template <typename T>
  T Read(std::string_view what) {
    return LoadLE<T>(Take(sizeof(T), what));
  }

  std::string_view ReadString(std::string_view what) {
    const uint64_t start = pos_;
    const uint64_t n = Read<uint64_t>(what);
    if (n > left()) {
      Fail(start, what, " has length ", n, ", past the end of the file (", left(), " bytes left)");
    }
    return {reinterpret_cast<const char*>(Take(n, what)), static_cast<size_t>(n)};
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& label_;
  std::string context_;
  uint64_t pos_ = 0;
};

// Reads the value of `type` at the cursor (after its type tag) into `out`.
void ReadValue(Cursor& c, GgufValueType type, GgufValue& out) {
  out.type = type;
  out.elem_type = type;
  out.count = 1;
  if (type == GgufValueType::kString) {
    const std::string_view s = c.ReadString("string value");
    out.data = reinterpret_cast<const uint8_t*>(s.data());
    out.size = s.size();
    return;
  }
  if (type != GgufValueType::kArray) {
    out.size = ScalarSize(type);
    out.data = c.Take(out.size, "scalar value");
    if (type == GgufValueType::kBool && *out.data > 1) {
      c.Fail(c.pos() - 1, "bool value ", int{*out.data}, " is not 0 or 1");
    }
    return;
  }
  const uint64_t tag_pos = c.pos();
  const uint32_t elem = c.Read<uint32_t>("array element type");
  if (!IsValidValueType(elem)) {
    c.Fail(tag_pos, "unknown array element type ", elem);
  }
  out.elem_type = static_cast<GgufValueType>(elem);
  if (out.elem_type == GgufValueType::kArray) {
    c.Fail(tag_pos, "nested arrays are not supported");
  }
  const uint64_t count_pos = c.pos();
  out.count = c.Read<uint64_t>("array length");
  const uint64_t start = c.pos();
  if (out.elem_type == GgufValueType::kString) {
    // Each string takes at least its 8-byte length: bound the count before walking.
    if (out.count > c.left() / 8) {
      c.Fail(count_pos, "array of ", out.count, " strings cannot fit in the ", c.left(),
             " bytes left");
    }
    for (uint64_t i = 0; i < out.count; ++i) c.ReadString("string array element");
  } else {
    const uint64_t esize = ScalarSize(out.elem_type);
    if (out.count > c.left() / esize) {
      c.Fail(count_pos, "array of ", out.count, " ", GgufValueTypeName(out.elem_type), " (", esize,
             " bytes each) runs past the end (", c.left(), " bytes left)");
    }
    c.Take(out.count * esize, "array elements");
    if (out.elem_type == GgufValueType::kBool) {
      for (uint64_t i = 0; i < out.count; ++i) {
        if (*c.at(start + i) > 1) c.Fail(start + i, "bool element > 1");
      }
    }
  }
  out.data = c.at(start);
  out.size = c.pos() - start;
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
      return "u8";
    case GgufValueType::kI8:
      return "i8";
    case GgufValueType::kU16:
      return "u16";
    case GgufValueType::kI16:
      return "i16";
    case GgufValueType::kU32:
      return "u32";
    case GgufValueType::kI32:
      return "i32";
    case GgufValueType::kF32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kU64:
      return "u64";
    case GgufValueType::kI64:
      return "i64";
    case GgufValueType::kF64:
      return "f64";
  }
  return "?";
}

GgufFile GgufFile::Open(const std::string& path) {
  GgufFile f;
  f.map_ = std::make_unique<MappedFile>(path);
  f.bytes_ = f.map_->bytes();
  f.label_ = path;
  f.ParseAll();
  return f;
}

GgufFile GgufFile::Parse(std::span<const uint8_t> bytes, std::string label) {
  GgufFile f;
  f.bytes_ = bytes;
  f.label_ = std::move(label);
  f.ParseAll();
  return f;
}

void GgufFile::ParseAll() {
  Cursor c(bytes_, label_);
  const uint8_t* magic = c.Take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    c.Fail(0, "bad magic: expected \"GGUF\", found bytes 0x", std::hex, int{magic[0]}, " 0x",
           int{magic[1]}, " 0x", int{magic[2]}, " 0x", int{magic[3]}, std::dec);
  }
  version_ = c.Read<uint32_t>("version");
  if (version_ != kGgufVersion) {
    c.Fail(4, "unsupported GGUF version ", version_, " (rpa reads version ", kGgufVersion, ")");
  }
  const uint64_t n_tensors = c.Read<uint64_t>("tensor count");
  const uint64_t n_kv = c.Read<uint64_t>("metadata count");
  if (n_kv > c.left() / kMinKvBytes) {
    c.Fail(16, "metadata count ", n_kv, " cannot fit in the ", c.left(),
           " bytes left (truncated file or corrupt count)");
  }
  if (n_tensors > c.left() / kMinTensorInfoBytes) {
    c.Fail(8, "tensor count ", n_tensors, " cannot fit in the ", c.left(),
           " bytes left (truncated file or corrupt count)");
  }

  kvs_.reserve(n_kv);
  key_index_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t kv_pos = c.pos();
    GgufKeyValue kv;
    kv.key = c.ReadString("metadata key");
    c.set_context(Concat("key '", kv.key, "'"));
    const uint64_t type_pos = c.pos();
    const uint32_t type = c.Read<uint32_t>("metadata value type");
    if (!IsValidValueType(type)) {
      c.Fail(type_pos, "unknown value type ", type);
    }
    ReadValue(c, static_cast<GgufValueType>(type), kv.value);
    if (!key_index_.emplace(kv.key, kvs_.size()).second) {
      c.Fail(kv_pos, "duplicate metadata key");
    }
    kvs_.push_back(kv);
    c.set_context("");
  }

  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = FindKey("general.alignment")) {
    if (a->type != GgufValueType::kU32) FailKey("general.alignment", *a, "u32");
    alignment_ = LoadLE<uint32_t>(a->data);
    if (alignment_ == 0 || !std::has_single_bit(alignment_)) {
      c.Fail(static_cast<uint64_t>(a->data - bytes_.data()), "general.alignment = ", alignment_,
             " is not a power of two");
    }
  }

  tensors_.reserve(n_tensors);
  tensor_index_.reserve(n_tensors);
  std::vector<uint64_t> rel_offsets;
  rel_offsets.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t info_pos = c.pos();
    GgufTensorInfo t{};
    t.name = c.ReadString("tensor name");
    c.set_context(Concat("tensor '", t.name, "'"));
    const uint64_t dims_pos = c.pos();
    t.n_dims = c.Read<uint32_t>("tensor n_dims");
    if (t.n_dims < 1 || t.n_dims > kMaxDims) {
      c.Fail(dims_pos, "n_dims = ", t.n_dims, " (must be 1..", kMaxDims, ")");
    }
    t.ne.fill(1);
    t.n_elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne_pos = c.pos();
      t.ne[d] = c.Read<int64_t>("tensor dimension");
      if (t.ne[d] < 1) c.Fail(ne_pos, "ne[", d, "] = ", t.ne[d], " < 1");
      if (__builtin_mul_overflow(t.n_elements, t.ne[d], &t.n_elements)) {
        c.Fail(ne_pos, "element count overflows int64 at ne[", d, "] = ", t.ne[d]);
      }
    }
    const uint64_t type_pos = c.pos();
    const uint32_t type = c.Read<uint32_t>("tensor type");
    const std::optional<GgmlTypeTraits> traits = FindGgmlType(type);
    if (!traits) c.Fail(type_pos, "unknown or unsupported ggml type ", type);
    t.type = traits->type;
    if (t.ne[0] % traits->block_size != 0) {
      c.Fail(dims_pos, "row length ne[0] = ", t.ne[0], " is not a multiple of the ", traits->name,
             " block size ", traits->block_size);
    }
    // n_elements < 2^63 but a type takes up to 8 bytes per value: the product can overflow.
    const uint64_t n_blocks = static_cast<uint64_t>(t.n_elements) / traits->block_size;
    if (__builtin_mul_overflow(n_blocks, uint64_t{traits->type_size}, &t.n_bytes)) {
      c.Fail(dims_pos, "byte size overflows");
    }
    const uint64_t off_pos = c.pos();
    const uint64_t rel = c.Read<uint64_t>("tensor data offset");
    if (rel % alignment_ != 0) {
      c.Fail(off_pos, "data offset ", rel, " is not a multiple of the alignment ", alignment_);
    }
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      c.Fail(info_pos, "duplicate tensor name");
    }
    tensors_.push_back(t);
    rel_offsets.push_back(rel);
    c.set_context("");
  }

  // The data section starts at the next multiple of the alignment. pos <= file size < 2^63
  // and alignment < 2^32, so the sum cannot overflow.
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = bytes_.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& t = tensors_[i];
    const uint64_t rel = rel_offsets[i];
    if (data_offset_ > size || rel > size - data_offset_ || t.n_bytes > size - data_offset_ - rel) {
      c.Fail(data_offset_, "tensor '", t.name, "': data [", rel, ", +", t.n_bytes,
             ") relative to the data section at ", data_offset_, " lies outside the file");
    }
    t.offset = data_offset_ + rel;
    t.data = bytes_.data() + t.offset;
  }
  // Tensors must not share bytes: a writer bug or a hostile file could otherwise make two
  // weights alias.
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    if (prev.offset + prev.n_bytes > by_offset[i]->offset) {
      c.Fail(by_offset[i]->offset, "tensors '", prev.name, "' and '", by_offset[i]->name,
             "' overlap");
    }
  }
}

// ---- metadata getters ----------------------------------------------------------------

const GgufValue* GgufFile::FindKey(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufValue& GgufFile::Require(std::string_view key) const {
  const GgufValue* v = FindKey(key);
  if (v == nullptr) {
    throw ModelFormatError(Concat("GGUF '", label_, "': missing metadata key '", key, "'"));
  }
  return *v;
}

void GgufFile::FailKey(std::string_view key, const GgufValue& v, std::string_view wanted) const {
  std::string got(GgufValueTypeName(v.type));
  if (v.type == GgufValueType::kArray) got = Concat("array of ", GgufValueTypeName(v.elem_type));
  throw ModelFormatError(
      Concat("GGUF '", label_, "': metadata key '", key, "' is ", got, ", expected ", wanted));
}

int64_t GgufFile::GetInteger(std::string_view key, const GgufValue& v, int64_t lo,
                             uint64_t hi) const {
  if (!IsInteger(v.type)) FailKey(key, v, "an integer");
  const __int128 x = LoadInteger(v.type, v.data);
  if (x < lo || x > static_cast<__int128>(hi)) {
    throw ModelFormatError(Concat("GGUF '", label_, "': metadata key '", key, "' = ",
                                  static_cast<long double>(x), " is outside [", lo, ", ", hi, "]"));
  }
  return static_cast<int64_t>(x);
}

std::string_view GgufFile::GetString(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type != GgufValueType::kString) FailKey(key, v, "string");
  return {reinterpret_cast<const char*>(v.data), static_cast<size_t>(v.size)};
}

uint32_t GgufFile::GetU32(std::string_view key) const {
  return static_cast<uint32_t>(
      GetInteger(key, Require(key), 0, std::numeric_limits<uint32_t>::max()));
}

int32_t GgufFile::GetI32(std::string_view key) const {
  return static_cast<int32_t>(GetInteger(key, Require(key), std::numeric_limits<int32_t>::min(),
                                         std::numeric_limits<int32_t>::max()));
}

uint64_t GgufFile::GetU64(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type == GgufValueType::kU64) return LoadLE<uint64_t>(v.data);
  return static_cast<uint64_t>(GetInteger(key, v, 0, std::numeric_limits<int64_t>::max()));
}

float GgufFile::GetF32(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type == GgufValueType::kF32) return LoadLE<float>(v.data);
  if (v.type == GgufValueType::kF64) return static_cast<float>(LoadLE<double>(v.data));
  FailKey(key, v, "f32");
}

bool GgufFile::GetBool(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type != GgufValueType::kBool) FailKey(key, v, "bool");
  return *v.data != 0;
}

std::optional<std::string_view> GgufFile::FindString(std::string_view key) const {
  if (FindKey(key) == nullptr) return std::nullopt;
  return GetString(key);
}

std::optional<uint32_t> GgufFile::FindU32(std::string_view key) const {
  if (FindKey(key) == nullptr) return std::nullopt;
  return GetU32(key);
}

std::optional<float> GgufFile::FindF32(std::string_view key) const {
  if (FindKey(key) == nullptr) return std::nullopt;
  return GetF32(key);
}

std::optional<bool> GgufFile::FindBool(std::string_view key) const {
  if (FindKey(key) == nullptr) return std::nullopt;
  return GetBool(key);
}

std::vector<std::string_view> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type != GgufValueType::kArray || v.elem_type != GgufValueType::kString) {
    FailKey(key, v, "array of string");
  }
  // Parsing already checked that every element lies inside the payload.
  std::vector<std::string_view> out;
  out.reserve(v.count);
  const uint8_t* p = v.data;
  for (uint64_t i = 0; i < v.count; ++i) {
    const uint64_t n = LoadLE<uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), static_cast<size_t>(n));
    p += 8 + n;
  }
  return out;
}

std::vector<float> GgufFile::GetF32Array(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type != GgufValueType::kArray || v.elem_type != GgufValueType::kF32) {
    FailKey(key, v, "array of f32");
  }
  std::vector<float> out(v.count);
  if (v.count > 0) std::memcpy(out.data(), v.data, v.count * sizeof(float));
  return out;
}

std::vector<int32_t> GgufFile::GetI32Array(std::string_view key) const {
  const GgufValue& v = Require(key);
  if (v.type != GgufValueType::kArray || !IsInteger(v.elem_type)) {
    FailKey(key, v, "array of i32");
  }
  const uint64_t esize = ScalarSize(v.elem_type);
  std::vector<int32_t> out;
  out.reserve(v.count);
  for (uint64_t i = 0; i < v.count; ++i) {
    const __int128 x = LoadInteger(v.elem_type, v.data + i * esize);
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
      throw ModelFormatError(Concat("GGUF '", label_, "': metadata key '", key, "' element ", i,
                                    " = ", static_cast<long double>(x), " does not fit i32"));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

// ---- tensors -------------------------------------------------------------------------

const GgufTensorInfo* GgufFile::Find(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::Get(std::string_view name) const {
  const GgufTensorInfo* t = Find(name);
  if (t == nullptr) {
    throw ModelFormatError(Concat("GGUF '", label_, "': no tensor named '", name, "'"));
  }
  return *t;
}

}  // namespace rpa
