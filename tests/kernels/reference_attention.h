// The float64 reference of ragged paged attention (../shared/docs/rpa-contract.md §2).
//
// Independent of the fast kernel: scalar loops in double precision that gather K/V through
// the page table and follow the contract's pseudo-code line by line (write the new K/V,
// then read the cache). The only code it shares with rpa is the scalar codecs of
// numerics/scalar_codec.h, which are tested exhaustively on their own.
//
// Besides the output it returns the magnitudes that the test tolerance is derived from
// (see AttentionErrorBound in rpa_cases.h), so a tolerance is computed per element instead
// of being one loose constant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ragged_paged_attention.h"
#include "numerics/tensor_view.h"

namespace rpa::testing {

struct ReferenceResult {
  // [T, Hq, D] attention output in float64, before any cast to the output dtype. Rows at
  // or past cu_q_lens[d2] (padding) are NaN.
  std::vector<double> output;
  // [T, Hq] the largest |logit| the kernel may see before the soft cap, bounded by the
  // absolute dot product: max over visible t of |sm_scale*k_scale*q_scale| * sum_i |q_i K_ti|.
  std::vector<double> logit_abs_bound;
  // [T, Hq, D] |v_scale| * sum_t w_t |V_td|: the scale of the error of the weighted sum.
  std::vector<double> value_abs_sum;
  // [T] number of cache positions each row attends to (its softmax length, sinks excluded).
  std::vector<int64_t> num_visible;
  // Bytes of the whole kv_cache after this step: the input cache with the new K/V written
  // (unless update_kv_cache is false).
  std::vector<uint8_t> kv_cache;
};

// REQUIRES: contiguous views with valid shapes/dtypes and metadata that passes every check
// of contract §3 (the reference does not validate; it RPA_CHECKs its own indexing).
// Does not modify any input.
ReferenceResult ReferenceRaggedPagedAttention(const TensorView& queries, const TensorView& keys,
                                              const TensorView& values, const TensorView& kv_cache,
                                              const AttentionMetadata& metadata,
                                              const AttentionOptions& options);

// Decodes one element of a float dtype to double, exactly (NaN stays NaN).
double DecodeToDouble(DType dtype, const void* element);

}  // namespace rpa::testing
