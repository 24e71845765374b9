#include "tools/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tools/roofline.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rpa::cli {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of n floats with 8 independent accumulators (loads, not FMAs, are the bottleneck).
float SumFloats(const float* p, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  size_t i = 0;
  for (; i + 8 * N <= n; i += 8 * N) {
    a0 = hn::Add(a0, hn::LoadU(df, p + i));
    a1 = hn::Add(a1, hn::LoadU(df, p + i + N));
    a2 = hn::Add(a2, hn::LoadU(df, p + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(df, p + i + 3 * N));
    a4 = hn::Add(a4, hn::LoadU(df, p + i + 4 * N));
    a5 = hn::Add(a5, hn::LoadU(df, p + i + 5 * N));
    a6 = hn::Add(a6, hn::LoadU(df, p + i + 6 * N));
    a7 = hn::Add(a7, hn::LoadU(df, p + i + 7 * N));
  }
  float s = hn::GetLane(hn::SumOfLanes(
      df, hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                  hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)))));
  for (; i < n; ++i) s += p[i];
  return s;
}

// 2 * 12 * Lanes * iters FLOPs. 12 chains: FMA latency 4 cycles x 2 ports needs >= 8, and
// the slack keeps the loop counter off the critical path. Each chain starts from its own
// value: chains that start equal are one chain to the compiler, which then issues one FMA
// per step while 12 are counted (that overstated the peak 1.5x until Nov 2026).
float FmaChains(size_t iters, float seed) {
  const hn::ScalableTag<float> df;
  const auto m = hn::Set(df, 0.999999f), c = hn::Set(df, 1e-7f);
  auto start = [&](int i) { return hn::Set(df, seed + 0.001f * static_cast<float>(i)); };
  auto a0 = start(0), a1 = start(1), a2 = start(2), a3 = start(3), a4 = start(4),
       a5 = start(5), a6 = start(6), a7 = start(7), a8 = start(8), a9 = start(9),
       a10 = start(10), a11 = start(11);
  for (size_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
    a10 = hn::MulAdd(a10, m, c);
    a11 = hn::MulAdd(a11, m, c);
  }
  const auto s = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                                 hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                         hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  return hn::GetLane(hn::SumOfLanes(df, s));
}

size_t FloatLanes() { return hn::Lanes(hn::ScalableTag<float>()); }

}  // namespace HWY_NAMESPACE
}  // namespace rpa::cli
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa::cli {

HWY_EXPORT(SumFloats);
HWY_EXPORT(FmaChains);
HWY_EXPORT(FloatLanes);

namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

volatile float g_sink;  // keeps the measured loops' results alive

// Runs body() `reps` times and returns the best rates for `units` of work per run.
template <class Body>
Rate BestRate(int reps, int threads, double units, const Body& body) {
  Rate best;
  for (int r = 0; r < reps; ++r) {
    const double c0 = ProcessCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu = (ProcessCpuSeconds() - c0) / threads;
    best.per_wall_s = std::max(best.per_wall_s, units / Seconds(t0, t1));
    best.per_cpu_s = std::max(best.per_cpu_s, units / cpu);
  }
  return best;
}

}  // namespace

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Rate MeasureReadBandwidth(int threads, size_t bytes, int reps) {
  ThreadPool& pool = ThreadPool::Global();
  threads = std::clamp(threads, 1, pool.num_threads());
  const size_t n = bytes / sizeof(float);
  AlignedBuffer<float> buf(n);
  // First touch by the workers that read it, so pages are mapped before timing.
  pool.Run(threads, [&](int w) {
    const size_t b = n * w / threads, e = n * (w + 1) / threads;
    for (size_t i = b; i < e; ++i) buf[i] = static_cast<float>(i & 1023);
  });
  std::vector<float> sums(threads);
  const Rate best = BestRate(reps, threads, static_cast<double>(n * sizeof(float)), [&] {
    pool.Run(threads, [&](int w) {
      const size_t b = n * w / threads, e = n * (w + 1) / threads;
      sums[w] = HWY_DYNAMIC_DISPATCH(SumFloats)(buf.data() + b, e - b);
    });
  });
  g_sink = sums[0];
  return best;
}

Rate MeasureFmaPeak(int threads, int reps) {
  ThreadPool& pool = ThreadPool::Global();
  threads = std::clamp(threads, 1, pool.num_threads());
  const size_t lanes = HWY_DYNAMIC_DISPATCH(FloatLanes)();
  constexpr size_t kIters = 20'000'000;  // ~0.1 s per worker at ~5e9 FMA/s per core
  const double flops = 2.0 * 12 * static_cast<double>(lanes) * kIters * threads;
  std::vector<float> sums(threads);
  const Rate best = BestRate(reps, threads, flops, [&] {
    pool.Run(threads, [&](int w) {
      sums[w] = HWY_DYNAMIC_DISPATCH(FmaChains)(kIters, 1.0f + static_cast<float>(w));
    });
  });
  g_sink = sums[0];
  return best;
}

}  // namespace rpa::cli
#endif  // HWY_ONCE
