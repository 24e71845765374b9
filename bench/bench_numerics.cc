// Bulk Convert throughput beside memcpy of the same source bytes, in the same run.
//
// Bytes processed = bytes read + bytes written, for the conversions and for memcpy alike,
// so "ratio to memcpy" is the fraction of copy bandwidth a conversion reaches. Sizes are
// source bytes: 64 KiB (in L2) and 64 MiB (out of cache). Report medians:
//   build/bin/bench_numerics --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/convert.h"

namespace rpa {
namespace {

constexpr int64_t kInCache = 64 << 10;
constexpr int64_t kOutOfCache = 64 << 20;

// Source bytes of `from` holding N(0, 4) values, typical of K/V activations.
std::vector<uint8_t> MakeSource(DType from, size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> f(n);
  for (float& x : f) x = normal(rng);
  std::vector<uint8_t> out(n * DTypeSize(from));
  Convert(DType::kFloat32, f.data(), from, out.data(), n);
  return out;
}

void BM_Convert(benchmark::State& state, DType from, DType to) {
  const auto src_bytes = static_cast<size_t>(state.range(0));
  const size_t n = src_bytes / DTypeSize(from);
  const std::vector<uint8_t> src = MakeSource(from, n);
  std::vector<uint8_t> dst(n * DTypeSize(to), 1);
  for (auto _ : state) {
    Convert(from, src.data(), to, dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.size() + dst.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(bytes, 3), dst(bytes, 1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

#define RPA_BENCH_CONVERT(name, from, to) \
  BENCHMARK_CAPTURE(BM_Convert, name, from, to)->Arg(kInCache)->Arg(kOutOfCache)

BENCHMARK(BM_Memcpy)->Arg(kInCache)->Arg(kOutOfCache);
RPA_BENCH_CONVERT(bf16_to_e4m3fn, DType::kBFloat16, DType::kFloat8E4M3FN);
RPA_BENCH_CONVERT(bf16_to_e5m2, DType::kBFloat16, DType::kFloat8E5M2);
RPA_BENCH_CONVERT(f32_to_e4m3fn, DType::kFloat32, DType::kFloat8E4M3FN);
RPA_BENCH_CONVERT(f32_to_e5m2, DType::kFloat32, DType::kFloat8E5M2);
RPA_BENCH_CONVERT(e4m3fn_to_f32, DType::kFloat8E4M3FN, DType::kFloat32);
RPA_BENCH_CONVERT(e5m2_to_f32, DType::kFloat8E5M2, DType::kFloat32);
RPA_BENCH_CONVERT(f32_to_bf16, DType::kFloat32, DType::kBFloat16);

}  // namespace
}  // namespace rpa

BENCHMARK_MAIN();
