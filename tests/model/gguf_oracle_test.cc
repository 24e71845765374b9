// rpa's GGUF reader and dequantizers against the PyPI `gguf` package (llama.cpp's Python
// reader and numpy dequantizers), which shares no code with rpa.
//
// tests/model/make_gguf_vectors.py writes the oracle's view into $RPA_GGUF_VECTORS (a ctest
// fixture runs it first; see its docstring for the formats). Dequantized values must match
// to the bit: both sides evaluate the same float32 expression, operation by operation in
// the same order with IEEE round-to-nearest (see src/model/dequant.h), so there is no
// rounding difference to tolerate. NaN outputs (from NaN/inf scales in random bytes) match
// any NaN: the payload is not part of the contract.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/dequant.h"
#include "model/gguf.h"

namespace rpa {
namespace {

std::string VectorsDir() {
  const char* dir = std::getenv("RPA_GGUF_VECTORS");
  return dir ? dir : "";
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Record {
  GgmlType type;
  std::string name;
  std::vector<uint8_t> raw;
  std::vector<float> values;
};

std::vector<Record> ReadRecords(const std::string& path) {
  const std::vector<uint8_t> b = ReadAll(path);
  std::vector<Record> out;
  size_t p = 0;
  auto take = [&](void* dst, size_t n) {
    RPA_CHECK(p + n <= b.size());
    std::memcpy(dst, b.data() + p, n);
    p += n;
  };
  while (p < b.size()) {
    uint32_t code, name_len;
    uint64_t n_values, n_bytes;
    take(&code, 4);
    take(&name_len, 4);
    Record r;
    r.name.resize(name_len);
    take(r.name.data(), name_len);
    take(&n_values, 8);
    take(&n_bytes, 8);
    r.raw.resize(n_bytes);
    take(r.raw.data(), n_bytes);
    r.values.resize(n_values);
    take(r.values.data(), n_values * 4);
    const auto traits = FindGgmlType(code);
    RPA_CHECK(traits.has_value());
    r.type = traits->type;
    out.push_back(std::move(r));
  }
  return out;
}

// Bit-exact comparison, NaN matching NaN. Returns the number of mismatches (first few
// reported).
int CompareBits(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) ||
                      std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]);
    if (!same && ++bad <= 5) {
      ADD_FAILURE() << what << " value " << i << ": rpa " << got[i] << " gguf " << want[i];
    }
  }
  return bad;
}

void CheckRecordDequant(const Record& r) {
  std::vector<float> got(r.values.size());
  DequantizeRow(r.type, r.raw.data(), got.data(), static_cast<int64_t>(got.size()));
  EXPECT_EQ(CompareBits(got, r.values, std::string(GgmlTypeName(r.type)) + " " + r.name), 0);
}

class GgufOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = VectorsDir();
    if (dir_.empty()) GTEST_FAIL() << "RPA_GGUF_VECTORS is not set (run through ctest)";
  }
  std::string dir_;
};

TEST_F(GgufOracleTest, TypeTableMatchesGgml) {
  std::ifstream in(dir_ + "/quant_sizes.txt");
  ASSERT_TRUE(in.good());
  int matched = 0;
  uint32_t code, block, size;
  std::string name;
  while (in >> code >> name >> block >> size) {
    const auto t = FindGgmlType(code);
    if (!t) continue;  // a type rpa does not know: the reader rejects it
    EXPECT_EQ(t->name, name) << code;
    EXPECT_EQ(t->block_size, block) << name;
    EXPECT_EQ(t->type_size, size) << name;
    ++matched;
  }
  EXPECT_EQ(matched, static_cast<int>(std::size(kAllGgmlTypes)));
}

TEST_F(GgufOracleTest, RandomBlocksMatchBitForBit) {
  const std::vector<Record> records = ReadRecords(dir_ + "/dequant_random.bin");
  std::map<GgmlType, int> seen;
  for (const Record& r : records) {
    CheckRecordDequant(r);
    ++seen[r.type];
  }
  for (GgmlType t : kAllGgmlTypes) {
    if (IsDequantizable(t)) {
      EXPECT_EQ(seen[t], 2) << GgmlTypeName(t);  // realistic + random bytes
    }
  }
}

