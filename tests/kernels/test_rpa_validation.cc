// Every validation message of the contract's §3, exactly, and bounds safety: metadata,
// however wrong, is either rejected with InvalidArgument or computed without touching a
// byte outside the views (canary bytes around every buffer; run under the asan preset for
// the reads).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention_validate.h"
#include "kernels/ragged_paged_attention.h"
#include "util/error.h"

namespace rpa {
namespace {

constexpr size_t kCanary = 256;  // guard bytes on each side of every buffer
constexpr uint8_t kCanaryByte = 0xCD;

// A byte buffer with canaries on both sides.
struct Guarded {
  std::vector<uint8_t> bytes;
  explicit Guarded(size_t n, uint8_t fill = 0) : bytes(n + 2 * kCanary, kCanaryByte) {
    std::memset(bytes.data() + kCanary, fill, n);
  }
  uint8_t* data() { return bytes.data() + kCanary; }
  bool CanariesIntact() const {
    for (size_t i = 0; i < kCanary; ++i) {
      if (bytes[i] != kCanaryByte || bytes[bytes.size() - 1 - i] != kCanaryByte) return false;
    }
    return true;
  }
};

// A small valid problem: T=6 tokens, Hq=4, Hkv=2, D=8, 6 pages of 4 slots, bf16 q/k/v/cache.
struct SmallProblem {
  int64_t T = 6, hq = 4, hkv = 2, d = 8, np = 6, ps = 4;
  DType q_dtype = DType::kBFloat16, kv_dtype = DType::kBFloat16;
  Guarded q{0}, k{0}, v{0}, cache{0}, out{0};
  std::vector<int32_t> kv_lens = {5, 6}, page_indices = {0, 1, 2, 3, 4, 5}, cu_q_lens = {0, 1, 6},
                       distribution = {1, 1, 2};
  AttentionOptions options;
  TensorView qv, kv, vv, cv, ov;

