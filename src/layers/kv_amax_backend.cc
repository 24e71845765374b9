#include "layers/kv_amax_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {
namespace {

float MaxOf(const std::vector<float>& v) {
  float m = 0.0f;
  for (const float x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, x);
  }
  return m;
}

// The number of scheduled tokens: cu_q_lens[num_seqs], clamped to the tensor's rows (the
// kernel validates the metadata itself; this only must not read out of range).
int64_t ScheduledRows(const AttentionMetadata& metadata, int64_t rows) {
  if (metadata.distribution.size() < 3) return rows;
  const int64_t seqs = metadata.distribution[2];
  if (seqs < 0 || seqs >= static_cast<int64_t>(metadata.cu_q_lens.size())) return rows;
  return std::clamp<int64_t>(metadata.cu_q_lens[seqs], 0, rows);
}

}  // namespace

float LayerKvAmax::k_max() const { return MaxOf(k); }
float LayerKvAmax::v_max() const { return MaxOf(v); }

KvAmaxBackend::KvAmaxBackend(AttentionBackend& inner, int num_layers) : inner_(inner) {
  if (num_layers <= 0) throw InvalidArgument(Concat("num_layers=", num_layers, " must be > 0."));
  layers_.resize(num_layers);
}

void KvAmaxBackend::Reset() {
  for (LayerKvAmax& l : layers_) l = LayerKvAmax{};
  calls_ = 0;
}

void KvAmaxBackend::Observe(const TensorView& keys, const TensorView& values,
                            const AttentionMetadata& metadata, const AttentionOptions& options) {
  LayerKvAmax& layer = layers_[calls_ % static_cast<int64_t>(layers_.size())];
  ++calls_;
  if (keys.rank != 3 || values.rank != 3 || keys.shape != values.shape || !keys.is_contiguous() ||
      !values.is_contiguous()) {
    throw InvalidArgument(
        Concat("KvAmaxBackend: expected contiguous keys/values of one shape "
               "(T, Hkv, D); got ",
               keys.shape_str(), " and ", values.shape_str(), "."));
  }
  const int64_t heads = keys.shape[1], d = keys.shape[2];
  if (layer.k.empty()) {
    layer.k.assign(heads, 0.0f);
    layer.v.assign(heads, 0.0f);
  }
  if (static_cast<int64_t>(layer.k.size()) != heads) {
    throw InvalidArgument(Concat("KvAmaxBackend: layer has ", layer.k.size(),
                                 " kv heads before and ", heads, " now."));
  }
  if (!options.update_kv_cache) layer.kv_shared = true;
  const int64_t rows = ScheduledRows(metadata, keys.shape[0]);
  layer.tokens += rows;
  row_.resize(heads * d);
  auto observe = [&](const TensorView& t, std::vector<float>& amax) {
    const size_t elem = DTypeSize(t.dtype);
    for (int64_t r = 0; r < rows; ++r) {
      const auto* src = static_cast<const uint8_t*>(t.data) + r * heads * d * elem;
      Convert(t.dtype, src, DType::kFloat32, row_.data(), heads * d);
      for (int64_t h = 0; h < heads; ++h) {
        float m = amax[h];
        for (int64_t i = 0; i < d; ++i) {
          const float a = std::fabs(row_[h * d + i]);
          // NaN sticks: once a head saw one, its amax stays NaN.
          if (std::isnan(a) || std::isnan(m)) {
            m = std::numeric_limits<float>::quiet_NaN();
          } else if (a > m) {
            m = a;
          }
        }
        amax[h] = m;
      }
    }
  };
  observe(keys, layer.k);
  observe(values, layer.v);
}

void KvAmaxBackend::Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                        const TensorView& kv_cache, const AttentionMetadata& metadata,
                        const AttentionOptions& options, const TensorView& output) {
  Observe(keys, values, metadata, options);
  inner_.Run(queries, keys, values, kv_cache, metadata, options, output);
}

void KvAmaxBackend::RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                                 const TensorView& keys, const TensorView& values,
                                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                                 const AttentionOptions& options, const TensorView& output) {
  Observe(keys, values, metadata, options);
  inner_.RunWithPlans(plans, queries, keys, values, kv_cache, metadata, options, output);
}

}  // namespace rpa
