#include "tests/kernels/rpa_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "numerics/scalar_codec.h"
#include "util/error.h"

namespace rpa::testing {
namespace {

// f32 -> one element of `dtype` at `dst`. Saturating, so generated data is always finite.
void EncodeF32(DType dtype, float x, uint8_t* dst) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(dst, &x, 4);
      return;
    case DType::kBFloat16: {
      const uint16_t b = F32ToBF16Saturate(x);
      std::memcpy(dst, &b, 2);
      return;
    }
    case DType::kFloat16: {
      const uint16_t b = F32ToF16Saturate(x);
      std::memcpy(dst, &b, 2);
      return;
    }
    case DType::kFloat8E4M3FN:
      *dst = F32ToE4M3FNSaturate(x);
      return;
    case DType::kFloat8E5M2:
      *dst = F32ToE5M2Saturate(x);
      return;
  }
}

// Fills `n` elements of `dtype` at `dst` with NaN.
void FillNan(DType dtype, uint8_t* dst, int64_t n) {
  const size_t elem = DTypeSize(dtype);
  uint8_t nan[4];
  EncodeF32(dtype, std::numeric_limits<float>::quiet_NaN(), nan);
  if (dtype == DType::kFloat8E4M3FN) nan[0] = 0x7F;  // saturation would not keep the NaN
  if (dtype == DType::kFloat8E5M2) nan[0] = 0x7E;
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem, nan, elem);
}