  SmallProblem() { Alloc(); }
  void Alloc() {
    const size_t qs = DTypeSize(q_dtype), ks = DTypeSize(kv_dtype);
    q = Guarded(T * hq * d * qs, 0x3F);  // bf16 0x3F3F ~ 0.75
    k = Guarded(T * hkv * d * ks, 0x3F);
    v = Guarded(T * hkv * d * ks, 0x3F);
    cache = Guarded(np * ps * 2 * hkv * d * ks, 0x3F);
    out = Guarded(T * hq * d * qs);
    qv = TensorView::Contiguous(q.data(), q_dtype, {T, hq, d});
    kv = TensorView::Contiguous(k.data(), kv_dtype, {T, hkv, d});
    vv = TensorView::Contiguous(v.data(), kv_dtype, {T, hkv, d});
    cv = TensorView::Contiguous(cache.data(), kv_dtype, {np, ps, 2 * hkv, d});
    ov = TensorView::Contiguous(out.data(), q_dtype, {T, hq, d});
  }
  void Run() {
    RaggedPagedAttention(qv, kv, vv, cv, {kv_lens, page_indices, cu_q_lens, distribution},
                         options, ov);
  }
  bool CanariesIntact() const {
    return q.CanariesIntact() && k.CanariesIntact() && v.CanariesIntact() &&
           cache.CanariesIntact() && out.CanariesIntact();
  }
};

// Runs s and returns the InvalidArgument message ("" if it did not throw).
std::string ErrorOf(SmallProblem& s) {
  try {
    s.Run();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(RpaValidation, ValidSetupRuns) {
  SmallProblem s;
  EXPECT_EQ(ErrorOf(s), "");
  EXPECT_TRUE(s.CanariesIntact());
}

TEST(RpaValidation, NotThreeD) {
  SmallProblem s;
  s.kv = TensorView::Contiguous(s.k.data(), s.kv_dtype, {s.T, s.hkv * s.d});
  EXPECT_EQ(ErrorOf(s),
            "Expected 3D array for q.shape=(6, 4, 8), k.shape=(6, 16), v.shape=(6, 2, 8)");
}

TEST(RpaValidation, KeyValueShapesDiffer) {
  SmallProblem s;
  s.vv = TensorView::Contiguous(s.v.data(), s.kv_dtype, {s.T, 1, 2 * s.d});
  EXPECT_EQ(ErrorOf(s), "Expected k.shape=(6, 2, 8) to be equal to v.shape=(6, 1, 16)");
}

TEST(RpaValidation, TokenCountsDiffer) {
  SmallProblem s;
  s.kv = TensorView::Contiguous(s.k.data(), s.kv_dtype, {3, s.hkv, s.d});
  s.vv = TensorView::Contiguous(s.v.data(), s.kv_dtype, {3, s.hkv, s.d});
  EXPECT_EQ(ErrorOf(s),
            "Expected q.shape[0]=6 to be equal to k.shape[0]=3 and v.shape[0]=3");
}

TEST(RpaValidation, HeadDimsDiffer) {
  SmallProblem s;
  s.kv = TensorView::Contiguous(s.k.data(), s.kv_dtype, {s.T, 1, 16});
  s.vv = TensorView::Contiguous(s.v.data(), s.kv_dtype, {s.T, 1, 16});
  EXPECT_EQ(ErrorOf(s), "Expected q.shape[2]=8 to be equal to k.shape[2]=16 and v.shape[2]=16");
}

TEST(RpaValidation, HeadsNotDivisible) {
  SmallProblem s;
  s.kv = TensorView::Contiguous(s.k.data(), s.kv_dtype, {s.T, 3, s.d});
  s.vv = TensorView::Contiguous(s.v.data(), s.kv_dtype, {s.T, 3, s.d});
  EXPECT_EQ(ErrorOf(s),
            "Expected actual_num_q_heads=4 to be divisible by actual_num_kv_heads=3.");
}

TEST(RpaValidation, CacheShape) {
  SmallProblem s;
  s.cv = TensorView::Contiguous(s.cache.data(), s.kv_dtype, {s.np, s.ps, s.hkv, 2 * s.d});
  EXPECT_EQ(ErrorOf(s),
            "Expected kv_cache.shape=(6, 4, 2, 16) to be equal to "
            "expected_kv_cache_shape=(6, 4, 4, 8)");
}

TEST(RpaValidation, Fp8CacheWithBf16KeysIsTheServingBug) {
  SmallProblem s;
  s.cv = TensorView::Contiguous(s.cache.data(), DType::kFloat8E4M3FN, {s.np, s.ps, 2 * s.hkv, s.d});
  EXPECT_EQ(ErrorOf(s),
            "Expected kv_cache.dtype=float8_e4m3fn to be equal to k.dtype=bfloat16 and "
            "v.dtype=bfloat16.");
}

TEST(RpaValidation, CacheDtypeUnsupported) {
  SmallProblem s;
  s.qv.dtype = DType::kBFloat16;
  s.kv.dtype = s.vv.dtype = s.cv.dtype = DType::kFloat16;
  EXPECT_EQ(ErrorOf(s),
            "Expected kv_cache.dtype=float16 to be one of float32, bfloat16, float8_e4m3fn, "
            "float8_e5m2.");
}

TEST(RpaValidation, MetadataArraysDtypeAndRank) {
  const MetadataArrayInfo ok{"int32", "(2,)", 1};
  EXPECT_NO_THROW(CheckMetadataArrays(ok, ok, ok, ok));
  try {
    CheckMetadataArrays(ok, {"int64", "(6,)", 1}, ok, ok);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "Expected int32 dtype for kv_lens.dtype=int32, page_indices.dtype=int64, "
                 "cu_q_lens.dtype=int32, distribution.dtype=int32");
  }
  try {
    CheckMetadataArrays(ok, {"int32", "(2, 3)", 2}, {"int32", "(3,)", 1}, ok);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "Expected 1D array for kv_lens.shape=(2,), page_indices.shape=(2, 3), "
                 "cu_q_lens.shape=(3,)");
  }
}

TEST(RpaValidation, PageIndicesNotDivisible) {
  SmallProblem s;
  s.page_indices = {0, 1, 2, 3, 4};
  EXPECT_EQ(ErrorOf(s), "Expected num_page_indices=5 to be divisible by max_num_seqs=2.");
}

TEST(RpaValidation, CuQLensShape) {
  SmallProblem s;
  s.cu_q_lens = {0, 1};
  EXPECT_EQ(ErrorOf(s), "Expected cu_q_lens.shape=(2,) to be (3,).");
}

TEST(RpaValidation, DistributionShape) {
  SmallProblem s;
  s.distribution = {1, 2};
  EXPECT_EQ(ErrorOf(s), "Expected distribution.shape=(2,) to be (3,).");
}

TEST(RpaValidation, SlidingWindowMustBePositive) {
  for (int w : {0, -1}) {
    SmallProblem s;
    s.options.sliding_window = w;
    EXPECT_EQ(ErrorOf(s), "sliding_window=" + std::to_string(w) + " must be positive.");
  }
}

TEST(RpaValidation, SoftCapMustNotBeZero) {
  SmallProblem s;
  s.options.soft_cap = 0.0f;
  EXPECT_EQ(ErrorOf(s), "soft_cap=0.0 must not be 0.0.");
}

TEST(RpaValidation, SinksShapeAndDtype) {
  SmallProblem s;
  std::vector<float> sinks(3);
  s.options.sinks = TensorView::Contiguous(sinks.data(), DType::kFloat32, {3});
  EXPECT_EQ(ErrorOf(s),
            "Expected attention_sink.shape[0]=3 to be equal to q.shape[1]=4 (num_q_heads).");
  std::vector<uint16_t> bf(4);
  s.options.sinks = TensorView::Contiguous(bf.data(), DType::kBFloat16, {4});
  EXPECT_EQ(ErrorOf(s),
            "Expected attention_sink.shape[0]=4 to be equal to q.shape[1]=4 (num_q_heads).");
}

TEST(RpaValidation, ScalesMustBeFinitePositive) {
  SmallProblem s;
  s.options.k_scale = -1.0f;
  EXPECT_EQ(ErrorOf(s), "k_scale=-1.0 must be finite and positive.");
}

TEST(RpaValidation, QueryAndOutputChecks) {
  SmallProblem s;
  s.ov = TensorView::Contiguous(s.out.data(), DType::kFloat32, {s.T, s.hq, s.d});
  EXPECT_EQ(ErrorOf(s), "Expected output.dtype=float32 to be equal to q.dtype=bfloat16");
  SmallProblem t;
  t.ov = TensorView::Contiguous(t.out.data(), t.q_dtype, {t.T, t.hq, 4});
  EXPECT_EQ(ErrorOf(t), "Expected output.shape=(6, 4, 4) to be equal to q.shape=(6, 4, 8)");
}

// ---- Dynamic checks -------------------------------------------------------------------

TEST(RpaValidation, InvalidDistribution) {
  SmallProblem s;
  s.distribution = {2, 1, 2};
  EXPECT_EQ(ErrorOf(s), "Invalid distribution: distribution=[2, 1, 2]");
}

TEST(RpaValidation, TooManySeqs) {
  SmallProblem s;
  s.distribution = {1, 1, 3};
  EXPECT_EQ(ErrorOf(s), "num_seqs=3 must be <= max_num_seqs=2");
}

TEST(RpaValidation, TooManyTokens) {
  SmallProblem s;
  s.cu_q_lens = {0, 1, 7};
  EXPECT_EQ(ErrorOf(s), "Total q tokens 7 must be <= max_num_tokens=6.");
}

TEST(RpaValidation, QLenRange) {
  SmallProblem s;
  s.cu_q_lens = {0, 0, 5};
  EXPECT_EQ(ErrorOf(s), "Require 0 < q_len=0 <= kv_len=5 at sequence 0.");
  SmallProblem t;
  t.kv_lens = {5, 4};
  EXPECT_EQ(ErrorOf(t), "Require 0 < q_len=5 <= kv_len=4 at sequence 1.");
}

TEST(RpaValidation, TooManyPages) {
  SmallProblem s;
  s.kv_lens = {5, 13};
  s.cu_q_lens = {0, 1, 6};
  EXPECT_EQ(ErrorOf(s),
            "Require page_cnt=4 <= pages_per_seq=3 at sequence 1 where kv_len=13 and "
            "page_size=4.");
}

TEST(RpaValidation, PageIndexOutOfRange) {
  SmallProblem s;
  s.page_indices = {0, 9, 2, 3, 4, 5};
  EXPECT_EQ(ErrorOf(s),
            "Require 0 <= page_idx=9 < total_num_pages=6 at sequence 0 where kv_len=5 and "
            "page_size=4.");
  SmallProblem t;
  t.page_indices = {0, 1, 2, 3, -1, 5};
  EXPECT_EQ(ErrorOf(t),
            "Require 0 <= page_idx=-1 < total_num_pages=6 at sequence 1 where kv_len=6 and "
            "page_size=4.");
}

TEST(RpaValidation, UnusedPageEntriesAreNotChecked) {
  SmallProblem s;
  s.page_indices = {0, 1, 999, 3, 4, -7};  // entries past cdiv(kv_len, PS) are never read
  EXPECT_EQ(ErrorOf(s), "");
  EXPECT_TRUE(s.CanariesIntact());
}

// Random garbage metadata: every call either throws InvalidArgument or leaves every canary
// intact (reads outside the views are caught by the asan build of this test).
TEST(RpaValidation, GarbageMetadataNeverTouchesOutsideTheViews) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> small(-3, 14);
  std::uniform_int_distribution<int> pick(0, 9);
  auto garbage = [&](int v) {
    switch (pick(rng)) {
      case 0: return std::numeric_limits<int32_t>::max();
      case 1: return std::numeric_limits<int32_t>::min();
      case 2: return -1;
      default: return v;
    }
  };
  int ran = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    SmallProblem s;
    for (int32_t& x : s.kv_lens) x = garbage(small(rng));
    for (int32_t& x : s.page_indices) x = garbage(small(rng) % 7);
    for (int32_t& x : s.cu_q_lens) x = garbage(small(rng) % 7);
    for (int32_t& x : s.distribution) x = garbage(small(rng) % 3);
    if (pick(rng) < 3) s.options.update_kv_cache = false;
    if (pick(rng) < 3) s.options.sliding_window = 1 + small(rng) % 4 + 3;
    const std::string err = ErrorOf(s);
    (err.empty() ? ran : rejected)++;
    ASSERT_TRUE(s.CanariesIntact()) << "iteration " << iter << " error '" << err << "'";
  }
  EXPECT_GT(ran, 10);  // the fuzzer must also reach the kernel, not only the checks
  EXPECT_GT(rejected, 10);
}

}  // namespace
}  // namespace rpa
