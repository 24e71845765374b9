// KvAmaxBackend: an AttentionBackend wrapper that records, per layer and per KV head, the
// largest |K| and |V| it is handed, then forwards the call unchanged to the real backend.
// It is how `rpa calibrate` observes exactly what the serving path quantizes: the keys and
// values an attention layer dispatches are its projections after QK-norm and RoPE, in the
// cache dtype (run it over an "auto" cache, so they are unquantized f32).
//
// Layer attribution: Decoder::Forward calls its attention layers in order 0..L-1, each once
// per step, each layer's ForwardServe making exactly one backend call; so the n-th call since
// construction (or Reset) belongs to layer n % L. Only rows before cu_q_lens[num_seqs] are
// scheduled tokens; rows past it (padding) are ignored.
//
// Thread safety: as the attention layers that call it, one caller at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "layers/attention_backend.h"

namespace rpa {

struct LayerKvAmax {
  std::vector<float> k;    // [Hkv] max |K| per kv head (0 until seen)
  std::vector<float> v;    // [Hkv]
  int64_t tokens = 0;      // scheduled tokens observed
  bool kv_shared = false;  // seen with update_kv_cache=false (reads a donor's cache)

  float k_max() const;  // over heads
  float v_max() const;
};

class KvAmaxBackend final : public AttentionBackend {
 public:
  // `inner` must outlive this. Throws InvalidArgument unless num_layers > 0.
  KvAmaxBackend(AttentionBackend& inner, int num_layers);

  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override;
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries, const TensorView& keys,
                    const TensorView& values, const TensorView& kv_cache,
                    const AttentionMetadata& metadata, const AttentionOptions& options,
                    const TensorView& output) override;

  // [num_layers]. A NaN in the input makes that head's amax NaN (so calibration fails
  // loudly instead of silently ignoring it).
  const std::vector<LayerKvAmax>& layers() const { return layers_; }
  int64_t calls() const { return calls_; }
  // Forgets every observation and restarts the layer count at 0.
  void Reset();

 private:
  void Observe(const TensorView& keys, const TensorView& values, const AttentionMetadata& metadata,
               const AttentionOptions& options);

  AttentionBackend& inner_;
  std::vector<LayerKvAmax> layers_;
  int64_t calls_ = 0;
  std::vector<float> row_;  // one token's [Hkv, D] as f32
};

}  // namespace rpa
