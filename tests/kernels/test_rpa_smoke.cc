// Smoke tests of the fast attention kernel against a tiny naive loop written here (double
// precision, gathers K/V from the cache through the page table). The full matrix against
// the independent float64 reference lives in test_rpa_upstream_matrix / test_rpa_hard_cases;
// these cover each feature once, on every SIMD target, plus plan reuse and thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_plan.h"
#include "kernels/ragged_paged_attention.h"
#include "numerics/convert.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

struct Seq {
  int q_len, kv_len;
};

struct Case {
  int hq = 4, hkv = 2, d = 64, page_size = 16;
  DType q_dtype = DType::kFloat32;
  DType kv_dtype = DType::kBFloat16;
  std::vector<Seq> seqs = {{1, 37}, {5, 5}, {9, 40}};
  int decode_end = 1, prefill_end = 2;  // distribution (d0, d1); d2 = seqs.size()
  AttentionOptions options;
};

// Inputs, metadata and output of one case; the cache's unused slots hold NaN codes.
struct Problem {
  Case c;
  int64_t tokens = 0, pages_per_seq = 0, num_pages = 0;
  std::vector<uint8_t> q, k, v, cache, out;
  std::vector<int32_t> kv_lens, page_indices, cu_q_lens, distribution;
  std::vector<float> sinks;

  explicit Problem(const Case& cs) : c(cs) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int64_t S = static_cast<int64_t>(c.seqs.size());
    for (const Seq& s : c.seqs) {
      tokens += s.q_len;
      pages_per_seq = std::max<int64_t>(pages_per_seq, (s.kv_len + c.page_size - 1) / c.page_size);
    }
    pages_per_seq += 1;  // an unused entry per sequence, pointing at a NaN page
    num_pages = S * pages_per_seq + 1;
    auto fill = [&](DType t, int64_t n) {
      std::vector<uint8_t> b(n * DTypeSize(t));
      for (int64_t i = 0; i < n; ++i) StoreFromF32(t, uni(rng), b.data() + i * DTypeSize(t));
      return b;
    };
    q = fill(c.q_dtype, tokens * c.hq * c.d);
    k = fill(c.kv_dtype, tokens * c.hkv * c.d);
    v = fill(c.kv_dtype, tokens * c.hkv * c.d);
    const int64_t cache_elems = num_pages * c.page_size * 2 * c.hkv * c.d;
    cache.resize(cache_elems * DTypeSize(c.kv_dtype));
    for (int64_t i = 0; i < cache_elems; ++i) {
      StoreFromF32(c.kv_dtype, std::numeric_limits<float>::quiet_NaN(),
                   cache.data() + i * DTypeSize(c.kv_dtype));
    }
    // A shuffled block table, so pages of a sequence are not adjacent.
    std::vector<int32_t> perm(num_pages);
    for (int32_t i = 0; i < num_pages; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    cu_q_lens.push_back(0);
    for (int64_t i = 0; i < S; ++i) {
      kv_lens.push_back(c.seqs[i].kv_len);
      cu_q_lens.push_back(cu_q_lens.back() + c.seqs[i].q_len);
      for (int64_t j = 0; j < pages_per_seq; ++j) {
        page_indices.push_back(perm[i * pages_per_seq + j]);
      }
      // Old context (positions before the new tokens) holds random values.
      for (int t = 0; t < c.seqs[i].kv_len - c.seqs[i].q_len; ++t) {
        for (int e = 0; e < 2 * c.hkv * c.d; ++e) {
          StoreFromF32(c.kv_dtype, uni(rng), CacheAt(i, t) + e * DTypeSize(c.kv_dtype));
        }
      }
    }
    distribution = {c.decode_end, c.prefill_end, static_cast<int32_t>(S)};
    out.assign(tokens * c.hq * c.d * DTypeSize(c.q_dtype), 0xA5);
    sinks.resize(c.hq);
    for (float& s : sinks) s = 3.0f * uni(rng);
  }

