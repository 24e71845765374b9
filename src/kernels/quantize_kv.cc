// quantize_kv: cast(clip(x / scale, -max, +max)) into an fp8 cache dtype.
//
// One pass over the input: decode Lanes(df) elements to f32, divide by the f32 scale
// (IEEE division, as the scalar formulation), then the saturating fp8 encoder of
// numerics/simd_codec-inl.h. Saturating encode == clip-then-cast: a value beyond +-max
// either rounds to the max code anyway or overflows, and saturation maps overflow and
// +-inf to +-max, exactly what clipping first gives; NaN passes through both as NaN.
#include "kernels/quantize_kv.h"

#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_kv.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "numerics/simd_codec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace {

template <DType kFrom, DType kTo>
void QuantizeLoop(const void* src, void* dst, size_t n, float scale) {
  const hn::ScalableTag<float> df;
  const auto vscale = hn::Set(df, scale);
  ForEachChunk<DTypeSize(kFrom), 1>(df, src, dst, n, [df, vscale](const uint8_t* s, uint8_t* d) {
    EncodeAs<kTo, /*kSaturate=*/true>(df, hn::Div(DecodeAs<kFrom>(df, s), vscale), d);
  });
}

template <DType kTo>
void QuantizeFrom(DType from, const void* src, void* dst, size_t n, float scale) {
  switch (from) {
    case DType::kFloat32:
      return QuantizeLoop<DType::kFloat32, kTo>(src, dst, n, scale);
    case DType::kBFloat16:
      return QuantizeLoop<DType::kBFloat16, kTo>(src, dst, n, scale);
    case DType::kFloat16:
      return QuantizeLoop<DType::kFloat16, kTo>(src, dst, n, scale);
    case DType::kFloat8E4M3FN:
      return QuantizeLoop<DType::kFloat8E4M3FN, kTo>(src, dst, n, scale);
    case DType::kFloat8E5M2:
      return QuantizeLoop<DType::kFloat8E5M2, kTo>(src, dst, n, scale);
  }
}

}  // namespace

// REQUIRES: IsFp8(to); validated by the caller.
void QuantizeSimd(DType from, const void* src, DType to, void* dst, size_t n, float scale) {
  if (to == DType::kFloat8E4M3FN) {
    QuantizeFrom<DType::kFloat8E4M3FN>(from, src, dst, n, scale);
  } else {
    QuantizeFrom<DType::kFloat8E5M2>(from, src, dst, n, scale);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "util/error.h"

namespace rpa {
namespace {

void CheckFp8(DType cache_dtype) {
  if (!IsFp8(cache_dtype)) {
    throw InvalidArgument(Concat("quantize_kv: cache_dtype=", DTypeName(cache_dtype),
                                 " is not an fp8 dtype (float8_e4m3fn or float8_e5m2); "
                                 "a non-fp8 cache takes K/V unquantized"));
  }
}

void CheckScale(const char* name, float scale) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    throw InvalidArgument(Concat("quantize_kv: ", name, "=", scale, " must be finite and > 0"));
  }
}

void CheckContiguous(const char* name, const TensorView& t) {
  if (t.numel() != 0 && t.data == nullptr) {
    throw InvalidArgument(Concat("quantize_kv: ", name, " has no data but shape ", t.shape_str()));
  }
  if (!t.is_contiguous()) {
    throw InvalidArgument(
        Concat("quantize_kv: ", name, " with shape ", t.shape_str(), " must be contiguous"));
  }
}

bool SameShape(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

}  // namespace

HWY_EXPORT(QuantizeSimd);

void QuantizeSpan(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t n,
                  float scale) {
  CheckFp8(dst_dtype);
  CheckScale("scale", scale);
  if (n != 0 && (src == nullptr || dst == nullptr)) {
    throw InvalidArgument(Concat("quantize_kv: null pointer for n=", n, " elements"));
  }
  HWY_DYNAMIC_DISPATCH(QuantizeSimd)(src_dtype, src, dst_dtype, dst, n, scale);
}

void QuantizeKv(DType cache_dtype, const TensorView& key, const TensorView& value, float k_scale,
                float v_scale, const TensorView& key_out, const TensorView& value_out) {
  CheckFp8(cache_dtype);
  CheckScale("k_scale", k_scale);
  CheckScale("v_scale", v_scale);
  if (!SameShape(key, value)) {
    throw InvalidArgument(Concat("quantize_kv: Expected k.shape=", key.shape_str(),
                                 " to be equal to v.shape=", value.shape_str()));
  }
  if (!SameShape(key, key_out) || !SameShape(value, value_out)) {
    throw InvalidArgument(Concat("quantize_kv: output shapes key_out=", key_out.shape_str(),
                                 ", value_out=", value_out.shape_str(),
                                 " must equal the input shape ", key.shape_str()));
  }
  if (key_out.dtype != cache_dtype || value_out.dtype != cache_dtype) {
    throw InvalidArgument(Concat("quantize_kv: output dtypes key_out=", DTypeName(key_out.dtype),
                                 ", value_out=", DTypeName(value_out.dtype),
                                 " must equal cache_dtype=", DTypeName(cache_dtype)));
  }
  CheckContiguous("key", key);
  CheckContiguous("value", value);
  CheckContiguous("key_out", key_out);
  CheckContiguous("value_out", value_out);
  const auto n = static_cast<size_t>(key.numel());
  HWY_DYNAMIC_DISPATCH(QuantizeSimd)(key.dtype, key.data, cache_dtype, key_out.data, n, k_scale);
  HWY_DYNAMIC_DISPATCH(QuantizeSimd)
  (value.dtype, value.data, cache_dtype, value_out.data, n, v_scale);
}

}  // namespace rpa
#endif  // HWY_ONCE
