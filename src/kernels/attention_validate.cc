#include "kernels/attention_validate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace rpa {
namespace {

// Python's repr() of a float: shortest round-trip digits, always with a '.' or exponent.
std::string PyFloat(double x) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), x);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // "n": nan / inf
  return s;
}

std::string ShapeText(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  size_t i = 0;
  for (int64_t d : dims) {
    if (i++) s += ", ";
    s += std::to_string(d);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

std::string SpanShape(size_t n) { return ShapeText({static_cast<int64_t>(n)}); }

std::string_view Name(DType t) { return DTypeName(t); }

bool IsCacheDType(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || IsFp8(t);
}

void ValidateStructure(const TensorView& queries, const TensorView& keys,
                       const TensorView& values, const TensorView& kv_cache,
                       const TensorView& output) {
  if (queries.dtype != DType::kFloat32 && queries.dtype != DType::kBFloat16) {
    throw InvalidArgument(
        Concat("Expected q.dtype=", Name(queries.dtype), " to be float32 or bfloat16."));
  }
  if (output.rank != 3 || output.shape[0] != queries.shape[0] ||
      output.shape[1] != queries.shape[1] || output.shape[2] != queries.shape[2]) {
    throw InvalidArgument(Concat("Expected output.shape=", output.shape_str(),
                                 " to be equal to q.shape=", queries.shape_str()));
  }
  if (output.dtype != queries.dtype) {
    throw InvalidArgument(Concat("Expected output.dtype=", Name(output.dtype),
                                 " to be equal to q.dtype=", Name(queries.dtype)));
  }
  const struct {
    const char* name;
    const TensorView* view;
  } rows[] = {{"q", &queries}, {"k", &keys}, {"v", &values}, {"output", &output}};
  for (const auto& r : rows) {
    if (r.view->shape[2] > 1 && r.view->strides[2] != 1) {
      throw InvalidArgument(Concat("Expected ", r.name, " to have unit stride along head_dim, got ",
                                   r.name, ".strides[2]=", r.view->strides[2]));
    }
    if (r.view->numel() > 0 && r.view->data == nullptr) {
      throw InvalidArgument(Concat("Expected ", r.name, " to have data, got a null pointer"));
    }
  }
  if (!kv_cache.is_contiguous()) {
    throw InvalidArgument("Expected kv_cache to be contiguous (row-major, no padding).");
  }
  if (kv_cache.numel() > 0 && kv_cache.data == nullptr) {
    throw InvalidArgument("Expected kv_cache to have data, got a null pointer");
  }
}

}  // namespace

void CheckMetadataArrays(const MetadataArrayInfo& kv_lens, const MetadataArrayInfo& page_indices,
                         const MetadataArrayInfo& cu_q_lens,
                         const MetadataArrayInfo& distribution) {
  if (kv_lens.dtype != "int32" || page_indices.dtype != "int32" || cu_q_lens.dtype != "int32" ||
      distribution.dtype != "int32") {
    throw InvalidArgument(Concat("Expected int32 dtype for kv_lens.dtype=", kv_lens.dtype,
                                 ", page_indices.dtype=", page_indices.dtype,
                                 ", cu_q_lens.dtype=", cu_q_lens.dtype,
                                 ", distribution.dtype=", distribution.dtype));
  }
  if (kv_lens.rank != 1 || page_indices.rank != 1 || cu_q_lens.rank != 1) {
    throw InvalidArgument(Concat("Expected 1D array for kv_lens.shape=", kv_lens.shape,
                                 ", page_indices.shape=", page_indices.shape,
                                 ", cu_q_lens.shape=", cu_q_lens.shape));
  }
}

void ValidateAttentionInputs(const TensorView& queries, const TensorView& keys,
                             const TensorView& values, const TensorView& kv_cache,
                             const AttentionMetadata& metadata, const AttentionOptions& options,
                             const TensorView& output) {
  const TensorView& q = queries;
  const TensorView& k = keys;
  const TensorView& v = values;
  // (1) does not apply: rpa has no skip_kv_mask option.
  if (q.rank != 3 || k.rank != 3 || v.rank != 3) {  // (2)
    throw InvalidArgument(Concat("Expected 3D array for q.shape=", q.shape_str(),
                                 ", k.shape=", k.shape_str(), ", v.shape=", v.shape_str()));
  }
  if (k.shape != v.shape) {  // (3)
    throw InvalidArgument(
        Concat("Expected k.shape=", k.shape_str(), " to be equal to v.shape=", v.shape_str()));
  }
  if (q.shape[0] != k.shape[0] || q.shape[0] != v.shape[0]) {  // (4)
    throw InvalidArgument(Concat("Expected q.shape[0]=", q.shape[0],
                                 " to be equal to k.shape[0]=", k.shape[0],
                                 " and v.shape[0]=", v.shape[0]));
  }
  if (q.shape[2] != k.shape[2] || q.shape[2] != v.shape[2]) {  // (5)
    throw InvalidArgument(Concat("Expected q.shape[2]=", q.shape[2],
                                 " to be equal to k.shape[2]=", k.shape[2],
                                 " and v.shape[2]=", v.shape[2]));
  }
  const int64_t num_q_heads = q.shape[1];
  const int64_t num_kv_heads = k.shape[1];
  const int64_t head_dim = q.shape[2];
  if (num_kv_heads <= 0 || num_q_heads <= 0 || num_q_heads % num_kv_heads != 0) {  // (6)
    throw InvalidArgument(Concat("Expected actual_num_q_heads=", num_q_heads,
                                 " to be divisible by actual_num_kv_heads=", num_kv_heads, "."));
  }
  if (head_dim <= 0) {
    throw InvalidArgument(Concat("Expected head_dim=q.shape[2]=", head_dim, " to be positive."));
  }
  // (7) [NP, PS, 2 * Hkv, D]; NP and PS are whatever the cache has, but both must be >= 1.
  const int64_t num_pages = kv_cache.rank == 4 ? kv_cache.shape[0] : 0;
  const int64_t page_size = kv_cache.rank == 4 ? kv_cache.shape[1] : 0;
  if (kv_cache.rank != 4 || num_pages < 1 || page_size < 1 ||
      kv_cache.shape[2] != 2 * num_kv_heads || kv_cache.shape[3] != head_dim) {
    throw InvalidArgument(Concat(
        "Expected kv_cache.shape=", kv_cache.shape_str(), " to be equal to expected_kv_cache_shape=",
        ShapeText({std::max<int64_t>(num_pages, 1), std::max<int64_t>(page_size, 1),
                   2 * num_kv_heads, head_dim})));
  }
  if (kv_cache.dtype != k.dtype || kv_cache.dtype != v.dtype) {  // (8)
    throw InvalidArgument(Concat("Expected kv_cache.dtype=", Name(kv_cache.dtype),
                                 " to be equal to k.dtype=", Name(k.dtype),
                                 " and v.dtype=", Name(v.dtype), "."));
  }
  // (9): every DType is a float; rpa's kernel takes four of them.
  if (!IsCacheDType(kv_cache.dtype)) {
    throw InvalidArgument(Concat("Expected kv_cache.dtype=", Name(kv_cache.dtype),
                                 " to be one of float32, bfloat16, float8_e4m3fn, float8_e5m2."));
  }
  // (10), (11): spans are int32 and 1-D by construction (see CheckMetadataArrays).
  const size_t max_num_seqs = metadata.kv_lens.size();
  if (max_num_seqs == 0 || metadata.page_indices.size() % max_num_seqs != 0) {  // (12)
    throw InvalidArgument(Concat("Expected num_page_indices=", metadata.page_indices.size(),
                                 " to be divisible by max_num_seqs=", max_num_seqs, "."));
  }
  if (metadata.cu_q_lens.size() != max_num_seqs + 1) {  // (13)
    throw InvalidArgument(Concat("Expected cu_q_lens.shape=", SpanShape(metadata.cu_q_lens.size()),
                                 " to be ", SpanShape(max_num_seqs + 1), "."));
  }
  if (metadata.distribution.size() != 3) {  // (14)
    throw InvalidArgument(Concat("Expected distribution.shape=",
                                 SpanShape(metadata.distribution.size()), " to be (3,)."));
  }
  if (options.sliding_window && *options.sliding_window <= 0) {  // (15)
    throw InvalidArgument(
        Concat("sliding_window=", *options.sliding_window, " must be positive."));
  }
  if (options.soft_cap && *options.soft_cap == 0.0f) {  // (16)
    throw InvalidArgument(Concat("soft_cap=", PyFloat(*options.soft_cap), " must not be 0.0."));
  }
  if (options.sinks) {  // (17)
    const TensorView& s = *options.sinks;
    const int64_t n = s.rank >= 1 ? s.shape[0] : 0;
    if (s.rank != 1 || n != num_q_heads || s.dtype != DType::kFloat32 ||
        (n > 1 && s.strides[0] != 1) || s.data == nullptr) {
      throw InvalidArgument(Concat("Expected attention_sink.shape[0]=", n,
                                   " to be equal to q.shape[1]=", num_q_heads,
                                   " (num_q_heads)."));
    }
  }
  const struct {
    const char* name;
    const std::optional<float>& value;
  } scales[] = {{"q_scale", options.q_scale},
                {"k_scale", options.k_scale},
                {"v_scale", options.v_scale}};
  for (const auto& s : scales) {
    if (s.value && !(std::isfinite(*s.value) && *s.value > 0.0f)) {
      throw InvalidArgument(
          Concat(s.name, "=", PyFloat(*s.value), " must be finite and positive."));
    }
  }
  ValidateStructure(queries, keys, values, kv_cache, output);
}

void ValidateAttentionMetadata(const AttentionMetadata& md, int64_t num_tokens, int64_t page_size,
                               int64_t num_pages) {
  const int64_t max_num_seqs = static_cast<int64_t>(md.kv_lens.size());
  const int64_t pages_per_seq = static_cast<int64_t>(md.page_indices.size()) / max_num_seqs;
  const int32_t d0 = md.distribution[0], d1 = md.distribution[1], d2 = md.distribution[2];
  if (!(0 <= d0 && d0 <= d1 && d1 <= d2)) {
    throw InvalidArgument(Concat("Invalid distribution: distribution=[", d0, ", ", d1, ", ", d2,
                                 "]"));
  }
  if (d2 > max_num_seqs) {
    throw InvalidArgument(
        Concat("num_seqs=", d2, " must be <= max_num_seqs=", max_num_seqs));
  }
  if (md.cu_q_lens[0] < 0) {
    throw InvalidArgument(Concat("Require cu_q_lens[0]=", md.cu_q_lens[0], " >= 0."));
  }
  if (md.cu_q_lens[d2] > num_tokens) {
    throw InvalidArgument(Concat("Total q tokens ", md.cu_q_lens[d2],
                                 " must be <= max_num_tokens=", num_tokens, "."));
  }
  for (int32_t i = 0; i < d2; ++i) {
    // int64: a garbage cu_q_lens could make the int32 difference overflow.
    const int64_t q_len = static_cast<int64_t>(md.cu_q_lens[i + 1]) - md.cu_q_lens[i];
    const int64_t kv_len = md.kv_lens[i];
    if (!(0 < q_len && q_len <= kv_len)) {
      throw InvalidArgument(Concat("Require 0 < q_len=", q_len, " <= kv_len=", kv_len,
                                   " at sequence ", i, "."));
    }
    const int64_t page_cnt = (kv_len + page_size - 1) / page_size;
    if (page_cnt > pages_per_seq) {
      throw InvalidArgument(Concat("Require page_cnt=", page_cnt, " <= pages_per_seq=",
                                   pages_per_seq, " at sequence ", i, " where kv_len=", kv_len,
                                   " and page_size=", page_size, "."));
    }
    for (int64_t p = 0; p < page_cnt; ++p) {
      const int32_t page_idx = md.page_indices[i * pages_per_seq + p];
      if (!(0 <= page_idx && page_idx < num_pages)) {
        throw InvalidArgument(Concat("Require 0 <= page_idx=", page_idx,
                                     " < total_num_pages=", num_pages, " at sequence ", i,
                                     " where kv_len=", kv_len, " and page_size=", page_size,
                                     "."));
      }
    }
  }
}

}  // namespace rpa