// Compares everything GGUFReader saw in a file with rpa's parse of it.
void CompareWithDump(const GgufFile& f, const std::string& dump_path) {
  std::ifstream in(dump_path);
  ASSERT_TRUE(in.good()) << dump_path;
  std::string line;
  size_t kv_i = 0, t_i = 0;
  auto hex = [](const uint8_t* p, uint64_t n) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint64_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
    return s.empty() ? std::string("-") : s;
  };
  // A scalar of `type` at `p` printed as make_gguf_vectors.py's fmt_scalar does.
  auto scalar = [&](GgufValueType type, const uint8_t* p, uint64_t string_size) -> std::string {
    auto load = [p](auto v) {
      std::memcpy(&v, p, sizeof(v));
      return v;
    };
    std::ostringstream os;
    switch (type) {
      case GgufValueType::kU8:
        os << int{load(uint8_t{})};
        break;
      case GgufValueType::kI8:
        os << int{load(int8_t{})};
        break;
      case GgufValueType::kU16:
        os << load(uint16_t{});
        break;
      case GgufValueType::kI16:
        os << load(int16_t{});
        break;
      case GgufValueType::kU32:
        os << load(uint32_t{});
        break;
      case GgufValueType::kI32:
        os << load(int32_t{});
        break;
      case GgufValueType::kU64:
        os << load(uint64_t{});
        break;
      case GgufValueType::kI64:
        os << load(int64_t{});
        break;
      case GgufValueType::kBool:
        os << int{load(uint8_t{})};
        break;
      case GgufValueType::kF32: {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08x", load(uint32_t{}));
        return buf;
      }
      case GgufValueType::kF64: {
        char buf[24];
        std::snprintf(buf, sizeof buf, "%016llx",
                      static_cast<unsigned long long>(load(uint64_t{})));
        return buf;
      }
      case GgufValueType::kString:
        return hex(p, string_size);
      case GgufValueType::kArray:
        return "?";
    }
    return os.str();
  };
  // Position of array element i (strings are variable length).
  auto element = [&](const GgufValue& v, uint64_t i) -> std::string {
    if (v.elem_type != GgufValueType::kString) {
      uint64_t esize = 0;
      switch (v.elem_type) {
        case GgufValueType::kU8:
        case GgufValueType::kI8:
        case GgufValueType::kBool:
          esize = 1;
          break;
        case GgufValueType::kU16:
        case GgufValueType::kI16:
          esize = 2;
          break;
        case GgufValueType::kU32:
        case GgufValueType::kI32:
        case GgufValueType::kF32:
          esize = 4;
          break;
        default:
          esize = 8;
      }
      return scalar(v.elem_type, v.data + i * esize, 0);
    }
    const uint8_t* p = v.data;
    for (uint64_t k = 0; k < i; ++k) {
      uint64_t n;
      std::memcpy(&n, p, 8);
      p += 8 + n;
    }
    uint64_t n;
    std::memcpy(&n, p, 8);
    return hex(p + 8, n);
  };
  while (std::getline(in, line)) {
    std::vector<std::string> col;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) col.push_back(c);
    ASSERT_FALSE(col.empty());
    if (col[0] == "file") {
      ASSERT_EQ(col.size(), 6u);
      EXPECT_EQ(std::to_string(f.file_size()), col[1]);
      EXPECT_EQ(std::to_string(f.alignment()), col[2]);
      EXPECT_EQ(std::to_string(f.data_offset()), col[3]);
      EXPECT_EQ(std::to_string(f.metadata().size()), col[4]);
      EXPECT_EQ(std::to_string(f.tensors().size()), col[5]);
    } else if (col[0] == "kv") {
      ASSERT_LT(kv_i, f.metadata().size());
      const GgufKeyValue& kv = f.metadata()[kv_i++];
      EXPECT_EQ(kv.key, col[1]);
      const std::string key(kv.key);
      EXPECT_EQ(GgufValueTypeName(kv.value.type), col[2]) << key;
      if (kv.value.type == GgufValueType::kArray) {
        ASSERT_EQ(col.size(), 7u);
        EXPECT_EQ(GgufValueTypeName(kv.value.elem_type), col[3]) << key;
        EXPECT_EQ(std::to_string(kv.value.count), col[4]) << key;
        if (kv.value.count > 0) {
          EXPECT_EQ(element(kv.value, 0), col[5]) << key;
          EXPECT_EQ(element(kv.value, kv.value.count - 1), col[6]) << key;
        }
      } else {
        ASSERT_EQ(col.size(), 4u);
        EXPECT_EQ(scalar(kv.value.type, kv.value.data, kv.value.size), col[3]) << key;
      }
    } else if (col[0] == "tensor") {
      ASSERT_EQ(col.size(), 6u);
      ASSERT_LT(t_i, f.tensors().size());
      const GgufTensorInfo& t = f.tensors()[t_i++];
      EXPECT_EQ(t.name, col[1]);
      EXPECT_EQ(std::to_string(static_cast<uint32_t>(t.type)), col[2]) << t.name;
      std::string ne;
      for (uint32_t d = 0; d < t.n_dims; ++d) {
        if (d > 0) ne += ',';
        ne += std::to_string(t.ne[d]);
      }
      EXPECT_EQ(ne, col[3]) << t.name;
      EXPECT_EQ(std::to_string(t.offset), col[4]) << t.name;
      EXPECT_EQ(std::to_string(t.n_bytes), col[5]) << t.name;
    } else {
      ADD_FAILURE() << "unknown dump line: " << line;
    }
  }
  EXPECT_EQ(kv_i, f.metadata().size());
  EXPECT_EQ(t_i, f.tensors().size());
}

