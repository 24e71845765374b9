// FakeQuantBackend: an AttentionBackend wrapper that emulates an fp8 KV cache on selected
// layers, for K and/or V separately, over an f32 or bf16 cache: before forwarding, each
// selected tensor x becomes
//
//   x' = Decode(QuantizeKv(x, scale)) * scale      (fp8 codes by the shared quantize_kv,
//                                                   decoded to f32, times the f32 scale,
//                                                   then cast to the cache dtype)
//
// so the kernel stores and reads x' where the real path would store the code and dequantize.
// It answers "which layers, K or V, are sensitive to fp8" (rpa kv-sensitivity) without a
// mixed-dtype cache.
//
// How it relates to the real fp8 path (tests/calibrate/test_fake_quant_backend.cc):
// * Codes. Over an f32 cache the wrapper quantizes the same f32 projections the real path
//   quantizes: identical codes. Over a bf16 cache it receives K/V already rounded to bf16
//   (the layer casts before dispatch), so a value within half a bf16 ulp of an fp8 rounding
//   tie can round the other way (double rounding): codes differ by one fp8 step there (for
//   ~1/32 of the values with e4m3fn, ~1/64 with e5m2), as if the activations had been bf16.
//   With bf16 activations the codes are identical.
// * Dequantized values. code * scale has at most 4 significant bits (e4m3fn; 3 for e5m2)
//   times the scale's; for a power-of-two scale (1.0 included) it is exact in bf16 and f32.
//   Otherwise the product is rounded to f32 (rel. error <= 2^-24) and, over a bf16 cache,
//   then to bf16 (<= 2^-9).
// * The kernel. Over fp8 it folds the scales instead (q * (sm_scale * k_scale), output *
//   v_scale; its extra decode factors are powers of two), over f32/bf16 it multiplies the
//   stored x'. With power-of-two scales these are the same products scaled by powers of two,
//   so an f32-cache emulation of every layer is bit-identical to the fp8-cache run; with
//   other scales the two differ only by those f32 roundings (a few 2^-24 relative per logit).
// * KV-shared layers (update_kv_cache=false) read their donor's cache: what is stored there
//   is decided by the donor's selection; selecting a shared layer changes nothing.
//
// Layer attribution as KvAmaxBackend: the n-th call belongs to layer n % num_layers.
//
// rotate_qk (an experiment, src/layers/hadamard.h): on *every* layer, selected or not, each
// query and key head is rotated by the normalized Walsh-Hadamard matrix before K is
// emulated, as the serving path's AttentionConfig::rotate_qk does after RoPE. Logits are
// unchanged in exact arithmetic; what changes is which values fp8 rounds. The rotation
// works in f32 from the K the layer dispatched (already in the cache dtype): over a bf16
// cache the rotated K is rounded to bf16 once more, so a rotation-only run (no layer
// selected) measures that extra rounding. V is not rotated.
#pragma once

#include <cstdint>
#include <vector>

#include "layers/attention_backend.h"
#include "layers/kv_cache_config.h"
#include "numerics/dtype.h"

namespace rpa {

class FakeQuantBackend final : public AttentionBackend {
 public:
  // fp8: the emulated cache dtype. layers: [num_layers], true = emulate on that layer.
  // keys / values: which of K and V to emulate. scales: the per-layer k/v scales (its
  // dtype is ignored; only scales(l) is read, copied at construction). rotate_qk: see
  // above. `inner` must outlive this. Throws InvalidArgument unless IsFp8(fp8) and
  // layers.size() == scales.num_layers() > 0.
  FakeQuantBackend(AttentionBackend& inner, DType fp8, std::vector<bool> layers, bool keys,
                   bool values, const KvCacheConfig& scales, bool rotate_qk = false);

  // Each call: keys/values [T, Hkv, D] contiguous f32 or bf16 (the cache dtype; throws
  // InvalidArgument for an fp8 cache, which is already quantized, or when scales are set);
  // with rotate_qk, queries [T, Hq, D] contiguous f32 or bf16 and D a power of two.
  void Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
           const TensorView& kv_cache, const AttentionMetadata& metadata,
           const AttentionOptions& options, const TensorView& output) override;
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& queries, const TensorView& keys,
                    const TensorView& values, const TensorView& kv_cache,
                    const AttentionMetadata& metadata, const AttentionOptions& options,
                    const TensorView& output) override;

  // Restarts the layer count at 0 (e.g. after a forward pass that threw midway).
  void ResetLayerCount() { calls_ = 0; }
  int64_t calls() const { return calls_; }

 private:
  // The views to forward: the inputs, or scratch holding their rotation / emulation.
  void Prepare(const TensorView& queries, const TensorView& keys, const TensorView& values,
               const AttentionOptions& options, TensorView& queries_out, TensorView& keys_out,
               TensorView& values_out);
  // in [T, H, D] -> f32 rot_ rotated per head; fake-quantized with `scale` iff quantize;
  // then in in.dtype into `scratch`, which `out` points to.
  void Rotate(const TensorView& in, bool quantize, float scale, std::vector<uint8_t>& scratch,
              TensorView& out);

  AttentionBackend& inner_;
  DType fp8_;
  std::vector<bool> layers_;
  bool keys_, values_, rotate_qk_;
  std::vector<KvScales> scales_;  // [num_layers]
  int64_t calls_ = 0;
  std::vector<uint8_t> codes_;                  // [T*Hkv*D] fp8
  std::vector<float> decoded_;                  // [T*Hkv*D] f32
  std::vector<uint8_t> k_scratch_, v_scratch_;  // [T, Hkv, D] cache dtype
  std::vector<uint8_t> q_scratch_;              // [T, Hq, D] query dtype (rotate_qk)
  std::vector<float> rot_;                      // [T, H, D] f32 (rotate_qk)
};

// x' = Decode(Encode(x / scale)) * scale, elementwise, x and out in `dtype` (f32 or bf16),
// through QuantizeSpan and Convert (no rounding code of its own); `codes` and `decoded` are
// scratch of n elements. REQUIRES: IsFp8(fp8), scale finite and > 0.
void FakeQuantizeSpan(DType dtype, const void* x, DType fp8, float scale, size_t n, void* out,
                      std::vector<uint8_t>& codes, std::vector<float>& decoded);

}  // namespace rpa
