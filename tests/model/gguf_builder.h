// Builds small GGUF files byte by byte for tests and the fuzzer's seed corpus.
//
// Deliberately independent of src/model: it writes the format from its description
// (../shared/docs/MODELS.md §3), and every field can be set to an invalid value, so tests
// can produce each malformation the reader must reject.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rpa::testing {

// Little-endian byte sink.
class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    PutBytes(&v, sizeof(T));
  }
  // resize + memcpy rather than vector::insert, which trips a false GCC 12
  // -Wstringop-overflow warning here.
  void PutBytes(const void* p, size_t n) {
    if (n == 0) return;
    const size_t old = bytes_.size();
    bytes_.resize(old + n);
    std::memcpy(bytes_.data() + old, p, n);
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    PutBytes(s.data(), s.size());
  }
  void PadTo(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Value type codes of GGUF metadata (see src/model/gguf.h); repeated here on purpose.
enum : uint32_t {
  kGU8 = 0,
  kGI8 = 1,
  kGU16 = 2,
  kGI16 = 3,
  kGU32 = 4,
  kGI32 = 5,
  kGF32 = 6,
  kGBool = 7,
  kGString = 8,
  kGArray = 9,
  kGU64 = 10,
  kGI64 = 11,
  kGF64 = 12,
};

class GgufBuilder {
 public:
  struct TensorSpec {
    std::string name;
    uint32_t type;              // ggml type code
    std::vector<int64_t> ne;    // ne[0] first
    std::vector<uint8_t> data;  // the tensor's bytes
    int64_t offset = -1;        // relative data offset; -1: next aligned position
  };

  uint32_t version = 3;
  uint32_t alignment = 32;  // layout alignment; written as general.alignment iff != 32
  // Header counts; -1 means "the true count".
  int64_t tensor_count_override = -1;
  int64_t kv_count_override = -1;

  // A key and its raw encoded value (type code + payload).
  GgufBuilder& Kv(std::string_view key, uint32_t type, const std::vector<uint8_t>& payload) {
    ByteWriter w;
    w.PutString(key);
    w.Put<uint32_t>(type);
    w.PutBytes(payload.data(), payload.size());
    kvs_.push_back(std::move(w.bytes()));
    return *this;
  }
  template <typename T>
  GgufBuilder& KvScalar(std::string_view key, uint32_t type, T value) {
    ByteWriter w;
    w.Put<T>(value);
    return Kv(key, type, w.bytes());
  }
  GgufBuilder& KvU32(std::string_view key, uint32_t v) { return KvScalar(key, kGU32, v); }
  GgufBuilder& KvI32(std::string_view key, int32_t v) { return KvScalar(key, kGI32, v); }
  GgufBuilder& KvF32(std::string_view key, float v) { return KvScalar(key, kGF32, v); }
  GgufBuilder& KvBool(std::string_view key, bool v) { return KvScalar(key, kGBool, uint8_t{v}); }
  GgufBuilder& KvString(std::string_view key, std::string_view v) {
    ByteWriter w;
    w.PutString(v);
    return Kv(key, kGString, w.bytes());
  }
  GgufBuilder& KvStringArray(std::string_view key, const std::vector<std::string>& v) {
    ByteWriter w;
    w.Put<uint32_t>(kGString);
    w.Put<uint64_t>(v.size());
    for (const std::string& s : v) w.PutString(s);
    return Kv(key, kGArray, w.bytes());
  }
  template <typename T>
  GgufBuilder& KvArray(std::string_view key, uint32_t elem_type, const std::vector<T>& v) {
    ByteWriter w;
    w.Put<uint32_t>(elem_type);
    w.Put<uint64_t>(v.size());
    for (const T& x : v) w.Put<T>(x);
    return Kv(key, kGArray, w.bytes());
  }

  GgufBuilder& Tensor(TensorSpec t) {
    tensors_.push_back(std::move(t));
    return *this;
  }

  std::vector<uint8_t> Build() const {
    ByteWriter w;
    w.PutBytes("GGUF", 4);
    w.Put<uint32_t>(version);
    const bool custom_alignment = alignment != 32;
    const uint64_t n_kv = kvs_.size() + (custom_alignment ? 1 : 0);
    w.Put<uint64_t>(tensor_count_override >= 0 ? tensor_count_override : tensors_.size());
    w.Put<uint64_t>(kv_count_override >= 0 ? kv_count_override : n_kv);
    for (const auto& kv : kvs_) w.PutBytes(kv.data(), kv.size());
    if (custom_alignment) {
      w.PutString("general.alignment");
      w.Put<uint32_t>(kGU32);
      w.Put<uint32_t>(alignment);
    }
    // Lay the data out first to know each tensor's offset.
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TensorSpec& t : tensors_) {
      const uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = std::max<uint64_t>(next, off + t.data.size());
      next = (next + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const TensorSpec& t = tensors_[i];
      w.PutString(t.name);
      w.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) w.Put<int64_t>(d);
      w.Put<uint32_t>(t.type);
      w.Put<uint64_t>(offsets[i]);
    }
    if (tensors_.empty()) return std::move(w.bytes());
    w.PadTo(alignment);
    const uint64_t data_start = w.bytes().size();
    std::vector<uint8_t>& out = w.bytes();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].data.empty()) continue;  // memcpy from an empty vector's null data is UB
      const uint64_t end = data_start + offsets[i] + tensors_[i].data.size();
      if (out.size() < end) out.resize(end, 0);
      std::memcpy(out.data() + data_start + offsets[i], tensors_[i].data.data(),
                  tensors_[i].data.size());
    }
    return std::move(out);
  }

 private:
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<TensorSpec> tensors_;
};

// A small valid file touching every metadata type and a few tensor types: the base that
// the malformed-file tests and the fuzzer's seeds start from.
inline GgufBuilder SampleBuilder() {
  GgufBuilder b;
  b.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 2)
      .KvI32("t.i32", -7)
      .KvF32("t.f32", 1e-5f)
      .KvBool("t.bool", true)
      .KvString("t.empty", "")
      .KvScalar<uint64_t>("t.u64", kGU64, 1ull << 40)
      .KvScalar<int8_t>("t.i8", kGI8, -3)
      .KvScalar<double>("t.f64", kGF64, 0.25)
      .KvStringArray("tokenizer.ggml.tokens", {"<s>", "", "a", "bc"})
      .KvArray<float>("tokenizer.ggml.scores", kGF32, {0.f, -1.f, -2.f, -3.5f})
      .KvArray<int32_t>("tokenizer.ggml.token_type", kGI32, {3, 1, 1, 1})
      .KvArray<uint8_t>("t.empty_array", kGU8, {});
  std::vector<uint8_t> f32(4 * 8);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i * 7);
  b.Tensor({"norm.weight", /*F32*/ 0, {8}, f32});
  std::vector<uint8_t> q8(34 * 2);  // Q8_0: two rows of one block
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 13 + 1);
  q8[0] = 0x00, q8[1] = 0x3C;    // d = 1.0 (f16 0x3C00)
  q8[34] = 0x00, q8[35] = 0x38;  // d = 0.5
  b.Tensor({"blk.0.attn_q.weight", /*Q8_0*/ 8, {32, 2}, q8});
  return b;
}

}  // namespace rpa::testing
