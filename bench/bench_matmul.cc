// MatMul (kernels/matmul.h) on projection shapes: y [T, N] = x [T, K] · w [N, K]ᵀ.
// Reports FLOP/s (2*T*N*K per call) and weight bytes/s; runs once on the best SIMD target
// and once on the lowest compiled one, so the SIMD gain is read off the same run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "kernels/matmul.h"

namespace {

void BM_MatMul(benchmark::State& state) {
  const size_t t = state.range(0), n = state.range(1), k = state.range(2);
  const bool lowest_target = state.range(3) != 0;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(t * k), w(n * k), y(t * n);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  const int64_t target = lowest_target ? targets.back() : targets.front();
  hwy::SetSupportedTargetsForTest(target);
  state.SetLabel(hwy::TargetName(target));
  for (auto _ : state) {
    rpa::MatMul(x.data(), w.data(), y.data(), t, n, k);
    benchmark::DoNotOptimize(y.data());
  }
  hwy::SetSupportedTargetsForTest(0);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * t * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_B/s"] =
      benchmark::Counter(4.0 * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// (T, N, K, lowest target): decode step, small prefill, larger prefill of a 2048-wide layer.
BENCHMARK(BM_MatMul)
    ->ArgNames({"T", "N", "K", "lowest"})
    ->Args({1, 2048, 2048, 0})
    ->Args({1, 2048, 2048, 1})
    ->Args({16, 2048, 2048, 0})
    ->Args({16, 2048, 2048, 1})
    ->Args({128, 1024, 1024, 0})
    ->Args({128, 1024, 1024, 1});

}  // namespace

BENCHMARK_MAIN();