// The oracle's dequantized rows: the bytes must be the file's (same offsets) and the values
// rpa's dequantization of them.
void CompareRows(const GgufFile& f, const std::string& rows_path, size_t min_types) {
  const std::vector<Record> records = ReadRecords(rows_path);
  EXPECT_GE(records.size(), min_types);
  for (const Record& r : records) {
    const GgufTensorInfo& t = f.Get(r.name);
    EXPECT_EQ(t.type, r.type);
    ASSERT_LE(r.raw.size(), t.n_bytes);
    EXPECT_EQ(std::memcmp(t.data, r.raw.data(), r.raw.size()), 0) << r.name;
    EXPECT_EQ(r.values.size() % t.row_length(), 0u);
    std::vector<float> got(r.values.size());
    for (size_t row = 0; row * t.row_length() < got.size(); ++row) {
      DequantizeRow(t.type, t.row(static_cast<int64_t>(row)), got.data() + row * t.row_length(),
                    t.row_length());
    }
    EXPECT_EQ(CompareBits(got, r.values, r.name), 0);
  }
}

TEST_F(GgufOracleTest, WriterSampleReadsAsTheOracleReadsIt) {
  const GgufFile f = GgufFile::Open(dir_ + "/writer_sample.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  CompareWithDump(f, dir_ + "/writer_sample.dump");
  CompareRows(f, dir_ + "/writer_sample.rows.bin", 9);
  // Whole-tensor dequantization agrees with row by row.
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::vector<float> all = DequantizeTensor(t);
    std::vector<float> row(static_cast<size_t>(t.row_length()));
    DequantizeRow(t.type, t.row(t.num_rows() - 1), row.data(), t.row_length());
    EXPECT_EQ(
        std::memcmp(row.data(), all.data() + (t.num_rows() - 1) * t.row_length(), row.size() * 4),
        0)
        << t.name;
  }
}

class GgufOracleModelTest : public GgufOracleTest,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(GgufOracleModelTest, RealModelReadsAsTheOracleReadsIt) {
  const std::string stem = dir_ + "/" + GetParam();
  if (!Exists(stem + ".dump")) {
    GTEST_SKIP() << GetParam() << " not fetched (scripts/fetch-models)";
  }
  const char* env = std::getenv("RPA_MODEL_DIR");
  const std::string model_dir =
      env && *env
          ? env
          : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/rpa/models";
  const GgufFile f = GgufFile::Open(model_dir + "/" + GetParam());
  CompareWithDump(f, stem + ".dump");
  CompareRows(f, stem + ".rows.bin", 2);
}

INSTANTIATE_TEST_SUITE_P(Models, GgufOracleModelTest,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf",
                                           "gemma-3-270m-q4_k_m.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).substr(0, 4) == "Smol" ? "SmolLM2"
                                                                                 : "Gemma3";
                         });

}  // namespace
}  // namespace rpa
