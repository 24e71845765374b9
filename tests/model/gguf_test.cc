// GGUF reader: parsing of valid files and rejection of every kind of malformed file.
#include "model/gguf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tests/model/gguf_builder.h"

namespace rpa {
namespace {

using testing::GgufBuilder;
using testing::SampleBuilder;

GgufFile ParseBytes(const std::vector<uint8_t>& bytes) {
  return GgufFile::Parse(bytes, "test.gguf");
}

// Parses `bytes`, expecting a ModelFormatError whose message contains `needle`.
void ExpectFormatError(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    ParseBytes(bytes);
    ADD_FAILURE() << "parsed, expected an error containing '" << needle << "'";
  } catch (const ModelFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
    EXPECT_NE(std::string(e.what()).find("test.gguf"), std::string::npos) << e.what();
  }
}

TEST(GgufTest, ParsesSampleMetadata) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  const GgufFile f = ParseBytes(bytes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 13u);
  EXPECT_EQ(f.metadata()[0].key, "general.architecture");
  EXPECT_EQ(f.GetString("general.architecture"), "llama");
  EXPECT_EQ(f.GetU32("llama.block_count"), 2u);
  EXPECT_EQ(f.GetI32("llama.block_count"), 2);
  EXPECT_EQ(f.GetI32("t.i32"), -7);
  EXPECT_EQ(f.GetI32("t.i8"), -3);  // integer getters widen
  EXPECT_EQ(f.GetU64("t.u64"), 1ull << 40);
  EXPECT_EQ(f.GetF32("t.f32"), 1e-5f);
  EXPECT_EQ(f.GetF32("t.f64"), 0.25f);
  EXPECT_TRUE(f.GetBool("t.bool"));
  EXPECT_EQ(f.GetString("t.empty"), "");
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string_view>{"<s>", "", "a", "bc"}));
  EXPECT_EQ(f.GetF32Array("tokenizer.ggml.scores"), (std::vector<float>{0.f, -1.f, -2.f, -3.5f}));
  EXPECT_EQ(f.GetI32Array("tokenizer.ggml.token_type"), (std::vector<int32_t>{3, 1, 1, 1}));
  EXPECT_TRUE(f.GetI32Array("t.empty_array").empty());
  EXPECT_EQ(f.FindU32("absent"), std::nullopt);
  EXPECT_EQ(f.FindU32("llama.block_count"), 2u);
  EXPECT_EQ(f.FindString("general.architecture"), "llama");
  EXPECT_EQ(f.FindF32("t.f32"), 1e-5f);
  EXPECT_EQ(f.FindBool("t.bool"), true);
  EXPECT_EQ(f.FindKey("absent"), nullptr);
}

TEST(GgufTest, ParsesSampleTensors) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  const GgufFile f = ParseBytes(bytes);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo& norm = f.Get("norm.weight");
  EXPECT_EQ(norm.type, GgmlType::kF32);
  EXPECT_EQ(norm.n_dims, 1u);
  EXPECT_EQ(norm.ne, (std::array<int64_t, 4>{8, 1, 1, 1}));
  EXPECT_EQ(norm.n_bytes, 32u);
  EXPECT_EQ(norm.offset, f.data_offset());
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(norm.data, bytes.data() + norm.offset);
  EXPECT_EQ(norm.data[1], 7);
  const GgufTensorInfo& q = f.Get("blk.0.attn_q.weight");
  EXPECT_EQ(q.type, GgmlType::kQ8_0);
  EXPECT_EQ(q.n_elements, 64);
  EXPECT_EQ(q.num_rows(), 2);
  EXPECT_EQ(q.row_length(), 32);
  EXPECT_EQ(q.row_bytes(), 34u);
  EXPECT_EQ(q.offset, f.data_offset() + 32);  // right after the 32 bytes of norm.weight
  EXPECT_EQ(q.row(1)[1], 0x38);
  EXPECT_EQ(f.Find("absent"), nullptr);
}

