// MatMul (kernels/matmul.h) on the real models' projection shapes: y [T, N] = x [T, K] · wᵀ
// with w [N, K] packed as f32 or bf16. Wall-clock rates (the pool's threads work while the
// caller waits): FLOP/s = 2*T*N*K per call, weight_B/s = the packed matrix's bytes per call.
// Decode (T = 1, 8, 32) is bounded by weight bytes/s against the memory bandwidth; prefill
// (T = 512) by FLOP/s against the FMA peak (`rpa bench-attention` prints both for this machine).
// FLOP/cpu_s divides by the process's CPU time instead: per-core efficiency. peak_frac and
// cpu_peak_frac relate both to the FMA peak measured at start-up (tools/roofline.h).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <ctime>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "tools/roofline.h"
#include "util/thread_pool.h"

namespace {

// The FMA peak of all pool threads, measured once in this process (best of 5).
const rpa::cli::Rate& FmaPeak() {
  static const rpa::cli::Rate peak =
      rpa::cli::MeasureFmaPeak(rpa::ThreadPool::Global().num_threads(), 5);
  return peak;
}

void BM_MatMul(benchmark::State& state) {
  const size_t t = state.range(0), n = state.range(1), k = state.range(2);
  const auto format = state.range(3) ? rpa::WeightFormat::kBFloat16 : rpa::WeightFormat::kFloat32;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(t * k), w(n * k), y(t * n);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  const rpa::PackedWeights packed(w.data(), n, k, format);
  state.SetLabel(std::string(rpa::WeightFormatName(format)));
  const double cpu0 = rpa::cli::ProcessCpuSeconds();
  for (auto _ : state) {
    rpa::MatMul(x.data(), packed, y.data(), t);
    benchmark::DoNotOptimize(y.data());
  }
  // Per CPU second of the whole process (all pool threads): what a core achieves while it
  // runs, which other load on a shared machine disturbs far less than wall time.
  const double cpu_s = rpa::cli::ProcessCpuSeconds() - cpu0;
  state.counters["FLOP/cpu_s"] = 2.0 * t * n * k * state.iterations() / cpu_s;
  // Fractions of the FMA peak, each against the peak measured the same way (per wall second
  // of all threads; per CPU second of a thread).
  state.counters["peak_frac"] = benchmark::Counter(
      2.0 * t * n * k / FmaPeak().per_wall_s, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cpu_peak_frac"] =
      2.0 * t * n * k * state.iterations() / cpu_s /
      (FmaPeak().per_cpu_s / rpa::ThreadPool::Global().num_threads());
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * t * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_B/s"] = benchmark::Counter(
      static_cast<double>(packed.bytes()), benchmark::Counter::kIsIterationInvariantRate);
}

// (T, N, K, bf16): SmolLM2's MLP up (1536 x 576) and down (576 x 1536) at decode batch 1, 8,
// 32 and at a 512-token prefill; its LM head (49152 x 576) at decode.
void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t bf16 : {0, 1}) {
    for (int64_t t : {1, 8, 32, 512}) {
      b->Args({t, 1536, 576, bf16});
      b->Args({t, 576, 1536, bf16});
    }
    b->Args({1, 49152, 576, bf16});
  }
}

BENCHMARK(BM_MatMul)->ArgNames({"T", "N", "K", "bf16"})->Apply(Shapes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