  uint8_t* CacheAt(int64_t seq, int64_t pos) {
    const int64_t page = page_indices[seq * pages_per_seq + pos / c.page_size];
    return cache.data() + (page * c.page_size + pos % c.page_size) * 2 * c.hkv * c.d *
                              static_cast<int64_t>(DTypeSize(c.kv_dtype));
  }

  TensorView View(std::vector<uint8_t>& b, DType t, std::initializer_list<int64_t> shape) {
    return TensorView::Contiguous(b.data(), t, shape);
  }
  TensorView QView() { return View(q, c.q_dtype, {tokens, c.hq, c.d}); }
  TensorView KView() { return View(k, c.kv_dtype, {tokens, c.hkv, c.d}); }
  TensorView VView() { return View(v, c.kv_dtype, {tokens, c.hkv, c.d}); }
  TensorView CacheView() {
    return View(cache, c.kv_dtype, {num_pages, c.page_size, 2 * c.hkv, c.d});
  }
  TensorView OutView() { return View(out, c.q_dtype, {tokens, c.hq, c.d}); }
  AttentionMetadata Metadata() const { return {kv_lens, page_indices, cu_q_lens, distribution}; }

  void Run(AttentionOptions opts) {
    if (opts.sinks) *opts.sinks = TensorView::Contiguous(sinks.data(), DType::kFloat32, {c.hq});
    RaggedPagedAttention(QView(), KView(), VView(), CacheView(), Metadata(), opts, OutView());
  }
};

double Load(DType t, const uint8_t* p) { return LoadAsF32(t, p); }

// The naive loop: §2 of the contract, in double, over the cache after the kernel ran.
// Also returns in *bound a bound on the sum of |terms| of the largest logit, for the
// tolerance.
std::vector<double> Naive(Problem& p, const AttentionOptions& o, double* max_abs_logit_terms) {
  const Case& c = p.c;
  const int G = c.hq / c.hkv;
  const size_t qs = DTypeSize(c.q_dtype), ks = DTypeSize(c.kv_dtype);
  std::vector<double> out(p.tokens * c.hq * c.d, 0.0);
  *max_abs_logit_terms = 0;
  const double scale = o.sm_scale * o.k_scale.value_or(1.0f) * o.q_scale.value_or(1.0f);
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const int L = c.seqs[i].q_len, K = c.seqs[i].kv_len, off = K - L;
    for (int r = 0; r < L; ++r) {
      const int64_t row = p.cu_q_lens[i] + r;
      const int pos = off + r;
      for (int n = 0; n < c.hq; ++n) {
        const int h = n / G;
        std::vector<double> q(c.d);
        for (int d = 0; d < c.d; ++d) {
          double x = Load(c.q_dtype, p.q.data() + ((row * c.hq + n) * c.d + d) * qs);
          if (o.q_scale) {  // §2: divide, clip, cast to the cache dtype
            float y = static_cast<float>(x) / *o.q_scale;
            const float mx = static_cast<float>(GetFInfo(c.kv_dtype).max);
            y = std::min(std::max(y, -mx), mx);
            uint8_t buf[4];
            StoreFromF32(c.kv_dtype, y, buf);
            x = LoadAsF32(c.kv_dtype, buf);
          }
          q[d] = x;
        }
        std::vector<double> logits;
        std::vector<int> idx;
        for (int t = 0; t < K; ++t) {
          if (o.use_causal_mask) {
            if (t > pos) continue;
            if (o.sliding_window && t <= pos - *o.sliding_window) continue;
          }
          const uint8_t* krow = p.CacheAt(i, t) + 2 * h * c.d * ks;
          double s = 0, terms = 0;
          for (int d = 0; d < c.d; ++d) {
            const double kd = Load(c.kv_dtype, krow + d * ks);
            s += q[d] * kd;
            terms += std::abs(q[d] * kd);
          }
          s *= scale;
          *max_abs_logit_terms = std::max(*max_abs_logit_terms, terms * std::abs(scale));
          if (o.soft_cap) s = *o.soft_cap * std::tanh(s / *o.soft_cap);
          logits.push_back(s);
          idx.push_back(t);
        }
        double mx = -INFINITY;
        for (double s : logits) mx = std::max(mx, s);
        const bool sink = o.sinks.has_value();
        if (sink) mx = std::max(mx, static_cast<double>(p.sinks[n]));
        double denom = sink ? std::exp(p.sinks[n] - mx) : 0.0;
        for (double s : logits) denom += std::exp(s - mx);
        for (size_t j = 0; j < logits.size(); ++j) {
          const double w = std::exp(logits[j] - mx) / denom;
          const uint8_t* vrow = p.CacheAt(i, idx[j]) + (2 * h + 1) * c.d * ks;
          for (int d = 0; d < c.d; ++d) {
            out[(row * c.hq + n) * c.d + d] += w * Load(c.kv_dtype, vrow + d * ks);
          }
        }
        for (int d = 0; d < c.d; ++d) out[(row * c.hq + n) * c.d + d] *= o.v_scale.value_or(1.0f);
      }
    }
  }
  return out;
}

