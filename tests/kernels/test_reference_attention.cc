// Checks of the float64 attention reference itself, on cases whose answer is known in
// closed form, so the kernel tests rest on a reference that is tested on its own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "numerics/scalar_codec.h"
#include "tests/kernels/reference_attention.h"
#include "tests/kernels/rpa_cases.h"

namespace rpa::testing {
namespace {

RpaCase Small() {
  RpaCase c;
  c.name = "small";
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.page_size = 4;
  c.q_dtype = c.kv_dtype = DType::kFloat32;
  c.fill = Fill::kSigned;
  return c;
}

double ValueAt(const RpaProblem& p, const std::vector<uint8_t>& cache, int seq, int pos,
               int kv_head, int d) {
  const int64_t page = p.page_indices[seq * p.pages_per_seq + pos / p.spec.page_size];
  const int64_t row =
      (page * p.spec.page_size + pos % p.spec.page_size) * (2 * p.spec.num_kv_heads) + 2 * kv_head +
      1;
  return DecodeToDouble(p.spec.kv_dtype,
                        cache.data() + (row * p.spec.head_dim + d) * DTypeSize(p.spec.kv_dtype));
}

// kv_len 1: the only visible position is the new token itself, so out = v_scale * V.
TEST(ReferenceAttention, SinglePositionReturnsScaledValue) {
  RpaCase c = Small();
  c.seqs = {{1, 1}};
  c.v_scale = 0.5f;
  RpaProblem p = MakeProblem(c);
  const ReferenceResult r = RunReference(p);
  for (int n = 0; n < 4; ++n) {
    for (int d = 0; d < 8; ++d) {
      const float v = reinterpret_cast<const float*>(p.values.data())[(n / 2) * 8 + d];
      EXPECT_EQ(r.output[n * 8 + d], 0.5 * v);
    }
  }
}

// Zero queries give equal logits: out = mean of the visible values, and a sink s adds
// exp(s) (relative to logit 0) to the denominator.
TEST(ReferenceAttention, EqualLogitsAverageWithSink) {
  RpaCase c = Small();
  c.seqs = {{3, 10}};
  c.sinks_magnitude = 1.0f;
  RpaProblem p = MakeProblem(c);
  std::memset(p.queries.data(), 0, p.queries.size());
  const ReferenceResult r = RunReference(p);
  for (int row = 0; row < 3; ++row) {
    const int pos = 7 + row;  // causal: positions [0, pos] visible
    EXPECT_EQ(r.num_visible[row], pos + 1);
    for (int n = 0; n < 4; ++n) {
      const double sink = p.sinks[n];
      const double m = std::max(0.0, sink);
      const double denom = (pos + 1) * std::exp(-m) + std::exp(sink - m);
      for (int d = 0; d < 8; ++d) {
        double want = 0;
        for (int t = 0; t <= pos; ++t) want += ValueAt(p, r.kv_cache, 0, t, n / 2, d);
        want *= std::exp(-m) / denom;
        EXPECT_NEAR(r.output[(row * 4 + n) * 8 + d], want, 1e-12);
      }
    }
  }
}

// A window of 1 sees only the query's own position.
TEST(ReferenceAttention, WindowOfOneSeesItself) {
  RpaCase c = Small();
  c.seqs = {{5, 12}};
  c.sliding_window = 1;
  RpaProblem p = MakeProblem(c);
  const ReferenceResult r = RunReference(p);
  for (int row = 0; row < 5; ++row) {
    for (int n = 0; n < 4; ++n) {
      for (int d = 0; d < 8; ++d) {
        EXPECT_EQ(r.output[(row * 4 + n) * 8 + d], ValueAt(p, r.kv_cache, 0, 7 + row, n / 2, d));
      }
    }
  }
}

// The new K/V land at positions [kv_len - q_len, kv_len) through the page table; the
// NaN-filled rest of the cache is untouched. KV-share mode writes nothing.
TEST(ReferenceAttention, WritesNewRowsOnlyWhereTheContractSays) {
  RpaCase c = Small();
  c.seqs = {{2, 6}, {1, 3}};
  c.shuffle_pages = true;
  RpaProblem p = MakeProblem(c);
  const ReferenceResult r = RunReference(p);
  size_t changed = 0;  // f32 elements, all of which replace a NaN
  for (size_t b = 0; b < p.kv_cache.size(); b += 4) {
    changed += std::memcmp(&p.kv_cache[b], &r.kv_cache[b], 4) != 0;
  }
  EXPECT_EQ(changed, 3u * 2 * 2 * 8);  // 3 tokens * 2 kv heads * (K + V) * 8 dims
  const float* values = reinterpret_cast<const float*>(p.values.data());
  EXPECT_EQ(ValueAt(p, r.kv_cache, 0, 5, 1, 3), values[(1 * 2 + 1) * 8 + 3]);  // token 1
  EXPECT_EQ(ValueAt(p, r.kv_cache, 1, 2, 0, 0), values[(2 * 2 + 0) * 8 + 0]);  // token 2

  p.spec.update_kv_cache = false;
  EXPECT_TRUE(RunReference(p).kv_cache == p.kv_cache);
}

// q_scale: q / q_scale is clipped to the cache range and rounded to the cache dtype.
// With one position the output does not depend on the logit, so check the logit bound:
// |q'| = 448 (clipped from 600) times |k| = 1, times sm_scale * q_scale.
TEST(ReferenceAttention, QScaleClipsToTheCacheRange) {
  RpaCase c = Small();
  c.num_q_heads = c.num_kv_heads = 1;
  c.head_dim = 1;
  c.seqs = {{1, 1}};
  c.kv_dtype = DType::kFloat8E4M3FN;
  c.q_scale = 0.5f;
  c.sm_scale = 1.0f;
  RpaProblem p = MakeProblem(c);
  const float q = 300.0f;
  std::memcpy(p.queries.data(), &q, 4);
  p.keys[0] = F32ToE4M3FN(1.0f);
  const ReferenceResult r = RunReference(p);
  EXPECT_EQ(r.logit_abs_bound[0], 448.0 * 0.5);
}

// Soft cap: the logit becomes cap * tanh(s / cap). Two positions with logits 0 and s give
// weight 1 / (1 + exp(capped s)) on the first.
TEST(ReferenceAttention, SoftCapAppliesTanh) {
  RpaCase c = Small();
  c.num_q_heads = c.num_kv_heads = 1;
  c.head_dim = 1;
  c.seqs = {{1, 2}};
  c.sm_scale = 1.0f;
  c.soft_cap = 2.0f;
  RpaProblem p = MakeProblem(c);
  auto set = [](std::vector<uint8_t>& buf, size_t i, float x) { std::memcpy(&buf[i * 4], &x, 4); };
  set(p.queries, 0, 3.0f);
  set(p.keys, 0, 1.0f);  // new token at position 1: logit 3 -> 2 tanh(1.5)
  set(p.values, 0, 1.0f);
  const int64_t page0 = p.page_indices[0];
  set(p.kv_cache, page0 * 4 * 2 + 0, 0.0f);  // position 0: K = 0 (logit 0), V = 0
  set(p.kv_cache, page0 * 4 * 2 + 1, 0.0f);
  const ReferenceResult r = RunReference(p);
  const double e = std::exp(2.0 * std::tanh(1.5));
  EXPECT_NEAR(r.output[0], e / (1 + e), 1e-15);
}

}  // namespace
}  // namespace rpa::testing
