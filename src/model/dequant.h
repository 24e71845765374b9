// Dequantization of GGUF weights to f32: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K.
//
// Block layouts are ggml's (../shared/docs/MODELS.md §3). Results are bit-identical to
// ggml's reference dequantizers and to the PyPI `gguf` package's numpy ones (tests/model
// checks this on random blocks and on the real models). Why exactness is easy to keep: a
// scale is an f16 (11-bit significand), so scale·q for q of at most 8 bits and the 6-bit
// K-quant sub-scales are exact in f32 — only the final add/subtract rounds, and a fused
// multiply-add gives the same result. The one order-sensitive spot is Q6_K, whose 8-bit
// sub-scale times d (19 bits) times a 6-bit q can exceed 24 bits: it must be (d·sc)·q, the
// references' association, not d·(sc·q).
//
// Scalar code: these run once per weight at load time (or per row in a dequantizing matmul
// that does its own SIMD); correctness first.
#pragma once

#include <cstdint>
#include <vector>

#include "model/ggml_type.h"
#include "model/gguf.h"
#include "numerics/dtype.h"

namespace rpa {

// True iff DequantizeRow supports `type`.
bool IsDequantizable(GgmlType type);

// Decodes `n` consecutive values stored as `type` at `src` into dst[0..n).
// Throws rpa::InvalidArgument when `type` is not dequantizable or `n` is negative or not a
// multiple of the type's block size. REQUIRES: src holds n / block_size * type_size bytes.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// As DequantizeRow, but stores dtype `to`: each f32 value rounded once, to nearest even
// (numerics/convert.h, non-saturating), e.g. to bfloat16 weights for a bf16 GEMM.
// dst holds n elements of `to`.
void DequantizeRowTo(GgmlType type, const void* src, DType to, void* dst, int64_t n);

// The whole tensor as f32, row-major: [num_rows, row_length].
std::vector<float> DequantizeTensor(const GgufTensorInfo& tensor);

}  // namespace rpa