// Runs the case on every SIMD target and checks output and cache writes.
void Check(const Case& c) {
  test::ForEachSupportedTarget([&](int64_t) {
    Problem p(c);
    p.Run(c.options);
    // Cache write: new rows equal the K/V inputs byte for byte.
    const size_t ks = DTypeSize(c.kv_dtype);
    for (size_t i = 0; i < c.seqs.size() && c.options.update_kv_cache; ++i) {
      const int off = c.seqs[i].kv_len - c.seqs[i].q_len;
      for (int r = 0; r < c.seqs[i].q_len; ++r) {
        const int64_t row = p.cu_q_lens[i] + r;
        for (int h = 0; h < c.hkv; ++h) {
          const uint8_t* slot = p.CacheAt(i, off + r) + 2 * h * c.d * ks;
          ASSERT_EQ(0, std::memcmp(slot, p.k.data() + (row * c.hkv + h) * c.d * ks, c.d * ks));
          ASSERT_EQ(0, std::memcmp(slot + c.d * ks, p.v.data() + (row * c.hkv + h) * c.d * ks,
                                   c.d * ks));
        }
      }
    }
    double terms = 0;
    const std::vector<double> ref = Naive(p, c.options, &terms);
    // Tolerance. Logits: an f32 dot product of D terms errs by <= D * 2^-24 * sum|terms|
    // (plus one rounding for the folded scale); soft cap and Exp add a few ulps. A logit
    // error e changes each softmax weight by a relative <= 2e, so the output (a convex
    // combination of |V| <= max|V| = 1 * v_scale) errs by <= 2e * v_scale, plus the f32 P.V
    // accumulation (<= kv_len * 2^-24 relative) and the output rounding (2^-9 for bf16).
    const double e_logit = (c.d + 4) * std::ldexp(terms, -24) + 1e-6;
    const double v_scale = c.options.v_scale.value_or(1.0f);
    const double out_ulp = c.q_dtype == DType::kBFloat16 ? std::ldexp(1.0, -8) : 0.0;
    const double tol = (2 * e_logit + 1e-5) * v_scale;
    const size_t qs = DTypeSize(c.q_dtype);
    for (int64_t row = 0; row < p.cu_q_lens.back(); ++row) {
      for (int64_t e = 0; e < c.hq * c.d; ++e) {
        const double got = LoadAsF32(c.q_dtype, p.out.data() + (row * c.hq * c.d + e) * qs);
        const double want = ref[row * c.hq * c.d + e];
        ASSERT_NEAR(got, want, tol + out_ulp * std::abs(want)) << "row " << row << " elem " << e;
      }
    }
  });
}

TEST(RpaSmoke, Bf16CacheF32Queries) { Check(Case{}); }

TEST(RpaSmoke, Bf16QueriesAndCache) {
  Case c;
  c.q_dtype = DType::kBFloat16;
  Check(c);
}

TEST(RpaSmoke, F32Cache) {
  Case c;
  c.kv_dtype = DType::kFloat32;
  Check(c);
}