class Sampler {
 public:
  Sampler(uint64_t seed, Fill fill) : rng_(seed), fill_(fill) {}
  float Next(float magnitude) {
    const float u = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng_);
    return (fill_ == Fill::kUniform01 ? u : 2.0f * u - 1.0f) * magnitude;
  }
  void Fill(DType dtype, uint8_t* dst, int64_t n, float magnitude) {
    const size_t elem = DTypeSize(dtype);
    for (int64_t i = 0; i < n; ++i) EncodeF32(dtype, Next(magnitude), dst + i * elem);
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  rpa::testing::Fill fill_;
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// ---------------------------------------------------------------------------------------
// Problem construction

RpaProblem MakeProblem(const RpaCase& spec) {
  RpaProblem p;
  p.spec = spec;
  const int64_t num_seqs = static_cast<int64_t>(spec.seqs.size());
  const int64_t hq = spec.num_q_heads, hkv = spec.num_kv_heads, d = spec.head_dim;
  const int64_t ps = spec.page_size;
  RPA_CHECK(spec.num_decode + spec.num_prefill <= num_seqs);
  for (int i = 0; i < spec.num_decode; ++i) RPA_CHECK(spec.seqs[i].q_len == 1);
  p.max_num_seqs = num_seqs + spec.extra_seqs;
  RPA_CHECK(p.max_num_seqs > 0);

  p.distribution = {spec.num_decode, spec.num_decode + spec.num_prefill,
                    static_cast<int32_t>(num_seqs)};
  p.cu_q_lens.assign(p.max_num_seqs + 1, 0);
  p.kv_lens.assign(p.max_num_seqs, 0);
  int64_t max_pages = 0, used_pages = 0;
  for (int64_t i = 0; i < num_seqs; ++i) {
    RPA_CHECK(0 < spec.seqs[i].q_len && spec.seqs[i].q_len <= spec.seqs[i].kv_len);
    p.cu_q_lens[i + 1] = p.cu_q_lens[i] + spec.seqs[i].q_len;
    p.kv_lens[i] = spec.seqs[i].kv_len;
    max_pages = std::max(max_pages, CeilDiv(spec.seqs[i].kv_len, ps));
    used_pages += CeilDiv(spec.seqs[i].kv_len, ps);
  }
  for (int64_t i = num_seqs; i < p.max_num_seqs; ++i) p.cu_q_lens[i + 1] = p.cu_q_lens[i];
  p.num_tokens = p.cu_q_lens[num_seqs] + spec.extra_tokens;
  p.pages_per_seq = std::max<int64_t>(1, max_pages + spec.extra_pages_per_seq);
  // Physical pages: the used ones, one NaN "poison" page that unused block-table entries
  // point to, and extra never-referenced pages.
  p.num_pages = used_pages + 1 + 2;

  Sampler sampler(spec.seed, spec.fill);
  std::vector<int32_t> physical(p.num_pages);
  std::iota(physical.begin(), physical.end(), 0);
  if (spec.shuffle_pages) std::shuffle(physical.begin(), physical.end(), sampler.rng());
  const int32_t poison_page = physical[used_pages];
  const int32_t garbage[] = {static_cast<int32_t>(p.num_pages), -1,
                             std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min()};
  p.page_indices.assign(p.max_num_seqs * p.pages_per_seq, poison_page);
  if (spec.garbage_page_entries) {
    for (size_t e = 0; e < p.page_indices.size(); ++e) p.page_indices[e] = garbage[e % 4];
  }
  int64_t next = 0;
  for (int64_t i = 0; i < num_seqs; ++i) {
    for (int64_t j = 0; j < CeilDiv(spec.seqs[i].kv_len, ps); ++j) {
      p.page_indices[i * p.pages_per_seq + j] = physical[next++];
    }
  }

  const int64_t scheduled = p.cu_q_lens[num_seqs];
  const size_t q_elem = DTypeSize(spec.q_dtype), kv_elem = DTypeSize(spec.kv_dtype);
  p.queries.resize(p.num_tokens * hq * d * q_elem);
  p.keys.resize(p.num_tokens * hkv * d * kv_elem);
  p.values.resize(p.num_tokens * hkv * d * kv_elem);
  // Padding rows are NaN: nothing may copy them into the cache.
  FillNan(spec.q_dtype, p.queries.data(), p.num_tokens * hq * d);
  FillNan(spec.kv_dtype, p.keys.data(), p.num_tokens * hkv * d);
  FillNan(spec.kv_dtype, p.values.data(), p.num_tokens * hkv * d);
  sampler.Fill(spec.q_dtype, p.queries.data(), scheduled * hq * d, spec.q_magnitude);
  sampler.Fill(spec.kv_dtype, p.keys.data(), scheduled * hkv * d, spec.kv_magnitude);
  sampler.Fill(spec.kv_dtype, p.values.data(), scheduled * hkv * d, spec.kv_magnitude);

  // The cache starts all NaN; only the context that exists before this step gets data
  // (in KV-share mode, all of [0, kv_len)). The positions this step writes stay NaN, so
  // reading them before writing them shows.
  const int64_t row_elems = 2 * hkv * d;  // one (page, slot)
  p.kv_cache.resize(p.num_pages * ps * row_elems * kv_elem);
  FillNan(spec.kv_dtype, p.kv_cache.data(), p.num_pages * ps * row_elems);
  for (int64_t i = 0; i < num_seqs; ++i) {
    const int64_t filled =
        spec.update_kv_cache ? spec.seqs[i].kv_len - spec.seqs[i].q_len : spec.seqs[i].kv_len;
    for (int64_t pos = 0; pos < filled; ++pos) {
      const int64_t page = p.page_indices[i * p.pages_per_seq + pos / ps];
      sampler.Fill(spec.kv_dtype, p.kv_cache.data() + (page * ps + pos % ps) * row_elems * kv_elem,
                   row_elems, spec.kv_magnitude);
    }
  }
  if (spec.sinks_magnitude) {
    p.sinks.resize(hq);
    for (auto& s : p.sinks) s = sampler.Next(*spec.sinks_magnitude);
  }
  return p;
}

void RefillNewKv(RpaProblem& p, uint64_t seed) {
  Sampler sampler(seed, p.spec.fill);
  const int64_t n = p.num_scheduled_tokens() * p.spec.num_kv_heads * p.spec.head_dim;
  sampler.Fill(p.spec.kv_dtype, p.keys.data(), n, p.spec.kv_magnitude);
  sampler.Fill(p.spec.kv_dtype, p.values.data(), n, p.spec.kv_magnitude);
}

TensorView RpaProblem::queries_view() {
  return TensorView::Contiguous(queries.data(), spec.q_dtype,
                                {num_tokens, spec.num_q_heads, spec.head_dim});
}
TensorView RpaProblem::keys_view() {
  return TensorView::Contiguous(keys.data(), spec.kv_dtype,
                                {num_tokens, spec.num_kv_heads, spec.head_dim});
}
TensorView RpaProblem::values_view() {
  return TensorView::Contiguous(values.data(), spec.kv_dtype,
                                {num_tokens, spec.num_kv_heads, spec.head_dim});
}
TensorView RpaProblem::kv_cache_view() {
  return TensorView::Contiguous(kv_cache.data(), spec.kv_dtype,
                                {num_pages, spec.page_size, 2 * spec.num_kv_heads, spec.head_dim});
}

AttentionMetadata RpaProblem::metadata() const {
  return AttentionMetadata{kv_lens, page_indices, cu_q_lens, distribution};
}

AttentionOptions RpaProblem::options() {
  AttentionOptions o;
  o.sm_scale = spec.sm_scale.value_or(1.0f / std::sqrt(static_cast<float>(spec.head_dim)));
  o.sliding_window = spec.sliding_window;
  o.soft_cap = spec.soft_cap;
  if (spec.sinks_magnitude) {
    o.sinks = TensorView::Contiguous(sinks.data(), DType::kFloat32, {spec.num_q_heads});
  }
  o.q_scale = spec.q_scale;
  o.k_scale = spec.k_scale;
  o.v_scale = spec.v_scale;
  o.use_causal_mask = spec.use_causal_mask;
  o.update_kv_cache = spec.update_kv_cache;
  o.num_threads = spec.num_threads;
  return o;
}

ReferenceResult RunReference(RpaProblem& p) {
  return ReferenceRaggedPagedAttention(p.queries_view(), p.keys_view(), p.values_view(),
                                       p.kv_cache_view(), p.metadata(), p.options());
}

// ---------------------------------------------------------------------------------------
// Output with canaries

GuardedOutput::GuardedOutput(DType dtype, int64_t num_tokens, int64_t num_heads, int64_t head_dim)
    : dtype_(dtype),
      shape_{num_tokens, num_heads, head_dim},
      bytes_(2 * kGuardBytes + num_tokens * num_heads * head_dim * DTypeSize(dtype), kCanary) {}

TensorView GuardedOutput::view() {
  return TensorView::Contiguous(bytes_.data() + kGuardBytes, dtype_,
                                {shape_[0], shape_[1], shape_[2]});
}

bool GuardedOutput::CanariesIntact() const {
  auto intact = [](auto first, auto last) {
    return std::all_of(first, last, [](uint8_t b) { return b == kCanary; });
  };
  return intact(bytes_.begin(), bytes_.begin() + kGuardBytes) &&
         intact(bytes_.end() - kGuardBytes, bytes_.end());
}

// ---------------------------------------------------------------------------------------
// Tolerance
//
// The contract's pipeline (§2, [rpa] precision): inputs decoded exactly to f32, f32 logits,
// f32 (online) softmax, f32 P·V, scales applied once, one cast to the output dtype. With
// u = 2^-24 (f32 unit roundoff), D = head_dim, n = number of visible positions, A = the
// reference's logit_abs_bound (|scale| * sum_i |q_i K_ti|, maximized over t) and
// Vs = |v_scale| * sum_t w_t |V_td| (value_abs_sum):
//
//  1. Logit: a D-term f32 dot product of exactly representable inputs, in any order (SIMD
//     lanes, FMA, trees), errs by at most gamma_D * sum|q_i K_i| ~= D u A/|scale|; folding
//     sm_scale*k_scale*q_scale into one f32 factor and multiplying adds 3 roundings, and
//     the max subtraction s - m one more on |s| + |m| <= 2A:  E = (D + 6) u A.
//     With a soft cap c, c*tanh(s/c) is 1-Lipschitz in s, so E passes through; the
//     division, tanh (allowed kTanhUlps ulps) and multiplication add (kTanhUlps + 4) u |c|.
//  2. Weights w_t = exp(s_t - m) / l: perturbing every logit by at most E changes each
//     normalized weight by a factor within e^(±2E), i.e. relatively by 2.01 E (E << 1).
//     Each exp errs by kExpUlps u; the online softmax rescales partial sums by at most one
//     exp and one multiply per KV block and per KV-split merge (at most n + 2 of them,
//     each kExpUlps + 1 u); the denominator is an (n + 1)-term positive sum (sinks
//     included): (n + 1) u; the normalisation one more u.
//     => relative weight error eta = 2.01 E + (kExpUlps + 1)(n + 2) u + (n + 2) u.
//  3. P·V: an n-term f32 sum, gamma_n * sum p_t |V_t| relative to Vs: n u; the v_scale
//     multiply: u.  => |f32 out - ref| <= B32 = Vs (eta + (n + 1) u) + underflow floor,
//     where the floor covers weights below the f32 normal range (flush-to-zero allowed):
//     each of the n + 1 terms may lose 2^-126 absolute, times max |V| * |v_scale|.
//  4. One cast to the output dtype: relative u_out = 2^-24 (f32) or 2^-8 (bf16: 8
//     significant bits, half its eps 2^-7):
//     bound = B32 + u_out (|ref| + B32).
// For the upstream shapes this is ~4e-3 relative for bf16 outputs and ~1e-4 for f32,
// against upstream's 0.15-0.2; typical errors are far below it (tests log the ratio).
double AttentionErrorBound(const RpaProblem& p, const ReferenceResult& ref, int64_t token,
                           int64_t head, int64_t d) {
  constexpr double u = 0x1p-24;
  constexpr double kExpUlps = 16;   // a SIMD polynomial exp: a few ulp; 16 leaves margin
  constexpr double kTanhUlps = 16;  // likewise for tanh
  const int64_t hq = p.spec.num_q_heads, dim = p.spec.head_dim;
  const double n = static_cast<double>(ref.num_visible[token]);
  const double a = ref.logit_abs_bound[token * hq + head];
  double e = (dim + 6) * u * a;
  if (p.spec.soft_cap) e += (kTanhUlps + 4) * u * std::abs(*p.spec.soft_cap);
  const double eta = 2.01 * e + (kExpUlps + 1) * (n + 2) * u + (n + 2) * u;
  const double vs = ref.value_abs_sum[(token * hq + head) * dim + d];
  // Largest finite |V| the data can hold: the sampling magnitude (saturated to the dtype).
  const double v_max = std::min<double>(p.spec.kv_magnitude, GetFInfo(p.spec.kv_dtype).max);
  const double floor = (n + 1) * 0x1p-126 * v_max * std::abs(p.spec.v_scale.value_or(1.0f));
  const double b32 = vs * (eta + (n + 1) * u) + floor;
  const double u_out = p.spec.q_dtype == DType::kFloat32 ? u : 0x1p-8;
  const double r = std::abs(ref.output[(token * hq + head) * dim + d]);
  return b32 + u_out * (r + b32);
}

OutputCheck CheckOutput(const RpaProblem& p, const ReferenceResult& ref, const void* output) {
  OutputCheck c;
  const int64_t hq = p.spec.num_q_heads, dim = p.spec.head_dim;
  const size_t elem = DTypeSize(p.spec.q_dtype);
  const auto* out = static_cast<const uint8_t*>(output);
  for (int64_t t = 0; t < p.num_scheduled_tokens(); ++t) {
    for (int64_t n = 0; n < hq; ++n) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t i = (t * hq + n) * dim + d;
        const double got = DecodeToDouble(p.spec.q_dtype, out + i * elem);
        const double want = ref.output[i];
        const double err = std::abs(got - want);
        const double bound = AttentionErrorBound(p, ref, t, n, d);
        ++c.num_checked;
        const bool ok = std::isfinite(got) && err <= bound;
        if (std::isfinite(got)) {
          c.worst_ratio = std::max(c.worst_ratio, err / bound);
          c.worst_upstream = std::max(c.worst_upstream, err / (1 + std::abs(want)));
        }
        if (!ok && c.num_bad++ == 0) {
          std::ostringstream os;
          os.precision(9);
          os << "token " << t << " head " << n << " dim " << d << ": kernel " << got
             << " reference " << want << " |diff| " << err << " bound " << bound;
          c.first_bad = os.str();
        }
      }
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// Case lists

namespace {

// Upstream's sequence lists (contract §6), as (q_len, kv_len).
const std::vector<SeqShape> kBasicSeqs = {{192, 328}, {128, 180}, {64, 255}};
const std::vector<int32_t> kDecodeKvLens = {18,   129, 597, 122, 64,   322, 463, 181,
                                            1107, 123, 31,  18,  1229, 229, 87,  1328};
const std::vector<SeqShape> kPrefillSeqs = {
    {5, 18},    {15, 129}, {120, 597}, {100, 122}, {21, 64},  {32, 322},  {251, 463}, {40, 181},
    {64, 1107}, {99, 123}, {10, 31},   {5, 18},    {3, 1229}, {120, 229}, {9, 87},    {2, 1328}};
const std::vector<SeqShape> kMixedSeqs = {
    {5, 18},   {1, 129},  {120, 597}, {1, 122}, {1, 64},   {32, 322},  {251, 463}, {1, 181},
    {1, 1107}, {99, 123}, {1, 31},    {5, 18},  {3, 1229}, {117, 229}, {1, 87},    {1, 1328}};

std::string DTypeTag(DType d) {
  switch (d) {
    case DType::kFloat32:
      return "f32";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat16:
      return "f16";
    case DType::kFloat8E4M3FN:
      return "e4m3fn";
    case DType::kFloat8E5M2:
      return "e5m2";
  }
  return "unknown";
}

// All sequences in the mixed bucket: distribution (0, 0, n), as upstream's tests do.
RpaCase MixedBucket(std::string name, std::vector<SeqShape> seqs) {
  RpaCase c;
  c.name = std::move(name);
  c.seqs = std::move(seqs);
  return c;
}

// Sequences sorted into the three buckets: q_len 1 to decode, then alternately prefill /
// mixed for the rest (so every bucket is exercised within one call).
RpaCase ThreeBuckets(std::string name, const std::vector<SeqShape>& seqs) {
  RpaCase c;
  c.name = std::move(name);
  std::vector<SeqShape> rest;
  for (const SeqShape& s : seqs) (s.q_len == 1 ? c.seqs : rest).push_back(s);
  c.num_decode = static_cast<int>(c.seqs.size());
  std::vector<SeqShape> mixed;
  for (size_t i = 0; i < rest.size(); ++i) (i % 2 == 0 ? c.seqs : mixed).push_back(rest[i]);
  c.num_prefill = static_cast<int>(c.seqs.size()) - c.num_decode;
  c.seqs.insert(c.seqs.end(), mixed.begin(), mixed.end());
  return c;
}

std::vector<SeqShape> RandomSeqs(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SeqShape> seqs;
  for (int i = 0; i < n; ++i) {
    const int32_t q = std::uniform_int_distribution<int32_t>(1, 99)(rng);
    seqs.push_back({q, q + std::uniform_int_distribution<int32_t>(0, 49)(rng)});
  }
  return seqs;
}

}  // namespace

std::vector<RpaCase> BasicCases() {
  std::vector<RpaCase> cases;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    for (bool causal : {true, false}) {
      RpaCase c = MixedBucket(DTypeTag(dt) + (causal ? "_causal" : "_noncausal"), kBasicSeqs);
      c.q_dtype = c.kv_dtype = dt;
      c.use_causal_mask = causal;
      cases.push_back(c);
    }
  }
  return cases;
}

namespace {
std::vector<RpaCase> QuantizedCases(bool with_q_scale) {
  std::vector<RpaCase> cases;
  for (DType kv : {DType::kFloat8E5M2, DType::kFloat8E4M3FN}) {
    for (bool scaled : {true, false}) {
      RpaCase c =
          MixedBucket(DTypeTag(kv) + (scaled ? "_kv_scale_0p5" : "_no_kv_scale"), kBasicSeqs);
      c.kv_dtype = kv;
      if (scaled) c.k_scale = c.v_scale = 0.5f;
      if (with_q_scale) {
        c.q_scale = 0.5f;
        c.name += "_q_scale_0p5";
      }
      cases.push_back(c);
    }
  }
  return cases;
}
}  // namespace

std::vector<RpaCase> QuantizedKvCases() { return QuantizedCases(false); }
std::vector<RpaCase> QuantizedAttentionCases() { return QuantizedCases(true); }

std::vector<RpaCase> DecodeOnlyCases() {
  RpaCase c;
  c.name = "sixteen_seqs";
  for (int32_t kv : kDecodeKvLens) c.seqs.push_back({1, kv});
  c.num_decode = static_cast<int>(c.seqs.size());
  RpaCase in_mixed = c;  // the same batch handed over as the mixed bucket
  in_mixed.name = "sixteen_seqs_in_mixed_bucket";
  in_mixed.num_decode = 0;
  return {c, in_mixed};
}

std::vector<RpaCase> PrefillOnlyCases() {
  RpaCase c;
  c.name = "sixteen_seqs";
  c.seqs = kPrefillSeqs;
  c.num_prefill = static_cast<int>(c.seqs.size());
  return {c};
}

std::vector<RpaCase> MixedCases() {
  return {MixedBucket("all_in_mixed_bucket", kMixedSeqs),
          ThreeBuckets("three_buckets", kMixedSeqs)};
}

std::vector<RpaCase> ComplexCases() {
  struct Heads {
    int q, kv;
  };
  std::vector<RpaCase> cases;
  uint64_t seed = 100;
  for (int num_seqs : {1, 17}) {
    for (Heads h : {Heads{32, 8}, Heads{12, 2}, Heads{5, 1}, Heads{3, 3}}) {
      for (int dim : {64, 80, 240}) {
        for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
          // head_dim 64 (not in upstream's complex list) only for the bf16 half.
          if (dim == 64 && dt == DType::kFloat32) continue;
          RpaCase c;
          c.name = "seqs" + std::to_string(num_seqs) + "_heads" + std::to_string(h.q) + "_" +
                   std::to_string(h.kv) + "_d" + std::to_string(dim) + "_" + DTypeTag(dt);
          c.seqs = RandomSeqs(num_seqs, ++seed);
          c.seed = seed;
          c.num_q_heads = h.q;
          c.num_kv_heads = h.kv;
          c.head_dim = dim;
          c.q_dtype = c.kv_dtype = dt;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

std::vector<RpaCase> SlidingWindowCases() {
  std::vector<RpaCase> cases;
  for (int w : {0, 5, 128}) {
    RpaCase c = MixedBucket(w ? "window" + std::to_string(w) : "no_window", kMixedSeqs);
    c.num_q_heads = c.num_kv_heads = 4;
    if (w) c.sliding_window = w;
    cases.push_back(c);
  }
  return cases;
}

std::vector<RpaCase> SoftCapCases() {
  std::vector<RpaCase> cases;
  for (float cap : {0.0f, 50.0f}) {
    RpaCase c = MixedBucket(cap != 0 ? "soft_cap_50" : "no_soft_cap", kBasicSeqs);
    c.num_q_heads = 16;
    c.num_kv_heads = 2;
    if (cap != 0) c.soft_cap = cap;
    cases.push_back(c);
  }
  return cases;
}

std::vector<RpaCase> SinksCases() {
  struct Heads {
    int q, kv;
  };
  std::vector<RpaCase> cases;
  for (int w : {5, 128}) {
    for (Heads h : {Heads{4, 4}, Heads{8, 4}, Heads{64, 8}}) {
      RpaCase c = MixedBucket("window" + std::to_string(w) + "_heads" + std::to_string(h.q) + "_" +
                                  std::to_string(h.kv),
                              kMixedSeqs);
      c.sliding_window = w;
      c.num_q_heads = h.q;
      c.num_kv_heads = h.kv;
      c.sinks_magnitude = 100.0f;
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<RpaCase> KvShareCases() {
  auto make = [](std::string name, std::vector<SeqShape> seqs, int decode, int prefill) {
    RpaCase c;
    c.name = std::move(name);
    c.seqs = std::move(seqs);
    c.num_decode = decode;
    c.num_prefill = prefill;
    c.num_q_heads = 8;
    c.num_kv_heads = 1;
    c.update_kv_cache = false;
    return c;
  };
  return {make("decode_q1_kv33", {{1, 33}}, 1, 0), make("prefill_q16_kv16", {{16, 16}}, 0, 1),
          make("mixed_q8_kv24", {{8, 24}}, 0, 0),
          make("all_buckets", {{1, 33}, {16, 16}, {8, 24}}, 1, 1)};
}

std::vector<RpaCase> HardCases() {
  std::vector<RpaCase> cases;
  auto add = [&](RpaCase c) {
    c.seed = 1000 + cases.size();
    cases.push_back(c);
  };
  {
    RpaCase c = ThreeBuckets("kv_len_1", {{1, 1}, {1, 1}, {1, 2}, {2, 2}});
    c.num_q_heads = c.num_kv_heads = 2;
    c.head_dim = 64;
    add(c);
  }
  {  // Every length around page boundaries, q_len 1 and chunks ending on a boundary.
    RpaCase c = ThreeBuckets("page_boundaries_ps16", {{1, 15},
                                                      {1, 16},
                                                      {1, 17},
                                                      {1, 32},
                                                      {1, 33},
                                                      {16, 16},
                                                      {16, 32},
                                                      {17, 33},
                                                      {15, 47},
                                                      {31, 48},
                                                      {2, 49},
                                                      {33, 64}});
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.fill = Fill::kSigned;
    c.q_magnitude = c.kv_magnitude = 2.0f;
    add(c);
  }
  {
    RpaCase c = ThreeBuckets("page_size_1", {{1, 1}, {1, 7}, {5, 5}, {3, 40}, {1, 97}, {20, 54}});
    c.page_size = 1;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 80;
    c.shuffle_pages = true;
    c.fill = Fill::kSigned;
    add(c);
  }
  {
    RpaCase c = ThreeBuckets("page_size_3_odd", {{1, 1}, {1, 8}, {4, 9}, {3, 40}, {10, 97}});
    c.page_size = 3;
    c.num_q_heads = 4;
    c.num_kv_heads = 4;
    c.head_dim = 64;
    add(c);
  }
  {  // 17 sequences, GQA (9, 3), random block tables, garbage in unused entries, padding.
    std::vector<SeqShape> seqs = RandomSeqs(17, 77);
    for (int i = 0; i < 6; ++i) seqs[i] = {1, seqs[i].kv_len + 40 * i};
    RpaCase c = ThreeBuckets("batch17_gqa9_3_random_pages", seqs);
    c.num_q_heads = 9;
    c.num_kv_heads = 3;
    c.head_dim = 64;
    c.shuffle_pages = true;
    c.garbage_page_entries = true;
    c.extra_seqs = 3;
    c.extra_pages_per_seq = 2;
    c.extra_tokens = 13;
    c.fill = Fill::kSigned;
    c.q_magnitude = c.kv_magnitude = 3.0f;
    add(c);
    c.name += "_threads1";
    c.num_threads = 1;
    add(c);
    c.name = "batch17_gqa9_3_random_pages_threads2";
    c.num_threads = 2;
    add(c);
  }
  {  // Peaked softmax (logits ~ +-10): signed data, a small soft cap, signed sinks.
    RpaCase c =
        ThreeBuckets("peaked_softcap_sinks_gqa4", {{1, 200}, {1, 3}, {40, 90}, {7, 7}, {30, 300}});
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.fill = Fill::kSigned;
    c.q_magnitude = c.kv_magnitude = 3.0f;
    c.soft_cap = 5.0f;
    c.sinks_magnitude = 4.0f;
    add(c);
    c.name = "peaked_window17_sinks_no_softcap";
    c.soft_cap.reset();
    c.sliding_window = 17;
    add(c);
  }
  {  // head_dim 18: a part vector and a scalar tail in every loop over head_dim (not a
     // multiple of 4 or 8 lanes, nor of the wide path's 4- or 8-row blocks); decode rows
     // take the direct path, the chunks of 30, 40 and 70 rows (G = 2: 60, 80 and 140 query
     // columns) the wide one, in column blocks of every width.
    RpaCase c = ThreeBuckets("head_dim_18_tails", {{1, 90}, {1, 5}, {40, 100}, {30, 70}, {70, 70}});
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 18;
    c.fill = Fill::kSigned;
    c.q_magnitude = c.kv_magnitude = 2.0f;
    add(c);
    c.name = "head_dim_18_tails_e5m2";
    c.kv_dtype = DType::kFloat8E5M2;
    add(c);
  }
  {  // head_dim 256, one KV head (G = 4), f32 queries on an fp8 cache with scales.
    RpaCase c = ThreeBuckets("d256_f32q_e4m3_scaled", {{1, 130}, {1, 1}, {12, 77}, {5, 260}});
    c.num_q_heads = 4;
    c.num_kv_heads = 1;
    c.head_dim = 256;
    c.q_dtype = DType::kFloat32;
    c.kv_dtype = DType::kFloat8E4M3FN;
    c.fill = Fill::kSigned;
    c.kv_magnitude = 400.0f;  // close to the e4m3fn max, as real calibrated caches are
    c.k_scale = 0.01f;
    c.v_scale = 0.004f;
    add(c);
  }
  {  // q_scale where q / q_scale overflows the cache range: the clip must happen.
    RpaCase c = ThreeBuckets("q_scale_clips_e4m3", {{1, 50}, {9, 40}, {3, 3}});
    c.num_q_heads = 6;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.kv_dtype = DType::kFloat8E4M3FN;
    c.fill = Fill::kSigned;
    c.q_magnitude = 300.0f;
    c.q_scale = 0.5f;  // |q / q_scale| up to 600 > 448
    c.k_scale = 0.02f;
    c.v_scale = 2.0f;
    c.sm_scale = 0.1f;  // logits of order 1
    add(c);
    c.name = "q_scale_e5m2_f32q";
    c.kv_dtype = DType::kFloat8E5M2;
    c.q_dtype = DType::kFloat32;
    c.q_scale = 3.0f;
    add(c);
  }
  {  // An f32 cache under bf16 queries, non-causal prefill with padding rows.
    RpaCase c = ThreeBuckets("noncausal_bf16q_f32kv_padding", {{1, 9}, {24, 24}, {5, 70}});
    c.kv_dtype = DType::kFloat32;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 80;
    c.use_causal_mask = false;
    c.extra_tokens = 7;
    c.extra_seqs = 1;
    c.fill = Fill::kSigned;
    add(c);
  }
  {  // KV share with GQA, an e5m2 cache and padding rows.
    RpaCase c = ThreeBuckets("kv_share_e5m2_gqa", {{1, 40}, {10, 10}, {6, 70}});
    c.kv_dtype = DType::kFloat8E5M2;
    c.num_q_heads = 6;
    c.num_kv_heads = 3;
    c.head_dim = 64;
    c.update_kv_cache = false;
    c.extra_tokens = 3;
    c.k_scale = 0.5f;
    c.v_scale = 0.25f;
    add(c);
  }
  // Head dims with a scalar remainder on every SIMD target (36 = 32 + 4, 100 = 64 + 32 +
  // 4): the elements past the last whole vector, in QK and P.V, decode (few queries per KV
  // head) and prefill rows (many), for every cache dtype.
  for (const int64_t dim : {36, 100}) {
    for (const DType kv : {DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
      RpaCase c = ThreeBuckets("head_dim_" + std::to_string(dim) + "_" + std::string(DTypeName(kv)),
                               {{1, 70}, {1, 129}, {24, 24}, {9, 90}});
      c.kv_dtype = kv;
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      c.head_dim = dim;
      c.fill = Fill::kSigned;
      add(c);
    }
  }
  {  // No sequence scheduled at all: every row is padding; nothing is read or written.
    RpaCase c;
    c.name = "no_sequences";
    c.num_q_heads = c.num_kv_heads = 2;
    c.head_dim = 64;
    c.extra_seqs = 2;
    c.extra_tokens = 4;
    add(c);
  }
  return cases;
}

std::vector<RpaCase> LongContextCases() {
  std::vector<RpaCase> cases;
  for (int threads : {1, 2}) {
    const std::string t = "_threads" + std::to_string(threads);
    {  // One long decode: only a KV split can use the second thread.
      RpaCase c;
      c.name = "decode_ctx16k_bf16" + t;
      c.seqs = {{1, 16384 + 7}};
      c.num_decode = 1;
      c.num_q_heads = 8;
      c.num_kv_heads = 2;
      c.num_threads = threads;
      c.fill = Fill::kSigned;
      c.q_magnitude = c.kv_magnitude = 2.0f;
      c.shuffle_pages = true;
      c.seed = 7;
      cases.push_back(c);
    }
    {  // fp8 with scales, a chunk of prefill at the end of a long context plus a decode.
      RpaCase c = ThreeBuckets("chunk_ctx20k_e4m3_scaled" + t, {{1, 17000}, {24, 20000}});
      c.kv_dtype = DType::kFloat8E4M3FN;
      c.num_q_heads = 4;
      c.num_kv_heads = 1;
      c.num_threads = threads;
      c.fill = Fill::kSigned;
      c.kv_magnitude = 200.0f;
      c.k_scale = 0.01f;
      c.v_scale = 0.01f;
      c.seed = 8;
      cases.push_back(c);
    }
  }
  {  // Long context with a window and sinks: the split must respect the window.
    RpaCase c;
    c.name = "decode_ctx16k_window1000_sinks_threads2";
    c.seqs = {{1, 16500}, {1, 16384}};
    c.num_decode = 2;
    c.num_q_heads = 4;
    c.num_kv_heads = 2;
    c.num_threads = 2;
    c.sliding_window = 1000;
    c.sinks_magnitude = 3.0f;
    c.fill = Fill::kSigned;
    c.q_magnitude = c.kv_magnitude = 2.0f;
    c.seed = 9;
    cases.push_back(c);
  }
  return cases;
}

}  // namespace rpa::testing
