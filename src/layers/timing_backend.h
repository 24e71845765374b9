// TimingBackend: an AttentionBackend decorator that forwards every call to another backend
// and adds up the wall time spent inside it, so a benchmark can split a model step's time
// into attention (the kernel call: cache write + attention over the context) and the rest
// (projections, quantize_kv, RoPE, norms, MLP, lm_head).
//
//   KernelBackend kernel;
//   TimingBackend timed(kernel);
//   Decoder decoder(config, weights, &timed);
//   ... decoder.Forward(...) ...; timed.seconds()  // attention's share of that step
//
// Thread safety: one caller at a time, like the layers that call it.
#pragma once

#include <chrono>
#include <cstdint>

#include "layers/attention_backend.h"

namespace rpa {

class TimingBackend final : public AttentionBackend {
 public:
  // `inner` (not owned) must outlive this.
  explicit TimingBackend(AttentionBackend& inner) : inner_(inner) {}

  // Forwards to inner.Run(); the call's wall time is counted even if it throws.
  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override;
  // Forwards to inner.RunWithPlans() with the same plan cache, so timing does not change
  // what the inner backend does (plan once per step).
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries, const TensorView& keys,
                    const TensorView& values, const TensorView& kv_cache,
                    const AttentionMetadata& metadata, const AttentionOptions& options,
                    const TensorView& output) override;

  // Seconds spent inside the inner backend since construction or the last Reset().
  double seconds() const { return std::chrono::duration<double>(total_).count(); }
  // Calls forwarded since construction or the last Reset().
  int64_t calls() const { return calls_; }
  void Reset() {
    total_ = {};
    calls_ = 0;
  }

 private:
  AttentionBackend& inner_;
  std::chrono::steady_clock::duration total_{};
  int64_t calls_ = 0;
};

}  // namespace rpa
