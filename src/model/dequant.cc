#include "model/dequant.h"

#include <cstring>

#include "numerics/scalar_codec.h"
#include "util/error.h"

namespace rpa {
namespace {

float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Each Block* function decodes one block at `b` into y[0..block_size).

// Q4_0, 32 values in 18 bytes: f16 d; u8 qs[16]. Low nibbles hold values 0..15, high nibbles
// 16..31; each is an offset-binary 4-bit integer (q - 8).
void BlockQ4_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 15) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1, 32 values in 20 bytes: f16 d, m; u8 qs[16]; y = q·d + m with q in 0..15.
void BlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const float m = LoadF16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    // The product is exact (11-bit d times a 4-bit q); only the sum rounds.
    const float lo = static_cast<float>(qs[j] & 15) * d;
    const float hi = static_cast<float>(qs[j] >> 4) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

// Q5_0, 32 values in 22 bytes: f16 d; u8 qh[4] (bit j = 5th bit of value j); u8 qs[16].
void BlockQ5_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

// Q8_0, 32 values in 34 bytes: f16 d; i8 qs[32].
void BlockQ8_0(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// Q4_K super-block, 256 values in 144 bytes: f16 d, dmin; u8 scales[12]; u8 qs[128].
// Eight sub-blocks of 32 each have a 6-bit scale sc and 6-bit min mn packed in `scales`:
// sub-blocks 0..3 in the low 6 bits of bytes 0..3 (sc) and 4..7 (mn); sub-blocks 4..7 take
// their low 4 bits from bytes 8..11 and their top 2 bits from the spare top bits of 0..7.
void ScaleMinK4(int s, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (s < 4) {
    *sc = q[s] & 63;
    *mn = q[s + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[s + 4] & 15) | ((q[s - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
  }
}

void BlockQ4_K(const uint8_t* b, float* y) {
  const float d = LoadF16(b);
  const float dmin = LoadF16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  // Chunk c of 64 values uses qs[32c .. 32c+31]: low nibbles are sub-block 2c, high 2c+1.
  for (int c = 0; c < 4; ++c) {
    uint8_t sc, mn;
    ScaleMinK4(2 * c, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(mn);
    ScaleMinK4(2 * c + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * c;
    float* out = y + 64 * c;
    for (int l = 0; l < 32; ++l) {
      const float lo = d1 * static_cast<float>(q[l] & 15);
      const float hi = d2 * static_cast<float>(q[l] >> 4);
      out[l] = lo - m1;
      out[l + 32] = hi - m2;
    }
  }
}

// Q6_K super-block, 256 values in 210 bytes: u8 ql[128] (low 4 bits); u8 qh[64] (high 2
// bits); i8 sc[16] (one scale per 16 values); f16 d last. Two halves of 128 values.
void BlockQ6_K(const uint8_t* b, float* y) {
  const float d = LoadF16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h);
    float* out = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      // (d·sc)·q: the scale product is rounded first, as in the references.
      out[l] = (d * static_cast<float>(sc[is])) * static_cast<float>(q1);
      out[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
      out[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
      out[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockFunction(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return BlockQ4_0;
    case GgmlType::kQ4_1:
      return BlockQ4_1;
    case GgmlType::kQ5_0:
      return BlockQ5_0;
    case GgmlType::kQ8_0:
      return BlockQ8_0;
    case GgmlType::kQ4_K:
      return BlockQ4_K;
    case GgmlType::kQ6_K:
      return BlockQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace

bool IsDequantizable(GgmlType type) { return GetGgmlTypeTraits(type).dequantizable; }

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  if (!traits.dequantizable) {
    throw InvalidArgument(Concat("DequantizeRow: ggml type ", traits.name, " (",
                                 static_cast<uint32_t>(type), ") is not supported"));
  }
  if (n < 0 || n % traits.block_size != 0) {
    throw InvalidArgument(Concat("DequantizeRow: n = ", n, " is not a non-negative multiple of ",
                                 "the ", traits.name, " block size ", traits.block_size));
  }
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, s, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadF16(s + 2 * i);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = BF16ToF32(h);
      }
      return;
    default:
      break;
  }
  const BlockFn block = BlockFunction(type);
  RPA_CHECK(block != nullptr);  // the traits table and BlockFunction list the same types
  const int64_t n_blocks = n / traits.block_size;
  for (int64_t i = 0; i < n_blocks; ++i) {
    block(s + i * traits.type_size, dst + i * traits.block_size);
  }
}

std::vector<float> DequantizeTensor(const GgufTensorInfo& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.n_elements));
  DequantizeRow(tensor.type, tensor.data, out.data(), tensor.n_elements);
  return out;
}

}  // namespace rpa
