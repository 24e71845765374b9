#include "layers/fake_quant_backend.h"

#include <utility>

#include "kernels/quantize_kv.h"
#include "layers/hadamard.h"
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
                                   bool keys, bool values, const KvCacheConfig& scales,
                                   bool rotate_qk)
    : inner_(inner),
      fp8_(fp8),
      layers_(std::move(layers)),
      keys_(keys),
      values_(values),
      rotate_qk_(rotate_qk) {
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

void FakeQuantBackend::Rotate(const TensorView& in, bool quantize, float scale,
                              std::vector<uint8_t>& scratch, TensorView& out) {
  const int64_t n = in.numel(), d = in.shape[in.rank - 1];
  if (rot_.size() < static_cast<size_t>(n)) rot_.resize(n);
  Convert(in.dtype, in.data, DType::kFloat32, rot_.data(), n);  // exact
  HadamardRotateRows(rot_.data(), n / d, d);                    // checks d
  if (quantize) {  // in place: QuantizeSpan reads all of rot_ before it is rewritten
    FakeQuantizeSpan(DType::kFloat32, rot_.data(), fp8_, scale, static_cast<size_t>(n), rot_.data(),
                     codes_, decoded_);
  }
  if (scratch.size() < in.byte_size()) scratch.resize(in.byte_size());
  Convert(DType::kFloat32, rot_.data(), in.dtype, scratch.data(), n);
  out.data = scratch.data();
}

void FakeQuantBackend::Prepare(const TensorView& queries, const TensorView& keys,
                               const TensorView& values, const AttentionOptions& options,
                               TensorView& queries_out, TensorView& keys_out,
                               TensorView& values_out) {
  const int64_t layer = calls_ % static_cast<int64_t>(layers_.size());
  ++calls_;
  queries_out = queries;
  keys_out = keys;
  values_out = values;
  const bool emulate = layers_[layer] && (keys_ || values_);
  if (!emulate && !rotate_qk_) return;
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
  if (rotate_qk_) {
    if (!queries.is_contiguous() ||
        (queries.dtype != DType::kFloat32 && queries.dtype != DType::kBFloat16)) {
      throw InvalidArgument(
          Concat("FakeQuantBackend rotate_qk: queries must be contiguous f32 or "
                 "bf16; got ",
                 DTypeName(queries.dtype), "."));
    }
    Rotate(queries, false, 1.0f, q_scratch_, queries_out);
    Rotate(keys, emulate && keys_, s.k_scale, k_scratch_, keys_out);
  } else if (emulate && keys_) {
    if (k_scratch_.size() < keys.byte_size()) k_scratch_.resize(keys.byte_size());
    FakeQuantizeSpan(keys.dtype, keys.data, fp8_, s.k_scale, static_cast<size_t>(keys.numel()),
                     k_scratch_.data(), codes_, decoded_);
    keys_out.data = k_scratch_.data();
  }
  if (emulate && values_) {
    if (v_scratch_.size() < values.byte_size()) v_scratch_.resize(values.byte_size());
    FakeQuantizeSpan(values.dtype, values.data, fp8_, s.v_scale,
                     static_cast<size_t>(values.numel()), v_scratch_.data(), codes_, decoded_);
    values_out.data = v_scratch_.data();
  }
}

void FakeQuantBackend::Run(const TensorView& queries, const TensorView& keys,
                           const TensorView& values, const TensorView& kv_cache,
                           const AttentionMetadata& metadata, const AttentionOptions& options,
                           const TensorView& output) {
  TensorView q, k, v;
  Prepare(queries, keys, values, options, q, k, v);
  inner_.Run(q, k, v, kv_cache, metadata, options, output);
}

void FakeQuantBackend::RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                                    const TensorView& keys, const TensorView& values,
                                    const TensorView& kv_cache, const AttentionMetadata& metadata,
                                    const AttentionOptions& options, const TensorView& output) {
  TensorView q, k, v;
  Prepare(queries, keys, values, options, q, k, v);
  inner_.RunWithPlans(plans, q, k, v, kv_cache, metadata, options, output);
}

}  // namespace rpa
