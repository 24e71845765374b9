// Dequantization on hand-built blocks whose values follow from the layouts by hand
// (MODELS.md §3). The bulk check against the PyPI `gguf` oracle is gguf_oracle_test.cc.
#include "model/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "numerics/convert.h"

namespace rpa {
namespace {

// f16 codes of exactly representable scales.
constexpr uint16_t kF16Half = 0x3800;          // 0.5
constexpr uint16_t kF16One = 0x3C00;           // 1.0
constexpr uint16_t kF16Two = 0x4000;           // 2.0
constexpr uint16_t kF16MinusQuarter = 0xB400;  // -0.25

void PutF16(std::vector<uint8_t>& b, size_t at, uint16_t code) { std::memcpy(&b[at], &code, 2); }

std::vector<float> Dequant(GgmlType type, const std::vector<uint8_t>& block, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), -999.f);
  DequantizeRow(type, block.data(), y.data(), n);
  return y;
}

TEST(DequantTest, Q4_0) {
  std::vector<uint8_t> b(18);
  PutF16(b, 0, kF16Half);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequant(GgmlType::kQ4_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;            // low nibble j
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;  // high nibble 15 - j
  }
}

TEST(DequantTest, Q4_1) {
  std::vector<uint8_t> b(20);
  PutF16(b, 0, kF16Two);
  PutF16(b, 2, kF16MinusQuarter);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (3 << 4));
  const std::vector<float> y = Dequant(GgmlType::kQ4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 2.0f - 0.25f);
    EXPECT_EQ(y[j + 16], 3 * 2.0f - 0.25f);
  }
}

TEST(DequantTest, Q5_0) {
  std::vector<uint8_t> b(22);
  PutF16(b, 0, kF16One);
  const uint32_t qh = 0x80000001u;  // 5th bit set for value 0 and value 31
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = Dequant(GgmlType::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 0 + 16 - 16);  // 0 | 16, minus 16
  EXPECT_EQ(y[1], 1 - 16);
  EXPECT_EQ(y[15], 15 - 16);
  EXPECT_EQ(y[16], 15 - 16);        // high nibble of byte 0, no 5th bit
  EXPECT_EQ(y[31], (0 | 16) - 16);  // high nibble of byte 15 is 0, 5th bit set
}

TEST(DequantTest, Q8_0) {
  std::vector<uint8_t> b(34);
  PutF16(b, 0, kF16MinusQuarter);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const std::vector<float> y = Dequant(GgmlType::kQ8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * -0.25f);
}

TEST(DequantTest, Q4_K) {
  std::vector<uint8_t> b(144);
  PutF16(b, 0, kF16One);   // d
  PutF16(b, 2, kF16Half);  // dmin
  // Sub-block s gets scale sc = s + 1 and min mn = 2s + 40 (6 bits: the top 2 bits of
  // sub-blocks 4..7 live in bytes 0..7).
  uint8_t* q = &b[4];
  for (int s = 0; s < 8; ++s) {
    const int sc = s + 1, mn = 2 * s + 40;
    if (s < 4) {
      q[s] = static_cast<uint8_t>(sc);
      q[s + 4] = static_cast<uint8_t>(mn);
    } else {
      q[s + 4] = static_cast<uint8_t>((sc & 15) | ((mn & 15) << 4));
      q[s - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      q[s] |= static_cast<uint8_t>((mn >> 4) << 6);
    }
  }
  for (int i = 0; i < 128; ++i) b[16 + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  const std::vector<float> y = Dequant(GgmlType::kQ4_K, b, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int i = 32 * c + l;
      const int s_lo = 2 * c, s_hi = 2 * c + 1;
      EXPECT_EQ(y[64 * c + l], (s_lo + 1) * float(i % 16) - 0.5f * (2 * s_lo + 40))
          << c << "," << l;
      EXPECT_EQ(y[64 * c + 32 + l], (s_hi + 1) * float(15 - i % 16) - 0.5f * (2 * s_hi + 40));
    }
  }
}

TEST(DequantTest, Q6_K) {
  std::vector<uint8_t> b(210);
  // Value v (0..255) gets the 6-bit code v % 64 and scale index v / 16 with sc = is - 8.
  // Half h, l in 0..31: values 128h + l + 32k (k = 0..3) share ql/qh bytes as laid out.
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      int code[4];
      for (int k = 0; k < 4; ++k) code[k] = (128 * h + l + 32 * k) % 64;
      b[64 * h + l] = static_cast<uint8_t>((code[0] & 15) | ((code[2] & 15) << 4));
      b[64 * h + l + 32] = static_cast<uint8_t>((code[1] & 15) | ((code[3] & 15) << 4));
      b[128 + 32 * h + l] = static_cast<uint8_t>((code[0] >> 4) | ((code[1] >> 4) << 2) |
                                                 ((code[2] >> 4) << 4) | ((code[3] >> 4) << 6));
    }
  }
  for (int is = 0; is < 16; ++is) b[192 + is] = static_cast<uint8_t>(static_cast<int8_t>(is - 8));
  PutF16(b, 208, kF16Half);
  const std::vector<float> y = Dequant(GgmlType::kQ6_K, b, 256);
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(y[v], 0.5f * float(v / 16 - 8) * float(v % 64 - 32)) << v;
  }
}