TEST(GgufTest, TypedGettersNameTheProblem) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  const GgufFile f = ParseBytes(bytes);
  auto expect_error = [](auto&& call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error, expected '" << needle << "'";
    } catch (const ModelFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { f.GetU32("absent.key"); }, "missing metadata key 'absent.key'");
  expect_error([&] { f.GetString("llama.block_count"); },
               "'llama.block_count' is u32, expected string");
  expect_error([&] { f.GetU32("t.i32"); }, "'t.i32' = -7 is outside [0, 4294967295]");
  expect_error([&] { f.GetF32("t.bool"); }, "is bool, expected f32");
  expect_error([&] { f.GetStringArray("tokenizer.ggml.scores"); },
               "is array of f32, expected array of string");
  expect_error([&] { f.GetF32Array("tokenizer.ggml.tokens"); }, "expected array of f32");
  expect_error([&] { f.FindU32("general.architecture"); }, "is string, expected an integer");
  expect_error([&] { f.Get("nope"); }, "no tensor named 'nope'");
}

TEST(GgufTest, CustomAlignmentIsHonoured) {
  GgufBuilder b = SampleBuilder();
  b.alignment = 256;
  const std::vector<uint8_t> bytes = b.Build();
  const GgufFile f = ParseBytes(bytes);
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  EXPECT_EQ(f.Get("blk.0.attn_q.weight").offset, f.data_offset() + 256);
}

TEST(GgufTest, NoTensorsIsValid) {
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  const GgufFile f = ParseBytes(b.Build());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufTest, OpenMapsAFile) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  const std::string path = ::testing::TempDir() + "/rpa_gguf_open_test.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  GgufFile f = GgufFile::Open(path);
  GgufFile moved = std::move(f);  // views stay valid: they point into the mapping
  EXPECT_EQ(moved.GetString("general.architecture"), "llama");
  EXPECT_EQ(moved.Get("norm.weight").data[1], 7);
  EXPECT_EQ(moved.file_size(), bytes.size());
  std::remove(path.c_str());
}

TEST(GgufTest, OpenReportsMissingFilesAndDirectories) {
  EXPECT_THROW(GgufFile::Open("/nonexistent/model.gguf"), InvalidArgument);
  EXPECT_THROW(GgufFile::Open(::testing::TempDir()), InvalidArgument);
  const std::string empty = ::testing::TempDir() + "/rpa_gguf_empty.gguf";
  { std::ofstream out(empty, std::ios::binary); }
  EXPECT_THROW(GgufFile::Open(empty), ModelFormatError);
  std::remove(empty.c_str());
}

// ---- malformed headers -----------------------------------------------------------------

TEST(GgufMalformedTest, BadMagic) {
  std::vector<uint8_t> bytes = SampleBuilder().Build();
  bytes[0] = 'G', bytes[1] = 'G', bytes[2] = 'M', bytes[3] = 'L';
  ExpectFormatError(bytes, "bad magic");
}

TEST(GgufMalformedTest, UnsupportedVersion) {
  for (uint32_t v : {0u, 1u, 2u, 4u, 0xFFFFFFFFu}) {
    GgufBuilder b = SampleBuilder();
    b.version = v;
    ExpectFormatError(b.Build(), "unsupported GGUF version " + std::to_string(v));
  }
}

