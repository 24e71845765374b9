// quantize_kv: the one shared helper that turns new K/V rows into the KV cache's dtype
// (../shared/docs/rpa-contract.md §4). Every serving path calls it before dispatching to
// ragged_paged_attention; nothing else in rpa quantizes K/V.
//
//   out = cast_to_cache_dtype(clip(x / scale, -max, +max))
//
// Division in f32 by the f32 scale, clip to the finite range of the cache dtype (e4m3fn
// 448, e5m2 57344), then one round-to-nearest-even cast. NaN stays NaN, +-inf becomes
// +-max, so finite input never yields NaN/Inf.
#pragma once

#include <cstddef>

#include "numerics/dtype.h"
#include "numerics/tensor_view.h"

namespace rpa {

// Quantizes `n` contiguous elements of dtype `src_dtype` into `dst_dtype` (1-byte float).
// REQUIRES: IsFp8(dst_dtype); scale finite and > 0 (else InvalidArgument).
void QuantizeSpan(DType src_dtype, const void* src, DType dst_dtype, void* dst, size_t n,
                  float scale);

// key, value: [T, Hkv, D] (any float dtype, contiguous);
// key_out, value_out: same shape, dtype cache_dtype, contiguous, caller-allocated.
// Throws InvalidArgument when cache_dtype is not fp8, shapes differ, or a scale is not
// finite and > 0.
void QuantizeKv(DType cache_dtype, const TensorView& key, const TensorView& value, float k_scale,
                float v_scale, const TensorView& key_out, const TensorView& value_out);

}  // namespace rpa
