#include "layers/fake_quant_backend.h"

#include <utility>

#include "kernels/quantize_kv.h"
#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {

void FakeQuantizeSpan(DType dtype, const void* x, DType fp8, float scale, size_t n, void* out,
                      std::vector<uint8_t>& codes, std::vector<float>& decoded) {
  if (codes.size() < n) codes.resize(n);
  if (decoded.size() < n) decoded.resize(n);
  QuantizeSpan(dtype, x, fp8, codes.data(), n, scale);             // checks fp8 and scale
  Convert(fp8, codes.data(), DType::kFloat32, decoded.data(), n);  // exact
  for (size_t i = 0; i < n; ++i) decoded[i] *= scale;       // one f32 rounding (none for 2^k)
  Convert(DType::kFloat32, decoded.data(), dtype, out, n);  // exact for f32; RNE to bf16
}

FakeQuantBackend::FakeQuantBackend(AttentionBackend& inner, DType fp8, std::vector<bool> layers,
                                   bool keys, bool values, const KvCacheConfig& scales)
    : inner_(inner), fp8_(fp8), layers_(std::move(layers)), keys_(keys), values_(values) {
  if (!IsFp8(fp8)) {
    throw InvalidArgument(
        Concat("FakeQuantBackend emulates an fp8 cache; got ", DTypeName(fp8), "."));
  }
  if (layers_.empty() || static_cast<int>(layers_.size()) != scales.num_layers()) {
    throw InvalidArgument(Concat("FakeQuantBackend: layer selection has ", layers_.size(),
                                 " entries and the scales ", scales.num_layers(),
                                 " layers; they must be equal and > 0."));
  }
  for (int l = 0; l < scales.num_layers(); ++l) scales_.push_back(scales.scales(l));
}

void FakeQuantBackend::Prepare(const TensorView& keys, const TensorView& values,
                               const AttentionOptions& options, TensorView& keys_out,
                               TensorView& values_out) {
  const int64_t layer = calls_ % static_cast<int64_t>(layers_.size());
  ++calls_;
  keys_out = keys;
  values_out = values;
  if (!layers_[layer] || (!keys_ && !values_)) return;
  if (keys.dtype != DType::kFloat32 && keys.dtype != DType::kBFloat16) {
    throw InvalidArgument(
        Concat("FakeQuantBackend needs an f32 or bf16 cache (K/V not yet "
               "quantized); got keys.dtype=",
               DTypeName(keys.dtype), "."));
  }
  if (options.k_scale || options.v_scale) {
    throw InvalidArgument("FakeQuantBackend: k_scale/v_scale are set; the cache is already fp8.");
  }
  if (!keys.is_contiguous() || !values.is_contiguous() || values.dtype != keys.dtype) {
    throw InvalidArgument(
        Concat("FakeQuantBackend: keys/values must be contiguous and of one "
               "dtype; got ",
               DTypeName(keys.dtype), " and ", DTypeName(values.dtype), "."));
  }
  const KvScales& s = scales_[layer];
  auto emulate = [&](const TensorView& in, std::vector<uint8_t>& scratch, float scale,
                     TensorView& out) {
    if (scratch.size() < in.byte_size()) scratch.resize(in.byte_size());
    FakeQuantizeSpan(in.dtype, in.data, fp8_, scale, static_cast<size_t>(in.numel()),
                     scratch.data(), codes_, decoded_);
    out.data = scratch.data();
  };
  if (keys_) emulate(keys, k_scratch_, s.k_scale, keys_out);
  if (values_) emulate(values, v_scratch_, s.v_scale, values_out);
}

void FakeQuantBackend::Run(const TensorView& queries, const TensorView& keys,
                           const TensorView& values, const TensorView& kv_cache,
                           const AttentionMetadata& metadata, const AttentionOptions& options,
                           const TensorView& output) {
  TensorView k, v;
  Prepare(keys, values, options, k, v);
  inner_.Run(queries, k, v, kv_cache, metadata, options, output);
}

void FakeQuantBackend::RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                                    const TensorView& keys, const TensorView& values,
                                    const TensorView& kv_cache, const AttentionMetadata& metadata,
                                    const AttentionOptions& options, const TensorView& output) {
  TensorView k, v;
  Prepare(keys, values, options, k, v);
  inner_.RunWithPlans(plans, queries, k, v, kv_cache, metadata, options, output);
}

}  // namespace rpa