TEST(GgufMalformedTest, AbsurdCounts) {
  for (int64_t n : {int64_t{1000}, int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    GgufBuilder b = SampleBuilder();
    b.kv_count_override = n;
    ExpectFormatError(b.Build(), "metadata count " + std::to_string(n) + " cannot fit");
    b = SampleBuilder();
    b.tensor_count_override = n;
    ExpectFormatError(b.Build(), "tensor count " + std::to_string(n) + " cannot fit");
  }
}

TEST(GgufMalformedTest, CountsLargerThanTheEntries) {
  GgufBuilder b = SampleBuilder();
  b.kv_count_override = 14;  // one more than written: the first tensor info is read as a kv
  EXPECT_THROW(ParseBytes(b.Build()), ModelFormatError);
  b = SampleBuilder();
  b.tensor_count_override = 3;  // the data section is read as a tensor info
  EXPECT_THROW(ParseBytes(b.Build()), ModelFormatError);
}

TEST(GgufMalformedTest, StringPastEndOfFile) {
  GgufBuilder b;
  b.Kv("general.name", testing::kGString, {0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 'a'});
  ExpectFormatError(b.Build(),
                    "key 'general.name': string value has length 65535, past the end of the file");
  // A key whose length is absurd.
  std::vector<uint8_t> bytes = GgufBuilder().KvU32("k", 1).Build();
  bytes[24 + 7] = 0x80;  // key length 2^63 + 1
  ExpectFormatError(bytes, "metadata key has length");
}

TEST(GgufMalformedTest, UnknownValueTypes) {
  ExpectFormatError(GgufBuilder().Kv("k", 13, {0, 0, 0, 0}).Build(),
                    "key 'k': unknown value type 13");
  ExpectFormatError(GgufBuilder().Kv("k", 0xFFFFFFFF, {}).Build(), "unknown value type 4294967295");
  ExpectFormatError(
      GgufBuilder().Kv("k", testing::kGArray, {77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}).Build(),
      "key 'k': unknown array element type 77");
  ExpectFormatError(
      GgufBuilder().Kv("k", testing::kGArray, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}).Build(),
      "nested arrays are not supported");
}

TEST(GgufMalformedTest, ArraysLongerThanTheFile) {
  // 2^61 f32 elements: count * 4 would overflow a naive size computation.
  ExpectFormatError(
      GgufBuilder().Kv("k", testing::kGArray, {6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20}).Build(),
      "key 'k': array of 2305843009213693952 f32");
  ExpectFormatError(
      GgufBuilder().Kv("k", testing::kGArray, {8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}).Build(),
      "array of 5 strings cannot fit");
}

TEST(GgufMalformedTest, BoolOutOfRange) {
  ExpectFormatError(GgufBuilder().Kv("b", testing::kGBool, {2}).Build(), "bool value 2");
  ExpectFormatError(
      GgufBuilder().Kv("b", testing::kGArray, {7, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 9}).Build(),
      "bool element > 1");
}

TEST(GgufMalformedTest, DuplicateKeysAndTensors) {
  ExpectFormatError(GgufBuilder().KvU32("a", 1).KvU32("a", 2).Build(),
                    "key 'a': duplicate metadata key");
  GgufBuilder b;
  b.Tensor({"w", 0, {4}, std::vector<uint8_t>(16)});
  b.Tensor({"w", 0, {4}, std::vector<uint8_t>(16)});
  ExpectFormatError(b.Build(), "tensor 'w': duplicate tensor name");
}

TEST(GgufMalformedTest, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBuilder b;
    b.KvU32("general.alignment", a);
    ExpectFormatError(b.Build(),
                      "general.alignment = " + std::to_string(a) + " is not a power of two");
  }
  ExpectFormatError(GgufBuilder().KvString("general.alignment", "32").Build(),
                    "'general.alignment' is string, expected u32");
}

GgufBuilder OneTensor(uint32_t type, std::vector<int64_t> ne, size_t n_bytes) {
  GgufBuilder b;
  b.Tensor({"w", type, std::move(ne), std::vector<uint8_t>(n_bytes)});
  return b;
}

TEST(GgufMalformedTest, BadDimensions) {
  ExpectFormatError(OneTensor(0, {}, 0).Build(), "tensor 'w': n_dims = 0");
  ExpectFormatError(OneTensor(0, {1, 1, 1, 1, 1}, 4).Build(), "tensor 'w': n_dims = 5");
  ExpectFormatError(OneTensor(0, {4, 0}, 0).Build(), "tensor 'w': ne[1] = 0 < 1");
  ExpectFormatError(OneTensor(0, {-4}, 0).Build(), "tensor 'w': ne[0] = -4 < 1");
  ExpectFormatError(OneTensor(0, {1ll << 32, 1ll << 32}, 0).Build(),
                    "element count overflows int64 at ne[1]");
  // 2^62 f32 elements fit int64, their 2^64 bytes do not fit u64.
  ExpectFormatError(OneTensor(0, {1ll << 31, 1ll << 31}, 0).Build(), "byte size overflows");
  // 2^61 elements, 2^63 bytes: representable, but not in the file.
  ExpectFormatError(OneTensor(0, {1ll << 31, 1ll << 30}, 0).Build(), "lies outside the file");
}

