// KvCacheConfig: how a model's KV cache is stored, parsed once at the edge from vLLM's
// `kv_cache_dtype` string (../shared/docs/rpa-contract.md §4), plus the per-layer static
// scales that quantization divides by.
//
//   "auto"      -> the model's activation dtype (no quantization)
//   "bfloat16"  -> bfloat16 (no quantization)
//   "fp8"       -> float8_e4m3fn  (vLLM's alias)
//   "fp8_e4m3"  -> float8_e4m3fn
//   "fp8_e5m2"  -> float8_e5m2
#pragma once

#include <string_view>
#include <vector>

#include "numerics/dtype.h"

namespace rpa {

// Per-tensor static scales of one layer: the cache stores x / scale. 1.0 unless
// calibrated (max |x| over calibration text / dtype max).
struct KvScales {
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

// Throws InvalidArgument unless both scales are finite and > 0; the message names
// `layer` and the offending value.
void ValidateKvScales(const KvScales& scales, int layer);

// The cache dtype for vLLM's `kv_cache_dtype` string; "auto" resolves to
// `activation_dtype`. Throws InvalidArgument naming the accepted values for any other
// string, and when activation_dtype is not float32 or bfloat16 (the kernel's query dtypes).
DType ParseKvCacheDtype(std::string_view kv_cache_dtype, DType activation_dtype);

class KvCacheConfig {
 public:
  // Every layer starts with scales 1.0. Throws as ParseKvCacheDtype, or if num_layers < 0.
  static KvCacheConfig Parse(std::string_view kv_cache_dtype, DType activation_dtype,
                             int num_layers);

  DType dtype() const { return dtype_; }
  // True iff K/V are quantized (the cache dtype is a 1-byte float).
  bool quantized() const { return IsFp8(dtype_); }
  int num_layers() const { return static_cast<int>(scales_.size()); }

  // Throws InvalidArgument if layer is out of range.
  const KvScales& scales(int layer) const;
  // Throws InvalidArgument if layer is out of range or a scale is not finite and > 0.
  void SetScales(int layer, const KvScales& scales);

 private:
  KvCacheConfig(DType dtype, int num_layers) : dtype_(dtype), scales_(num_layers) {}
  void CheckLayer(int layer) const;

  DType dtype_;
  std::vector<KvScales> scales_;  // [num_layers]
};

}  // namespace rpa
