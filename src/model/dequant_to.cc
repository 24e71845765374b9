// DequantizeRowTo: dequantization straight into a narrow float type. Apart from dequant.cc
// because it needs numerics' bulk (Highway) conversion, which the parser fuzzer, built
// from dequant.cc alone, does without.
#include <algorithm>

#include "model/dequant.h"
#include "numerics/convert.h"

namespace rpa {

void DequantizeRowTo(GgmlType type, const void* src, DType to, void* dst, int64_t n) {
  if (to == DType::kFloat32) return DequantizeRow(type, src, static_cast<float*>(dst), n);
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  if (!traits.dequantizable || n < 0 || n % traits.block_size != 0) {
    DequantizeRow(type, src, nullptr, n);  // throws the argument error before any write
  }
  // Through an f32 scratch of 256 values: a multiple of every block size (1, 32, 256).
  constexpr int64_t kChunk = 256;
  float scratch[kChunk];
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);  // a multiple of the block size
    DequantizeRow(type, s + i / traits.block_size * traits.type_size, scratch, m);
    Convert(DType::kFloat32, scratch, to, d + i * DTypeSize(to), static_cast<size_t>(m));
  }
}

}  // namespace rpa