TEST(GgufMalformedTest, UnknownTensorType) {
  for (uint32_t t : {4u, 5u, 16u, 31u, 1000u}) {  // 4/5: removed Q4_2/Q4_3; 16: IQ2_XXS
    ExpectFormatError(OneTensor(t, {32}, 32).Build(),
                      "tensor 'w': unknown or unsupported ggml type " + std::to_string(t));
  }
}

TEST(GgufMalformedTest, RowNotAWholeNumberOfBlocks) {
  ExpectFormatError(OneTensor(12, {640, 2}, 1000).Build(),
                    "row length ne[0] = 640 is not a multiple of the Q4_K block size 256");
}

// One F32 tensor "a" of 8 values whose relative data offset is rewritten to `offset`.
std::vector<uint8_t> OneTensorAt(uint64_t offset) {
  GgufBuilder b;
  b.Tensor({"a", 0, {8}, std::vector<uint8_t>(32)});
  std::vector<uint8_t> bytes = b.Build();
  // header (24) + name (8 + 1) + n_dims (4) + ne[0] (8) + type (4), then the offset.
  std::memcpy(bytes.data() + 24 + 9 + 4 + 8 + 4, &offset, 8);
  return bytes;
}

TEST(GgufMalformedTest, TensorDataOutsideTheFile) {
  std::vector<uint8_t> bytes = OneTensor(0, {8}, 32).Build();
  bytes.resize(bytes.size() - 1);  // the last byte of the data section is missing
  ExpectFormatError(bytes, "tensor 'w': data [0, +32)");
  ExpectFormatError(OneTensorAt(32), "tensor 'a': data [32, +32)");
  ExpectFormatError(OneTensorAt(uint64_t{1} << 62), "lies outside the file");
  // offset + n_bytes wraps past 2^64 back into the file: must still be rejected.
  ExpectFormatError(OneTensorAt(~uint64_t{0} - 31), "lies outside the file");
  ASSERT_NO_THROW(ParseBytes(OneTensorAt(0)));
}

TEST(GgufMalformedTest, MisalignedOffset) {
  GgufBuilder b;
  b.Tensor({"a", 0, {8}, std::vector<uint8_t>(32)});
  b.Tensor({"b", 0, {8}, std::vector<uint8_t>(32), 40});
  ExpectFormatError(b.Build(), "tensor 'b': data offset 40 is not a multiple of the alignment 32");
}

TEST(GgufMalformedTest, OverlappingTensors) {
  GgufBuilder b;
  b.Tensor({"a", 0, {16}, std::vector<uint8_t>(64)});
  b.Tensor({"b", 0, {8}, std::vector<uint8_t>(32), 32});
  ExpectFormatError(b.Build(), "tensors 'a' and 'b' overlap");
}

// Every proper prefix of a valid file is a truncated file: each must be rejected with a
// ModelFormatError (not another exception, not a crash; ASan builds check the reads).
TEST(GgufMalformedTest, TruncatedAtEveryByte) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  ASSERT_NO_THROW(ParseBytes(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    // Copy the prefix into its own allocation so out-of-bounds reads are caught by ASan.
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
    try {
      ParseBytes(prefix);
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const ModelFormatError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("truncated") != std::string::npos ||
                  what.find("past the end") != std::string::npos ||
                  what.find("cannot") != std::string::npos ||
                  what.find("outside the file") != std::string::npos)
          << "prefix " << n << ": " << what;
    }
  }
}

// Every single-byte corruption of a valid file parses or throws ModelFormatError.
TEST(GgufMalformedTest, EveryByteFlipIsHandled) {
  const std::vector<uint8_t> bytes = SampleBuilder().Build();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] ^= x;
      try {
        const GgufFile f = ParseBytes(bad);
        for (const GgufTensorInfo& t : f.tensors()) {
          ASSERT_LE(t.offset + t.n_bytes, bad.size()) << "byte " << i;
        }
      } catch (const ModelFormatError&) {
      }
    }
  }
}

}  // namespace
}  // namespace rpa
