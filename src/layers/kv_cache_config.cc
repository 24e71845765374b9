#include "layers/kv_cache_config.h"

#include <cmath>

#include "util/error.h"

namespace rpa {
namespace {

constexpr std::string_view kAccepted = "auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2";

void CheckScale(float scale, const char* name, int layer) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    throw InvalidArgument(
        Concat(name, "=", scale, " of layer ", layer, " must be finite and > 0."));
  }
}

}  // namespace

void ValidateKvScales(const KvScales& scales, int layer) {
  CheckScale(scales.k_scale, "k_scale", layer);
  CheckScale(scales.v_scale, "v_scale", layer);
}

DType ParseKvCacheDtype(std::string_view kv_cache_dtype, DType activation_dtype) {
  if (activation_dtype != DType::kFloat32 && activation_dtype != DType::kBFloat16) {
    throw InvalidArgument(
        Concat("activation dtype=", DTypeName(activation_dtype), " must be float32 or bfloat16."));
  }
  if (kv_cache_dtype == "auto") return activation_dtype;
  if (kv_cache_dtype == "bfloat16") return DType::kBFloat16;
  if (kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3") return DType::kFloat8E4M3FN;
  if (kv_cache_dtype == "fp8_e5m2") return DType::kFloat8E5M2;
  throw InvalidArgument(
      Concat("Unknown kv_cache_dtype=\"", kv_cache_dtype, "\"; expected one of: ", kAccepted, "."));
}

KvCacheConfig KvCacheConfig::Parse(std::string_view kv_cache_dtype, DType activation_dtype,
                                   int num_layers) {
  const DType dtype = ParseKvCacheDtype(kv_cache_dtype, activation_dtype);
  if (num_layers < 0) throw InvalidArgument(Concat("num_layers=", num_layers, " must be >= 0."));
  return KvCacheConfig(dtype, num_layers);
}

void KvCacheConfig::CheckLayer(int layer) const {
  if (layer < 0 || layer >= num_layers()) {
    throw InvalidArgument(Concat("layer=", layer, " is out of range [0, ", num_layers(), ")."));
  }
}

const KvScales& KvCacheConfig::scales(int layer) const {
  CheckLayer(layer);
  return scales_[layer];
}

void KvCacheConfig::SetScales(int layer, const KvScales& scales) {
  CheckLayer(layer);
  ValidateKvScales(scales, layer);
  scales_[layer] = scales;
}

}  // namespace rpa
