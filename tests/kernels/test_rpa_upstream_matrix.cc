// The upstream test matrix of ragged paged attention (contract §6), each case against the
// float64 reference over the dequantized cache with the derived bound of rpa_cases.cc
// (instead of upstream's 0.15-0.2), the cache compared bit-exactly, NaN in every slot no
// result may read. Parameter names say which case failed, e.g.
// QuantizedKv/RpaMatrix.MatchesReference/e4m3fn_kv_scale_0p5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "kernels/ragged_paged_attention.h"
#include "tests/kernels/rpa_cases.h"
#include "tests/kernels/rpa_check.h"
#include "util/error.h"

namespace rpa::testing {
namespace {

using ::testing::ValuesIn;

class RpaMatrix : public ::testing::TestWithParam<RpaCase> {};

TEST_P(RpaMatrix, MatchesReference) { ExpectKernelMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Basic, RpaMatrix, ValuesIn(BasicCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(QuantizedKv, RpaMatrix, ValuesIn(QuantizedKvCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(QuantizedAttention, RpaMatrix, ValuesIn(QuantizedAttentionCases()),
                         CaseName());
INSTANTIATE_TEST_SUITE_P(DecodeOnly, RpaMatrix, ValuesIn(DecodeOnlyCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(PrefillOnly, RpaMatrix, ValuesIn(PrefillOnlyCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Mixed, RpaMatrix, ValuesIn(MixedCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Complex, RpaMatrix, ValuesIn(ComplexCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(SlidingWindow, RpaMatrix, ValuesIn(SlidingWindowCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(SoftCap, RpaMatrix, ValuesIn(SoftCapCases()), CaseName());
INSTANTIATE_TEST_SUITE_P(Sinks, RpaMatrix, ValuesIn(SinksCases()), CaseName());

// KV share (update_kv_cache = false): the cache is read, never written; the input K/V are
// ignored, so two runs with different K/V give bit-identical, finite, nonzero outputs.
class RpaKvShare : public ::testing::TestWithParam<RpaCase> {};

TEST_P(RpaKvShare, IgnoresNewKvAndLeavesCacheUnchanged) {
  const RpaCase& spec = GetParam();
  ExpectKernelMatchesReference(spec);  // includes: cache equals the reference's (unchanged)

  RpaProblem p = MakeProblem(spec);
  const std::vector<uint8_t> cache_before = p.kv_cache;
  GuardedOutput first(spec.q_dtype, p.num_tokens, spec.num_q_heads, spec.head_dim);
  CallPublicEntryPoint(p, first.view());
  RefillNewKv(p, spec.seed + 12345);
  GuardedOutput second(spec.q_dtype, p.num_tokens, spec.num_q_heads, spec.head_dim);
  CallPublicEntryPoint(p, second.view());
  EXPECT_TRUE(p.kv_cache == cache_before) << "KV-share mode wrote the cache";

  const size_t row_bytes = spec.num_q_heads * spec.head_dim * DTypeSize(spec.q_dtype);
  const size_t n = p.num_scheduled_tokens() * row_bytes;
  EXPECT_EQ(std::memcmp(first.data(), second.data(), n), 0)
      << "output depends on the ignored input K/V";
  bool any_nonzero = false, all_finite = true;
  for (int64_t i = 0; i < p.num_scheduled_tokens() * spec.num_q_heads * spec.head_dim; ++i) {
    const double x = DecodeToDouble(
        spec.q_dtype, static_cast<const uint8_t*>(first.data()) + i * DTypeSize(spec.q_dtype));
    all_finite &= std::isfinite(x);
    any_nonzero |= x != 0;
  }
  EXPECT_TRUE(all_finite);
  EXPECT_TRUE(any_nonzero);
}

INSTANTIATE_TEST_SUITE_P(KvShare, RpaKvShare, ValuesIn(KvShareCases()), CaseName());

// ---- Validation (contract §3): every message, and a failed call changes nothing ----

// A valid call on a small problem, which each error case breaks in one way.
//   seqs (q, kv) = (1, 5) decode, (3, 20) prefill; S = 3 (one unused); PPS = 2; PS 16;
//   q [4, 4, 64] bf16, k/v [4, 2, 64] bf16, kv_cache [6, 16, 4, 64] bf16.
struct CallUnderTest {
  RpaProblem p;
  TensorView q, k, v, cache, out;
  std::vector<int32_t> kv_lens, page_indices, cu_q_lens, distribution;
  AttentionOptions options;
  std::vector<float> sinks;
  std::vector<uint8_t> out_bytes;

  CallUnderTest() : p(MakeProblem(BaseCase())) {
    q = p.queries_view();
    k = p.keys_view();
    v = p.values_view();
    cache = p.kv_cache_view();
    kv_lens = p.kv_lens;
    page_indices = p.page_indices;
    cu_q_lens = p.cu_q_lens;
    distribution = p.distribution;
    options = p.options();
    out_bytes.assign(p.queries.size(), 0xA5);
    out = TensorView::Contiguous(out_bytes.data(), DType::kBFloat16, {4, 4, 64});
  }
  static RpaCase BaseCase() {
    RpaCase c;
    c.name = "validation_base";
    c.seqs = {{1, 5}, {3, 20}};
    c.num_decode = 1;
    c.num_prefill = 1;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.extra_seqs = 1;
    return c;
  }
  // q and the output reshaped alike (the output must match q's shape, a check of its own).
  void ReshapeQuery(std::initializer_list<int64_t> shape) {
    q = TensorView::Contiguous(p.queries.data(), DType::kBFloat16, shape);
    out = TensorView::Contiguous(out_bytes.data(), DType::kBFloat16, shape);
  }
  void Run() {
    RaggedPagedAttention(q, k, v, cache,
                         AttentionMetadata{kv_lens, page_indices, cu_q_lens, distribution}, options,
                         out);
  }
};

struct ErrorCase {
  std::string name;
  std::function<void(CallUnderTest&)> mutate;
  std::string message;  // the whole message, or its beginning when prefix_only
  bool prefix_only = false;
};

void PrintTo(const ErrorCase& e, std::ostream* os) { *os << e.name; }

std::string PrintErrorCaseName(const ::testing::TestParamInfo<ErrorCase>& info) {
  return info.param.name;
}

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

std::vector<ErrorCase> ErrorCases() {
  using C = CallUnderTest&;
  return {
      // Static checks, in the contract's order.
      {"q_not_3d",
       [](C c) {
         c.ReshapeQuery({4, 256});
       },
       "Expected 3D array for q.shape=(4, 256), k.shape=(4, 2, 64), v.shape=(4, 2, 64)"},
      {"k_shape_differs_from_v",
       [](C c) {
         c.v = TensorView::Contiguous(c.p.values.data(), DType::kBFloat16, {4, 2, 32});
       },
       "Expected k.shape=(4, 2, 64) to be equal to v.shape=(4, 2, 32)"},
      {"token_counts_differ",
       [](C c) {
         c.ReshapeQuery({3, 4, 64});
       },
       "Expected q.shape[0]=3 to be equal to k.shape[0]=4 and v.shape[0]=4"},
      {"head_dims_differ",
       [](C c) {
         c.ReshapeQuery({4, 4, 32});
       },
       "Expected q.shape[2]=32 to be equal to k.shape[2]=64 and v.shape[2]=64"},
      {"q_heads_not_divisible",
       [](C c) {
         c.ReshapeQuery({4, 3, 64});
       },
       "Expected actual_num_q_heads=3 to be divisible by actual_num_kv_heads=2."},
      {"cache_shape_wrong_kv_heads",
       [](C c) {
         c.cache = TensorView::Contiguous(c.p.kv_cache.data(), DType::kBFloat16, {6, 16, 2, 64});
       },
       "Expected kv_cache.shape=(6, 16, 2, 64) to be equal to "
       "expected_kv_cache_shape=(6, 16, 4, 64)"},
      {"cache_shape_wrong_head_dim",
       [](C c) {
         c.cache = TensorView::Contiguous(c.p.kv_cache.data(), DType::kBFloat16, {6, 16, 4, 32});
       },
       "Expected kv_cache.shape=(6, 16, 4, 32) to be equal to "
       "expected_kv_cache_shape=(6, 16, 4, 64)"},
      // The serving-path bug: bf16 K/V handed to an fp8 cache.
      {"fp8_cache_with_bf16_kv", [](C c) { c.cache.dtype = DType::kFloat8E4M3FN; },
       "Expected kv_cache.dtype=float8_e4m3fn to be equal to k.dtype=bfloat16 and "
       "v.dtype=bfloat16."},
      {"v_dtype_differs", [](C c) { c.cache.dtype = c.k.dtype = DType::kFloat8E5M2; },
       "Expected kv_cache.dtype=float8_e5m2 to be equal to k.dtype=float8_e5m2 and "
       "v.dtype=bfloat16."},
      {"page_indices_not_divisible", [](C c) { c.page_indices.resize(5); },
       "Expected num_page_indices=5 to be divisible by max_num_seqs=3."},
      {"cu_q_lens_wrong_length", [](C c) { c.cu_q_lens.resize(3); },
       "Expected cu_q_lens.shape=(3,) to be (4,)."},  // (S+1,) with S = 3
      {"distribution_wrong_length", [](C c) { c.distribution.resize(2); },
       "Expected distribution.shape=(2,) to be (3,)."},
      {"sliding_window_0", [](C c) { c.options.sliding_window = 0; },
       "sliding_window=0 must be positive."},
      {"sliding_window_minus_1", [](C c) { c.options.sliding_window = -1; },
       "sliding_window=-1 must be positive."},
      {"soft_cap_0", [](C c) { c.options.soft_cap = 0.0f; }, "soft_cap=0.0 must not be 0.0."},
      {"sinks_wrong_length",
       [](C c) {
         c.sinks.assign(3, 1.0f);
         c.options.sinks = TensorView::Contiguous(c.sinks.data(), DType::kFloat32, {3});
       },
       "Expected attention_sink.shape[0]=3 to be equal to q.shape[1]=4 (num_q_heads)."},
      {"sinks_not_f32",
       [](C c) {
         c.sinks.assign(4, 1.0f);
         c.options.sinks = TensorView::Contiguous(c.sinks.data(), DType::kBFloat16, {4});
       },
       "Expected attention_sink", true},
      // Dynamic checks of the metadata values.
      {"distribution_decreasing",
       [](C c) {
         c.distribution = {2, 1, 2};
       },
       "Invalid distribution: distribution=", true},
      {"num_seqs_over_max",
       [](C c) {
         c.distribution = {0, 0, 4};
       },
       "num_seqs=4 must be <= max_num_seqs=3"},
      {"total_q_tokens_over_T",
       [](C c) {
         c.cu_q_lens = {0, 1, 5, 5};
       },
       "Total q tokens 5 must be <= max_num_tokens=4."},
      {"total_q_tokens_int32_max",
       [](C c) {
         c.cu_q_lens = {0, 1, kInt32Max, kInt32Max};
       },
       "Total q tokens 2147483647 must be <= max_num_tokens=4."},
      {"q_len_0",
       [](C c) {
         c.cu_q_lens = {0, 1, 1, 1};
       },
       "Require 0 < q_len=0 <= kv_len=20 at sequence 1."},
      {"cu_q_lens_decreasing",
       [](C c) {
         c.cu_q_lens = {0, 3, 1, 1};
       },
       "Require 0 < q_len=-2 <= kv_len=20 at sequence 1."},
      {"q_len_over_kv_len", [](C c) { c.kv_lens[1] = 2; },
       "Require 0 < q_len=3 <= kv_len=2 at sequence 1."},
      {"kv_len_negative", [](C c) { c.kv_lens[1] = -1; },
       "Require 0 < q_len=3 <= kv_len=-1 at sequence 1."},
      {"page_count_over_pages_per_seq", [](C c) { c.kv_lens[1] = 40; },
       "Require page_cnt=3 <= pages_per_seq=2 at sequence 1 where kv_len=40 and page_size=16."},
      // cdiv(INT32_MAX, 16) must not overflow into a small page count.
      {"kv_len_int32_max", [](C c) { c.kv_lens[1] = kInt32Max; },
       "Require page_cnt=134217728 <= pages_per_seq=2 at sequence 1 where kv_len=2147483647 "
       "and page_size=16."},
      {"page_index_equal_num_pages", [](C c) { c.page_indices[2 + 1] = 6; },
       "Require 0 <= page_idx=6 < total_num_pages=6 at sequence 1 where kv_len=20 and "
       "page_size=16."},
      {"page_index_negative", [](C c) { c.page_indices[0] = -1; },
       "Require 0 <= page_idx=-1 < total_num_pages=6 at sequence 0 where kv_len=5 and "
       "page_size=16."},
      // rpa's own checks beyond §3 (their texts are rpa's: only the beginning is pinned).
      {"q_dtype_fp8", [](C c) { c.q.dtype = c.out.dtype = DType::kFloat8E4M3FN; },
       "Expected q.dtype=float8_e4m3fn", true},
      {"output_dtype_differs", [](C c) { c.out.dtype = DType::kFloat32; }, "Expected output", true},
      {"output_shape_differs",
       [](C c) {
         c.out = TensorView::Contiguous(c.out_bytes.data(), DType::kBFloat16, {4, 4, 32});
       },
       "Expected output", true},
      {"cache_not_contiguous", [](C c) { c.cache.strides[0] *= 2; }, "Expected kv_cache", true},
      {"k_scale_zero", [](C c) { c.options.k_scale = 0.0f; }, "k_scale=", true},
      {"v_scale_nan", [](C c) { c.options.v_scale = std::nanf(""); }, "v_scale=", true},
      {"q_scale_negative", [](C c) { c.options.q_scale = -1.0f; }, "q_scale=", true},
      // Rows before 0 are outside q as much as rows past T (no contract text: any message).
      {"cu_q_lens_negative_start",
       [](C c) {
         c.cu_q_lens = {-1, 0, 3, 3};
       },
       "", true},
  };
}

class RpaValidation : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RpaValidation, ThrowsAndChangesNothing) {
  const ErrorCase& e = GetParam();
  CallUnderTest c;
  e.mutate(c);
  const std::vector<uint8_t> cache_before = c.p.kv_cache;
  try {
    c.Run();
    ADD_FAILURE() << "no exception; expected: " << e.message;
  } catch (const InvalidArgument& ex) {
    const std::string what = ex.what();
    if (e.prefix_only) {
      EXPECT_EQ(what.substr(0, e.message.size()), e.message) << what;
    } else {
      EXPECT_EQ(what, e.message);
    }
  } catch (const std::exception& ex) {
    ADD_FAILURE() << "threw something other than rpa::InvalidArgument: " << ex.what();
  }
  EXPECT_TRUE(c.p.kv_cache == cache_before) << "a rejected call wrote the cache";
  EXPECT_TRUE(std::all_of(c.out_bytes.begin(), c.out_bytes.end(), [](uint8_t b) {
    return b == 0xA5;
  })) << "a rejected call wrote the output";
}

INSTANTIATE_TEST_SUITE_P(Errors, RpaValidation, ValuesIn(ErrorCases()), PrintErrorCaseName);

// The base call of the error cases is itself valid (so each case fails for its one reason).
TEST(RpaValidationBase, BaseCallIsValid) {
  CallUnderTest c;
  EXPECT_NO_THROW(c.Run());
}

}  // namespace
}  // namespace rpa::testing
