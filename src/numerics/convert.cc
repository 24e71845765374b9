// Bulk Convert: one SIMD loop per (from, to, overflow) triple, compiled for every Highway
// target and chosen at runtime (HWY_DYNAMIC_DISPATCH).
//
// Each loop decodes Lanes(df) source elements to f32 vectors and encodes them into the
// destination (numerics/simd_codec-inl.h). Every narrow value is exact in f32, so going
// through f32 rounds once, exactly as ConvertScalar does. Memory traffic is one read of
// the source and one write of the destination; nothing is staged except the tail, which
// goes through a stack copy so no byte outside [0, n) is touched.
#include "numerics/convert.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "numerics/convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "numerics/simd_codec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace {

// Two vectors per iteration: the decode and encode chains are long and independent, so
// interleaving two hides their latency.
template <DType kFrom, DType kTo, bool kSaturate>
void ConvertLoop(const void* src, void* dst, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  constexpr size_t kS = DTypeSize(kFrom), kD = DTypeSize(kTo);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto v0 = DecodeAs<kFrom>(df, s + i * kS);
    const auto v1 = DecodeAs<kFrom>(df, s + (i + lanes) * kS);
    EncodeAs<kTo, kSaturate>(df, v0, d + i * kD);
    EncodeAs<kTo, kSaturate>(df, v1, d + (i + lanes) * kD);
  }
  ForEachChunk<kS, kD>(df, s + i * kS, d + i * kD, n - i, [df](const uint8_t* cs, uint8_t* cd) {
    EncodeAs<kTo, kSaturate>(df, DecodeAs<kFrom>(df, cs), cd);
  });
}

template <DType kFrom, DType kTo>
void ConvertTo(const void* src, void* dst, size_t n, Overflow overflow) {
  if (overflow == Overflow::kSaturate) {
    ConvertLoop<kFrom, kTo, true>(src, dst, n);
  } else {
    ConvertLoop<kFrom, kTo, false>(src, dst, n);
  }
}

template <DType kFrom>
void ConvertFrom(const void* src, DType to, void* dst, size_t n, Overflow overflow) {
  switch (to) {
    case DType::kFloat32:
      return ConvertTo<kFrom, DType::kFloat32>(src, dst, n, overflow);
    case DType::kBFloat16:
      return ConvertTo<kFrom, DType::kBFloat16>(src, dst, n, overflow);
    case DType::kFloat16:
      return ConvertTo<kFrom, DType::kFloat16>(src, dst, n, overflow);
    case DType::kFloat8E4M3FN:
      return ConvertTo<kFrom, DType::kFloat8E4M3FN>(src, dst, n, overflow);
    case DType::kFloat8E5M2:
      return ConvertTo<kFrom, DType::kFloat8E5M2>(src, dst, n, overflow);
  }
}

}  // namespace

// REQUIRES: from != to (a copy, done by the caller).
void ConvertSimd(DType from, const void* src, DType to, void* dst, size_t n, Overflow overflow) {
  switch (from) {
    case DType::kFloat32:
      return ConvertFrom<DType::kFloat32>(src, to, dst, n, overflow);
    case DType::kBFloat16:
      return ConvertFrom<DType::kBFloat16>(src, to, dst, n, overflow);
    case DType::kFloat16:
      return ConvertFrom<DType::kFloat16>(src, to, dst, n, overflow);
    case DType::kFloat8E4M3FN:
      return ConvertFrom<DType::kFloat8E4M3FN>(src, to, dst, n, overflow);
    case DType::kFloat8E5M2:
      return ConvertFrom<DType::kFloat8E5M2>(src, to, dst, n, overflow);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "util/error.h"

namespace rpa {

HWY_EXPORT(ConvertSimd);

void Convert(DType from, const void* src, DType to, void* dst, size_t n, Overflow overflow) {
  if (n != 0 && (src == nullptr || dst == nullptr)) {
    throw InvalidArgument(Concat("Convert: null pointer for n=", n, " elements"));
  }
  if (from == to) {  // the identity, as ConvertScalar; memmove because src == dst is allowed
    if (n != 0 && src != dst) std::memmove(dst, src, n * DTypeSize(from));
    return;
  }
  HWY_DYNAMIC_DISPATCH(ConvertSimd)(from, src, to, dst, n, overflow);
}

}  // namespace rpa
#endif  // HWY_ONCE
