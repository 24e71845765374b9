// fp8 caches are read by biased decodes (value * 2^-bias, the code's bits placed in an
// f32), and the kernel undoes the bias with powers of two (KvDecodeScales): 2^64 on q, the
// rest on each logit, 2^bias on each softmax weight. So an fp8 cache must give, bit for bit,
// the output of an f32 cache holding the same values: the same plan and loop order, only
// exact power-of-two rescalings between the two. A wrong factor, a lost subnormal or a
// product pushed into the subnormal range shows up as a differing bit.
//
// Also with the calling thread's flush-to-zero / denormals-are-zero flags set: fp8
// subnormal codes decode to f32 subnormals, which DAZ would read as 0 unless the kernel
// clears the flags for its work (ExactSubnormals).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/ragged_paged_attention.h"
#include "numerics/scalar_codec.h"
#include "tests/kernels/rpa_cases.h"
#include "tests/kernels/rpa_check.h"
#include "tests/numerics/target_loop.h"
#include "util/float_env.h"

namespace rpa::testing {
namespace {

// The fp8 bytes of `codes` as f32 values (exact: every fp8 value is an f32).
std::vector<uint8_t> DecodeToF32Bytes(const std::vector<uint8_t>& codes, DType dtype) {
  std::vector<uint8_t> out(codes.size() * sizeof(float));
  for (size_t i = 0; i < codes.size(); ++i) {
    const float v = dtype == DType::kFloat8E4M3FN ? E4M3FNToF32(codes[i]) : E5M2ToF32(codes[i]);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof(float));
  }
  return out;
}

// The same problem with an f32 cache (and f32 new K/V) holding the fp8 values.
RpaProblem F32Twin(const RpaProblem& fp8) {
  RpaProblem twin = fp8;
  twin.spec.kv_dtype = DType::kFloat32;
  twin.keys = DecodeToF32Bytes(fp8.keys, fp8.spec.kv_dtype);
  twin.values = DecodeToF32Bytes(fp8.values, fp8.spec.kv_dtype);
  twin.kv_cache = DecodeToF32Bytes(fp8.kv_cache, fp8.spec.kv_dtype);
  return twin;
}

// The scheduled output rows' bytes.
std::vector<uint8_t> Run(RpaProblem& p) {
  GuardedOutput out(p.spec.q_dtype, p.num_tokens, p.spec.num_q_heads, p.spec.head_dim);
  CallPublicEntryPoint(p, out.view());
  EXPECT_TRUE(out.CanariesIntact());
  const size_t bytes = static_cast<size_t>(p.num_scheduled_tokens()) * p.spec.num_q_heads *
                       p.spec.head_dim * DTypeSize(p.spec.q_dtype);
  const auto* data = static_cast<const uint8_t*>(out.data());
  return std::vector<uint8_t>(data, data + bytes);
}

void ExpectFp8EqualsF32Twin(const RpaCase& spec) {
  test::ForEachSupportedTarget([&](int64_t) {
    RpaProblem fp8 = MakeProblem(spec);
    RpaProblem twin = F32Twin(fp8);
    const std::vector<uint8_t> got = Run(fp8), want = Run(twin);
    ASSERT_EQ(got.size(), want.size());
    size_t first = 0;
    while (first < got.size() && got[first] == want[first]) ++first;
    EXPECT_EQ(first, got.size()) << spec.name << ": outputs differ from byte " << first;
  });
}

// Decode (direct path), prefill (wide path: more than 8 queries per KV head) and mixed
// rows, GQA, scales, soft cap and sinks; head_dim 72 leaves a part-vector tail on 512-bit
// targets and 80 a whole-vector tail past the last group on 256-bit ones.
RpaCase MixedCase(DType kv, int head_dim, uint64_t seed) {
  RpaCase c;
  c.name = std::string(DTypeName(kv)) + "_d" + std::to_string(head_dim);
  c.kv_dtype = kv;
  c.q_dtype = DType::kFloat32;
  c.seqs = {{1, 200}, {1, 65}, {24, 150}, {5, 90}};
  c.num_decode = 2;
  c.num_prefill = 1;
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.shuffle_pages = true;
  c.fill = Fill::kSigned;
  c.q_magnitude = 3.0f;
  c.kv_magnitude = 2.0f;
  c.k_scale = 0.75f;
  c.v_scale = 1.5f;
  c.soft_cap = 20.0f;
  c.sinks_magnitude = 1.0f;
  c.num_threads = 2;
  c.seed = seed;
  return c;
}

TEST(RpaFp8Exact, E4M3FNCacheEqualsF32CacheOfItsValues) {
  for (const int d : {128, 80, 72}) ExpectFp8EqualsF32Twin(MixedCase(DType::kFloat8E4M3FN, d, 5));
}

TEST(RpaFp8Exact, E5M2CacheEqualsF32CacheOfItsValues) {
  for (const int d : {128, 80, 72}) ExpectFp8EqualsF32Twin(MixedCase(DType::kFloat8E5M2, d, 6));
}

// Small K/V (magnitude 2^-5 for e4m3fn, 2^-13 for e5m2, whose subnormals lie below 2^-6
// and 2^-14): about half the codes are subnormals, f32 subnormals once decoded.
// One thread, so every item runs on this thread with its flags set.
TEST(RpaFp8Exact, SubnormalCodesSurviveCallerFlushToZero) {
  if (kFlushSubnormalBits == 0)
    GTEST_SKIP() << "no flush-to-zero control known on this architecture";
  for (const DType kv : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    RpaCase c = MixedCase(kv, 128, 7);
    c.kv_magnitude = kv == DType::kFloat8E4M3FN ? 0x1p-5f : 0x1p-13f;
    c.num_threads = 1;
    const uint64_t saved = ReadFloatControl();
    WriteFloatControl(saved | kFlushSubnormalBits);
    ExpectFp8EqualsF32Twin(c);
    const uint64_t after = ReadFloatControl();
    WriteFloatControl(saved);
    EXPECT_EQ(after & kFlushSubnormalBits, kFlushSubnormalBits)
        << "the kernel left the caller's flags changed";
  }
}

}  // namespace
}  // namespace rpa::testing
