// Validation of ragged_paged_attention's inputs: every check of the contract's §3
// (../shared/docs/rpa-contract.md), with its messages, in one place. The entry points in
// ragged_paged_attention.h / attention_plan.h call these; so does the Python binding for the
// checks that only exist at its level (metadata dtypes and ranks, items 10 and 11).
// Every function throws rpa::InvalidArgument on the first failed check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/ragged_paged_attention.h"
#include "numerics/tensor_view.h"

namespace rpa {

// One metadata array as the binding sees it: its dtype name (numpy spelling) and shape.
struct MetadataArrayInfo {
  std::string_view dtype;  // e.g. "int32", "int64"
  std::string shape;       // numpy shape text, e.g. "(4,)" or "(2, 3)"
  int rank = 1;
};

// §3 items 10 and 11: all four arrays are int32 and kv_lens, page_indices, cu_q_lens are
// 1-D (distribution's shape is item 14, checked by ValidateAttentionInputs).
void CheckMetadataArrays(const MetadataArrayInfo& kv_lens, const MetadataArrayInfo& page_indices,
                         const MetadataArrayInfo& cu_q_lens, const MetadataArrayInfo& distribution);

// Static checks (§3 items 2-9 and 12-17) plus rpa's own: query dtype f32/bf16, output of
// the queries' shape and dtype, unit stride along head_dim, a contiguous cache.
void ValidateAttentionInputs(const TensorView& queries, const TensorView& keys,
                             const TensorView& values, const TensorView& kv_cache,
                             const AttentionMetadata& metadata, const AttentionOptions& options,
                             const TensorView& output);

// Dynamic checks of the metadata values (§3, "Dynamic"), run at every call. After they pass,
// every sequence i < distribution[2] owns rows inside [0, num_tokens) and reads only pages
// inside [0, num_pages). REQUIRES: the static checks passed (array lengths are consistent).
void ValidateAttentionMetadata(const AttentionMetadata& metadata, int64_t num_tokens,
                               int64_t page_size, int64_t num_pages);

}  // namespace rpa
