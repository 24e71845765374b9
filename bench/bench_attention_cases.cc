// bench_attention_cases: ragged_paged_attention on the very cases the GoogleTest matrix
// checks (tests/kernels/rpa_cases.h), so a speed figure always belongs to a shape whose
// correctness is tested. One benchmark per case: Upstream/<suite>/<case>, Long/<case>.
//
// Counters: kv_bytes_per_s = cache bytes the kernel must read per call (each sequence's
// visible K and V once) / time; pairs_per_s = (query row, head, visible position) triples
// per second. Compare medians (--benchmark_repetitions=5
// --benchmark_report_aggregates_only=true); the roofline view is `rpa bench-attention`.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ragged_paged_attention.h"
#include "tests/kernels/rpa_cases.h"

namespace rpa::testing {
namespace {

// Bytes of K and V one call reads at least, and (row, head, position) pairs it computes.
struct Work {
  double kv_bytes = 0;
  double pairs = 0;
};
Work WorkOf(const RpaCase& c) {
  Work w;
  const double row_bytes = 2.0 * c.num_kv_heads * c.head_dim * DTypeSize(c.kv_dtype);
  for (const SeqShape& s : c.seqs) {
    int64_t first_visible = 0;  // the earliest position any row of the sequence sees
    if (c.use_causal_mask && c.sliding_window) {
      first_visible = std::max<int64_t>(0, s.kv_len - s.q_len - *c.sliding_window + 1);
    }
    w.kv_bytes += (s.kv_len - first_visible) * row_bytes;
    for (int64_t r = 0; r < s.q_len; ++r) {
      const int64_t pos = s.kv_len - s.q_len + r;
      int64_t n = c.use_causal_mask ? pos + 1 : s.kv_len;
      if (c.use_causal_mask && c.sliding_window) n = std::min<int64_t>(n, *c.sliding_window);
      w.pairs += static_cast<double>(n) * c.num_q_heads;
    }
  }
  return w;
}

void RunCase(benchmark::State& state, const RpaCase& spec) {
  RpaProblem p = MakeProblem(spec);
  GuardedOutput out(spec.q_dtype, p.num_tokens, spec.num_q_heads, spec.head_dim);
  const TensorView q = p.queries_view(), k = p.keys_view(), v = p.values_view();
  const TensorView cache = p.kv_cache_view(), o = out.view();
  const AttentionMetadata md = p.metadata();
  const AttentionOptions options = p.options();
  // Rewriting the same new K/V each iteration leaves the cache as after the first call.
  for (auto _ : state) {
    RaggedPagedAttention(q, k, v, cache, md, options, o);
    benchmark::ClobberMemory();
  }
  const Work w = WorkOf(spec);
  state.counters["kv_bytes_per_s"] =
      benchmark::Counter(w.kv_bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pairs_per_s"] =
      benchmark::Counter(w.pairs, benchmark::Counter::kIsIterationInvariantRate);
}

void Register(const std::string& prefix, const std::vector<RpaCase>& cases) {
  for (const RpaCase& c : cases) {
    benchmark::RegisterBenchmark((prefix + c.name).c_str(), RunCase, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace rpa::testing

int main(int argc, char** argv) {
  using namespace rpa::testing;
  Register("Upstream/Basic/", BasicCases());
  Register("Upstream/QuantizedKv/", QuantizedKvCases());
  Register("Upstream/DecodeOnly/", DecodeOnlyCases());
  Register("Upstream/PrefillOnly/", PrefillOnlyCases());
  Register("Upstream/Mixed/", MixedCases());
  Register("Upstream/Sinks/", SinksCases());
  Register("Hard/", HardCases());
  Register("Long/", LongContextCases());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
