#include <cstring>

#include "numerics/convert.h"
#include "numerics/scalar_codec.h"
#include "util/error.h"

namespace rpa {

float LoadAsF32(DType from, const void* src) {
  switch (from) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, src, 4);
      return v;
    }
    case DType::kBFloat16: {
      uint16_t c;
      std::memcpy(&c, src, 2);
      return BF16ToF32(c);
    }
    case DType::kFloat16: {
      uint16_t c;
      std::memcpy(&c, src, 2);
      return F16ToF32(c);
    }
    case DType::kFloat8E4M3FN:
      return E4M3FNToF32(*static_cast<const uint8_t*>(src));
    case DType::kFloat8E5M2:
      return E5M2ToF32(*static_cast<const uint8_t*>(src));
  }
  throw InvalidArgument("LoadAsF32: invalid dtype");
}

void StoreFromF32(DType to, float value, void* dst, Overflow overflow) {
  const bool sat = overflow == Overflow::kSaturate;
  switch (to) {
    case DType::kFloat32:
      std::memcpy(dst, &value, 4);
      return;
    case DType::kBFloat16: {
      const uint16_t c = sat ? F32ToBF16Saturate(value) : F32ToBF16(value);
      std::memcpy(dst, &c, 2);
      return;
    }
    case DType::kFloat16: {
      const uint16_t c = sat ? F32ToF16Saturate(value) : F32ToF16(value);
      std::memcpy(dst, &c, 2);
      return;
    }
    case DType::kFloat8E4M3FN:
      *static_cast<uint8_t*>(dst) = sat ? F32ToE4M3FNSaturate(value) : F32ToE4M3FN(value);
      return;
    case DType::kFloat8E5M2:
      *static_cast<uint8_t*>(dst) = sat ? F32ToE5M2Saturate(value) : F32ToE5M2(value);
      return;
  }
  throw InvalidArgument("StoreFromF32: invalid dtype");
}

void ConvertScalar(DType from, const void* src, DType to, void* dst, size_t n, Overflow overflow) {
  if (from == to) {  // the identity, NaN payloads included (as numpy's astype)
    if (n != 0 && src != dst) std::memmove(dst, src, n * DTypeSize(from));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t ss = DTypeSize(from), ds = DTypeSize(to);
  for (size_t i = 0; i < n; ++i)
    StoreFromF32(to, LoadAsF32(from, s + i * ss), d + i * ds, overflow);
}

}  // namespace rpa