TEST(DequantTest, PlainTypes) {
  const float f[3] = {1.5f, -0.0f, 3e38f};
  std::vector<uint8_t> b(12);
  std::memcpy(b.data(), f, 12);
  EXPECT_EQ(Dequant(GgmlType::kF32, b, 3), (std::vector<float>{1.5f, -0.0f, 3e38f}));
  const uint16_t h[3] = {kF16One, 0x0001 /* 2^-24 */, 0xFC00 /* -inf */};
  std::memcpy(b.data(), h, 6);
  const std::vector<float> yh = Dequant(GgmlType::kF16, b, 3);
  EXPECT_EQ(yh[0], 1.0f);
  EXPECT_EQ(yh[1], 0x1p-24f);
  EXPECT_EQ(yh[2], -INFINITY);
  const uint16_t bf[2] = {0x3F80 /* 1 */, 0xC040 /* -3 */};
  std::memcpy(b.data(), bf, 4);
  EXPECT_EQ(Dequant(GgmlType::kBF16, b, 2), (std::vector<float>{1.0f, -3.0f}));
}

// DequantizeRowTo = DequantizeRow, then one rounding per value (checked with the scalar
// reference conversion), across several 256-value chunks and a partial last chunk.
TEST(DequantTest, RowToNarrowTypesRoundsTheF32Values) {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16, GgmlType::kQ6_K}) {
    const GgmlTypeTraits& t = GetGgmlTypeTraits(type);
    const int64_t n = type == GgmlType::kQ8_0 || type == GgmlType::kF16 ? 800 : 768;
    std::vector<uint8_t> raw(static_cast<size_t>(n / t.block_size * t.type_size));
    uint32_t state = 12345;
    for (uint8_t& b : raw) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    // Make the f16 scales moderate: high byte 0x2C | sign | top mantissa bits gives
    // |d| in [2^-4, 2^-3), so products stay finite and non-trivial.
    if (type != GgmlType::kF16) {
      for (size_t blk = 0; blk < raw.size() / t.type_size; ++blk) {
        const size_t at = blk * t.type_size + (type == GgmlType::kQ6_K ? 208 : 0);
        raw[at + 1] = static_cast<uint8_t>(0x2C | (raw[at + 1] & 0x83));
        if (type == GgmlType::kQ4_K)
          raw[at + 3] = static_cast<uint8_t>(0x2C | (raw[at + 3] & 0x83));
      }
    }
    std::vector<float> f32(static_cast<size_t>(n));
    DequantizeRow(type, raw.data(), f32.data(), n);
    for (DType to : {DType::kBFloat16, DType::kFloat16}) {
      std::vector<uint16_t> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      DequantizeRowTo(type, raw.data(), to, got.data(), n);
      ConvertScalar(DType::kFloat32, f32.data(), to, want.data(), static_cast<size_t>(n));
      EXPECT_EQ(got, want) << GgmlTypeName(type) << " -> " << DTypeName(to);
    }
    std::vector<float> same(static_cast<size_t>(n));
    DequantizeRowTo(type, raw.data(), DType::kFloat32, same.data(), n);
    // Bitwise: random F16 bytes include NaNs.
    EXPECT_EQ(std::memcmp(same.data(), f32.data(), f32.size() * 4), 0);
  }
  float y[32];
  EXPECT_THROW(DequantizeRowTo(GgmlType::kQ4_0, y, DType::kBFloat16, y, 16), InvalidArgument);
}

TEST(DequantTest, RejectsBadArguments) {
  std::vector<uint8_t> b(1024);
  float y[256];
  EXPECT_THROW(DequantizeRow(GgmlType::kQ4_0, b.data(), y, 31), InvalidArgument);
  EXPECT_THROW(DequantizeRow(GgmlType::kQ4_K, b.data(), y, 32), InvalidArgument);
  EXPECT_THROW(DequantizeRow(GgmlType::kF32, b.data(), y, -1), InvalidArgument);
  EXPECT_THROW(DequantizeRow(GgmlType::kQ5_K, b.data(), y, 256), InvalidArgument);
  EXPECT_NO_THROW(DequantizeRow(GgmlType::kQ4_0, b.data(), y, 0));
  EXPECT_TRUE(IsDequantizable(GgmlType::kQ6_K));
  EXPECT_FALSE(IsDequantizable(GgmlType::kQ2_K));
}

}  // namespace
}  // namespace rpa
