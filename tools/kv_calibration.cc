#include "tools/kv_calibration.h"

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "layers/kv_cache_config.h"
#include "numerics/dtype.h"
#include "util/error.h"

namespace rpa::cli {

std::vector<std::vector<int32_t>> CalibrationChunks(std::span<const int32_t> text,
                                                    const KvCalibrationOptions& options) {
  const int32_t ctx = options.ctx;
  if (ctx < 2) throw InvalidArgument(Concat("--ctx ", ctx, " must be >= 2"));
  if (options.max_tokens < ctx) {
    throw InvalidArgument(
        Concat("--max-tokens ", options.max_tokens, " is less than one chunk (--ctx ", ctx, ")"));
  }
  const int64_t n =
      std::min<int64_t>(static_cast<int64_t>(text.size()) / ctx, options.max_tokens / ctx);
  if (n < 1) {
    throw InvalidArgument(
        Concat("the calibration text has ", text.size(), " tokens, fewer than one chunk of ", ctx));
  }
  std::vector<std::vector<int32_t>> chunks;
  for (int64_t c = 0; c < n; ++c) {
    chunks.emplace_back(text.begin() + c * ctx, text.begin() + (c + 1) * ctx);
    if (options.bos_token >= 0) chunks.back()[0] = options.bos_token;
  }
  return chunks;
}

void ObserveKvAmax(CausalLm& model, KvAmaxBackend& observer,
                   const std::vector<std::vector<int32_t>>& chunks,
                   const std::function<void(int32_t, int32_t)>& progress) {
  const ModelInfo& info = model.info();
  const int32_t layers = info.num_layers;
  if (static_cast<int32_t>(observer.layers().size()) != layers) {
    throw InvalidArgument(Concat("the observer tracks ", observer.layers().size(),
                                 " layers; the model has ", layers));
  }
  size_t longest = 0;
  for (const auto& c : chunks) longest = std::max(longest, c.size());
  // An f32 ("auto") cache: the observer sees the projections themselves, unrounded.
  const KvCacheConfig kv = KvCacheConfig::Parse("auto", DType::kFloat32, layers);
  EngineConfig config;
  config.max_num_seqs = 1;
  config.max_num_batched_tokens = static_cast<int32_t>(longest);  // one prefill per chunk
  config.warmup = false;  // warmup batches would be observed as if they were text
  const uint64_t bytes_per_token =
      2ull * info.num_kv_heads * info.head_dim * sizeof(float) * layers;
  config.kv_cache_bytes = bytes_per_token * (longest + 4ull * config.page_size);
  Engine engine(model, kv, config);
  observer.Reset();
  SamplingParams params;
  params.max_tokens = 1;  // the prefill is the point; one token ends the request
  const int32_t total = static_cast<int32_t>(chunks.size());
  for (int32_t c = 0; c < total; ++c) {
    engine.AddRequest(chunks[c], params);
    engine.RunUntilDone();
    // Layer attribution holds iff every forward pass called every layer once.
    if (observer.calls() != engine.stats().steps * layers) {
      throw InvalidArgument(Concat("attention backend saw ", observer.calls(), " calls in ",
                                   engine.stats().steps, " forward passes of ", layers,
                                   " layers: cannot attribute them to layers"));
    }
    if (progress) progress(c + 1, total);
  }
  for (int32_t l = 0; l < layers; ++l) {
    const LayerKvAmax& a = observer.layers()[l];
    if (!std::isfinite(a.k_max()) || !std::isfinite(a.v_max())) {
      throw InvalidArgument(
          Concat("layer ", l, " produced non-finite K/V (amax ", a.k_max(), " / ", a.v_max(), ")"));
    }
  }
}

KvScalesFile MakeKvScalesFile(const KvAmaxBackend& observer, const ModelInfo& info,
                              const std::string& kv_cache_dtype) {
  const DType dtype = ParseKvCacheDtype(kv_cache_dtype, DType::kFloat32);
  KvScalesFile file;
  file.kv_cache_dtype = kv_cache_dtype;
  for (size_t l = 0; l < observer.layers().size(); ++l) {
    const LayerKvAmax& a = observer.layers()[l];
    KvScalesLayer x;
    x.k_amax = a.k_max();
    x.v_amax = a.v_max();
    x.k_amax_per_head = a.k;
    x.v_amax_per_head = a.v;
    if (l < info.kv_donor.size() && info.kv_donor[l] >= 0) x.kv_donor = info.kv_donor[l];
    file.layers.push_back(std::move(x));
  }
  ComputeKvScales(dtype, file);
  return file;
}

}  // namespace rpa::cli