TEST(RpaSmoke, Fp8CachesWithScales) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    Case c;
    c.kv_dtype = t;
    c.options.k_scale = 0.5f;
    c.options.v_scale = 0.25f;
    c.options.sm_scale = 0.125f;
    Check(c);
    c.options.q_scale = 0.5f;
    Check(c);
  }
}

TEST(RpaSmoke, WindowSoftCapSinksNonCausal) {
  Case c;
  c.hq = 6;
  c.hkv = 2;
  c.options.sliding_window = 7;
  c.options.soft_cap = 2.5f;
  c.options.sinks = TensorView{};
  Check(c);
  c.options.sliding_window.reset();
  c.options.use_causal_mask = false;
  Check(c);
}

TEST(RpaSmoke, OddHeadDimAndPageSizeOne) {
  Case c;
  c.d = 18;  // not a multiple of any vector width nor of the wide path's 4- or 8-element
             // row blocks: exercises the part-vector and scalar tails on every target
  c.page_size = 1;
  c.kv_dtype = DType::kFloat8E5M2;
  Check(c);
  c.d = 80;
  c.page_size = 3;
  c.kv_dtype = DType::kFloat8E4M3FN;
  Check(c);
}

TEST(RpaSmoke, LargeGroupUsesDecodedTiles) {
  Case c;
  c.hq = 12;  // G = 12 > the direct path's 8 queries
  c.hkv = 1;
  c.seqs = {{1, 100}, {40, 70}, {3, 50}};
  Check(c);
}

TEST(RpaSmoke, LongSequenceSplitAcrossWorkers) {
  Case c;
  c.seqs = {{1, 3000}, {2, 1500}};
  c.decode_end = 1;
  c.prefill_end = 1;
  c.kv_dtype = DType::kFloat8E4M3FN;
  c.options.num_threads = 0;  // the whole pool: KV ranges split and merged
  Check(c);
  c.options.sinks = TensorView{};
  Check(c);
  c.options.num_threads = 1;
  Check(c);
}

TEST(RpaSmoke, PlanReuseGivesIdenticalOutput) {
  Case c;
  c.seqs = {{1, 900}, {3, 33}};
  Problem p(c);
  AttentionPlan plan = PlanAttention(ShapeOf(p.QView(), p.KView(), p.CacheView()), p.Metadata(),
                                     c.options);
  RunAttention(plan, p.QView(), p.KView(), p.VView(), p.CacheView(), c.options, p.OutView());
  const std::vector<uint8_t> first = p.out;
  RunAttention(plan, p.QView(), p.KView(), p.VView(), p.CacheView(), c.options, p.OutView());
  EXPECT_EQ(first, p.out);
  p.Run(c.options);
  EXPECT_EQ(first, p.out);
}

TEST(RpaSmoke, KvShareModeReadsCacheOnly) {
  Case c;
  c.options.update_kv_cache = false;
  Problem p(c);
  // Share mode reads positions [0, kv_len) from the cache: fill the new positions too.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    for (int t = c.seqs[i].kv_len - c.seqs[i].q_len; t < c.seqs[i].kv_len; ++t) {
      for (int e = 0; e < 2 * c.hkv * c.d; ++e) {
        StoreFromF32(c.kv_dtype, uni(rng), p.CacheAt(i, t) + e * 2);
      }
    }
  }
  const std::vector<uint8_t> cache_before = p.cache;
  p.Run(c.options);
  EXPECT_EQ(cache_before, p.cache);
  const std::vector<uint8_t> out1 = p.out;
  for (uint8_t& b : p.k) b ^= 0x5A;  // different (ignored) inputs
  p.Run(c.options);
  EXPECT_EQ(out1, p.out);
  double terms;
  const std::vector<double> ref = Naive(p, c.options, &terms);
  for (int64_t i = 0; i < p.cu_q_lens.back() * c.hq * c.d; ++i) {
    ASSERT_NEAR(LoadAsF32(DType::kFloat32, p.out.data() + 4 * i), ref[i], 1e-4);
  }
}

}  // namespace
}  // namespace rpa
