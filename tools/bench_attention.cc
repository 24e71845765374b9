// `rpa bench-attention`: a llama-bench style micro-benchmark of the attention kernel, with
// roofline figures from ceilings measured in the same process.
//
//   bytes moved = KV bytes read (every context token of every KV head, K and V, once)
//               + q read + output written + new K/V written
//   FLOPs       = 4 * D * sum over (query row, query head) of its visible KV positions
//                 (QK^T and P.V, an FMA counted as 2)
//   roofline    = max(bytes / read bandwidth, FLOPs / FMA peak)
//   roofline_fraction = roofline / median measured time
// The kernel is timed through a reused plan (RunAttention), as every layer of a serving step
// runs it; the new K/V are written into the cache on every call, as in serving.
//
// --decompose splits the time into its two bounds: the same batch is timed again with every
// page table pointing into the few pages of one KV tile, so the kernel does the same work
// on cache-resident KV (resident_ms: its compute-bound time), and memory_ms = bytes moved /
// read bandwidth is the time of the memory stream alone. overlap = (resident_ms + memory_ms
// - median_ms) / min(resident_ms, memory_ms): 1 when the stream hides under the compute
// (or the reverse), 0 when they add up.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention_kernel.h"
#include "kernels/attention_plan.h"
#include "numerics/convert.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/roofline.h"
#include "util/aligned_buffer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rpa::cli {
namespace {

constexpr char kUsage[] =
    "usage: rpa bench-attention [--mode decode|prefill|mixed]\n"
    "         [--kv-dtype bfloat16|float8_e4m3fn|float8_e5m2|float32] [--q-dtype bfloat16|float32]\n"
    "         [--seqs N] [--ctx L] [--q-len Q] [--q-heads H] [--kv-heads K] [--head-dim D]\n"
    "         [--page-size P] [--threads T] [--reps R] [--stream-mib M] [--target SIMD]\n"
    "         [--decompose] [--versus KV_DTYPE] [--json]\n"
    "  decode: N sequences of 1 new token at context L. prefill: N sequences of Q new tokens\n"
    "  ending at context L. mixed: the first half decode, the rest prefill, one batch.\n"
    "  Defaults: decode bfloat16 (q bfloat16), N=8 L=4096 Q=512 H=8 K=8 D=128 P=16, T = all\n"
    "  cores, R = as many as fit in ~2 s (at least 5), M = 1024 (read-bandwidth buffer),\n"
    "  SIMD = the best this CPU runs (or one of `rpa version`'s list, e.g. AVX2).\n"
    "  --decompose also times the batch on cache-resident KV: compute vs memory bound.\n"
    "  --versus times the same batch on a cache of another dtype too, alternating calls, and\n"
    "  reports its median and the speedup over it (robust on a busy machine).\n";

struct Flags {
  std::string mode = "decode";
  DType kv_dtype = DType::kBFloat16;
  DType q_dtype = DType::kBFloat16;
  std::optional<DType> versus;  // a second cache dtype, timed alternately with kv_dtype
  int64_t seqs = 8, ctx = 4096, q_len = 512, q_heads = 8, kv_heads = 8, head_dim = 128,
          page_size = 16;
  int threads = 0, reps = 0;
  int64_t stream_mib = 1024;
  int64_t target = 0;  // 0 = Highway's best
  bool json = false;
  bool decompose = false;
};

DType ParseKvDType(std::string_view flag, std::string_view v) {
  const auto t = TryParseDType(v);
  if (!t || *t == DType::kFloat16) {
    throw InvalidArgument(Concat(
        flag, " expects bfloat16, float8_e4m3fn, float8_e5m2 or float32, got '", v, "'"));
  }
  return *t;
}

// Returns false when --help was asked for.
bool ParseFlags(Args args, Flags& f) {
  FlagReader r(args);
  constexpr int64_t kBig = int64_t{1} << 30;
  while (r.Next()) {
    if (r.Is("--help", "-h")) return false;
    if (r.Is("--json")) {
      f.json = true;
    } else if (r.Is("--decompose")) {
      f.decompose = true;
    } else if (r.Is("--mode")) {
      const std::string_view v = r.Value();
      if (v != "decode" && v != "prefill" && v != "mixed") {
        throw InvalidArgument(Concat("--mode expects decode, prefill or mixed, got '", v, "'"));
      }
      f.mode = std::string(v);
    } else if (r.Is("--kv-dtype")) {
      f.kv_dtype = ParseKvDType("--kv-dtype", r.Value());
    } else if (r.Is("--versus")) {
      f.versus = ParseKvDType("--versus", r.Value());
    } else if (r.Is("--q-dtype")) {
      const std::string_view v = r.Value();
      const auto t = TryParseDType(v);
      if (!t || (*t != DType::kBFloat16 && *t != DType::kFloat32)) {
        throw InvalidArgument(Concat("--q-dtype expects bfloat16 or float32, got '", v, "'"));
      }
      f.q_dtype = *t;
    } else if (r.Is("--seqs")) {
      f.seqs = r.Int(1, 1 << 16);
    } else if (r.Is("--ctx")) {
      f.ctx = r.Int(1, kBig);
    } else if (r.Is("--q-len")) {
      f.q_len = r.Int(1, kBig);
    } else if (r.Is("--q-heads")) {
      f.q_heads = r.Int(1, 4096);
    } else if (r.Is("--kv-heads")) {
      f.kv_heads = r.Int(1, 4096);
    } else if (r.Is("--head-dim")) {
      f.head_dim = r.Int(1, 65536);
    } else if (r.Is("--page-size")) {
      f.page_size = r.Int(1, 1 << 20);
    } else if (r.Is("--threads")) {
      f.threads = static_cast<int>(r.Int(0, 4096));
    } else if (r.Is("--reps")) {
      f.reps = static_cast<int>(r.Int(1, 1 << 20));
    } else if (r.Is("--target")) {
      const std::string_view v = r.Value();
      for (const int64_t t : hwy::SupportedAndGeneratedTargets()) {
        if (v == hwy::TargetName(t)) f.target = t;
      }
      if (f.target == 0) {
        throw InvalidArgument(Concat("--target '", v, "' is not a SIMD target this CPU runs"));
      }
    } else if (r.Is("--stream-mib")) {
      f.stream_mib = r.Int(1, 1 << 20);
    } else {
      r.Unknown();
    }
  }
  if (f.q_heads % f.kv_heads != 0) {
    throw InvalidArgument(Concat("--q-heads ", f.q_heads, " must be a multiple of --kv-heads ",
                                 f.kv_heads));
  }
  if (f.mode != "decode" && f.q_len > f.ctx) {
    throw InvalidArgument(Concat("--q-len ", f.q_len, " must be <= --ctx ", f.ctx));
  }
  return true;
}

// A buffer of n elements of dtype t holding uniform [-1, 1) values, built from a small
// random pattern (generating every element would dominate the run time for GiB caches).
std::vector<uint8_t> RandomBytes(DType t, int64_t n, std::mt19937& rng) {
  const size_t es = DTypeSize(t);
  constexpr int64_t kPattern = 4093;  // prime, so rows do not repeat with the pattern
  std::vector<uint8_t> pattern(kPattern * es);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int64_t i = 0; i < kPattern; ++i) StoreFromF32(t, uni(rng), pattern.data() + i * es);
  std::vector<uint8_t> out(n * es);
  for (int64_t i = 0; i < n; i += kPattern) {
    std::memcpy(out.data() + i * es, pattern.data(), std::min(kPattern, n - i) * es);
  }
  return out;
}

// The new K/V, the cache, the options and the plan of one KV cache dtype.
struct KvCase {
  std::vector<uint8_t> k, v, cache;
  TensorView kv, vv, cv;
  AttentionOptions options;
  AttentionPlan plan;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int RunBenchAttention(Args args) {
  Flags f;
  if (!ParseFlags(args, f)) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (f.target != 0) hwy::SetSupportedTargetsForTest(f.target);
  // Sequence shapes: (q_len, kv_len) per sequence, decode ones first (distribution order).
  std::vector<std::pair<int64_t, int64_t>> seqs;
  int64_t num_decode = 0;
  for (int64_t i = 0; i < f.seqs; ++i) {
    const bool decode = f.mode == "decode" || (f.mode == "mixed" && i < f.seqs / 2);
    num_decode += decode;
    seqs.push_back({decode ? 1 : f.q_len, f.ctx});
  }
  const int64_t D = f.head_dim, Hq = f.q_heads, Hkv = f.kv_heads, PS = f.page_size;
  const int64_t pps = (f.ctx + PS - 1) / PS;
  const int64_t num_pages = f.seqs * pps;
  int64_t T = 0;
  for (const auto& s : seqs) T += s.first;

  std::mt19937 rng(42);
  std::vector<uint8_t> q = RandomBytes(f.q_dtype, T * Hq * D, rng);
  std::vector<uint8_t> out(T * Hq * D * DTypeSize(f.q_dtype));
  const TensorView qv = TensorView::Contiguous(q.data(), f.q_dtype, {T, Hq, D});
  const TensorView ov = TensorView::Contiguous(out.data(), f.q_dtype, {T, Hq, D});
  // New K/V and the cache of one dtype, random; the metadata is shared.
  auto fill_case = [&](KvCase& c, DType dt, std::mt19937& g) {
    c.k = RandomBytes(dt, T * Hkv * D, g);
    c.v = RandomBytes(dt, T * Hkv * D, g);
    c.cache = RandomBytes(dt, num_pages * PS * 2 * Hkv * D, g);
    c.kv = TensorView::Contiguous(c.k.data(), dt, {T, Hkv, D});
    c.vv = TensorView::Contiguous(c.v.data(), dt, {T, Hkv, D});
    c.cv = TensorView::Contiguous(c.cache.data(), dt, {num_pages, PS, 2 * Hkv, D});
    c.options.sm_scale = 1.0f / std::sqrt(static_cast<float>(D));
    if (IsFp8(dt)) c.options.k_scale = c.options.v_scale = 1.0f;  // as serving passes them
    c.options.num_threads = f.threads;
  };
  KvCase main_case;
  fill_case(main_case, f.kv_dtype, rng);
  std::vector<int32_t> kv_lens, page_indices(num_pages), cu_q_lens = {0};
  for (int64_t i = 0; i < num_pages; ++i) page_indices[i] = static_cast<int32_t>(i);
  std::shuffle(page_indices.begin(), page_indices.end(), rng);  // a fragmented page pool
  for (const auto& s : seqs) {
    kv_lens.push_back(static_cast<int32_t>(s.second));
    cu_q_lens.push_back(static_cast<int32_t>(cu_q_lens.back() + s.first));
  }
  const int32_t prefill_end = f.mode == "mixed" ? static_cast<int32_t>(num_decode)
                                                : static_cast<int32_t>(f.seqs);
  std::vector<int32_t> distribution = {static_cast<int32_t>(num_decode), prefill_end,
                                       static_cast<int32_t>(f.seqs)};
  auto plan_case = [&](const KvCase& c, const std::vector<int32_t>& table) {
    return PlanAttention(ShapeOf(qv, c.kv, c.cv), {kv_lens, table, cu_q_lens, distribution},
                         c.options);
  };
  main_case.plan = plan_case(main_case, page_indices);
  std::optional<KvCase> versus_case;
  if (f.versus) {
    std::mt19937 versus_rng(43);
    fill_case(versus_case.emplace(), *f.versus, versus_rng);
    versus_case->plan = plan_case(*versus_case, page_indices);
  }
  const int threads = main_case.plan.num_workers;

  // Warm up (first touch of the scratch, the pool's threads), then time. With --versus the
  // second cache's calls alternate with the main ones, so both see the same machine: on a
  // shared machine whose speed drifts by +-20% over minutes, only such a ratio compares.
  auto run = [&](AttentionPlan& p, const KvCase& c) {
    RunAttention(p, qv, c.kv, c.vv, c.cv, c.options, ov);
  };
  // times / cpu_times: the main cache's calls; other_times: those of `other`, if given.
  auto time_plan = [&](AttentionPlan& p, std::vector<double>& times,
                       std::vector<double>& cpu_times, KvCase* other,
                       std::vector<double>* other_times) {
    for (int i = 0; i < 2; ++i) {
      run(p, main_case);
      if (other != nullptr) run(other->plan, *other);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0;; ++r) {
      const double c0 = ProcessCpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      run(p, main_case);
      const auto t1 = std::chrono::steady_clock::now();
      cpu_times.push_back((ProcessCpuSeconds() - c0) / threads);
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
      if (other != nullptr) {
        run(other->plan, *other);
        other_times->push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
      }
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (f.reps > 0 ? r + 1 >= f.reps : (r + 1 >= 5 && elapsed > 2.0)) break;
    }
  };
  std::vector<double> times, cpu_times, versus_times;
  time_plan(main_case.plan, times, cpu_times, versus_case ? &*versus_case : nullptr,
            &versus_times);
  const double median_s = Median(times);
  const double median_cpu_s = Median(cpu_times);
  const double versus_s = versus_case ? Median(versus_times) : 0.0;

  // The same batch on cache-resident KV: page-table entry j of every sequence names the
  // page of entry j mod R of the first sequence, where R pages hold one kernel tile, so every
  // tile reads the same pages. The sequences then share pages and overwrite each other's new
  // K/V: the outputs mean nothing, the work per call is the same.
  double resident_s = 0;
  if (f.decompose) {
    const int64_t resident_pages =
        std::min(num_pages, (kAttentionTileTokens + PS - 1) / PS);
    std::vector<int32_t> resident_table(page_indices.size());
    for (size_t i = 0; i < resident_table.size(); ++i) {
      resident_table[i] = page_indices[static_cast<int64_t>(i % pps) % resident_pages];
    }
    AttentionPlan resident_plan = plan_case(main_case, resident_table);
    std::vector<double> rt, rc;
    time_plan(resident_plan, rt, rc, nullptr, nullptr);
    resident_s = Median(rt);
  }

  // Ceilings, measured after the kernel so its buffers do not compete for memory.
  const Rate stream_rate =
      MeasureReadBandwidth(threads, static_cast<size_t>(f.stream_mib) << 20, 5);
  const Rate fma_rate = MeasureFmaPeak(threads, 5);
  const double stream = stream_rate.per_wall_s, fma = fma_rate.per_wall_s;

  const double kes = static_cast<double>(DTypeSize(f.kv_dtype));
  const double qes = static_cast<double>(DTypeSize(f.q_dtype));
  double kv_bytes = 0, flops = 0;
  for (const auto& s : seqs) {
    kv_bytes += static_cast<double>(s.second) * 2 * Hkv * D * kes;
    // Causal: row r of q_len L at context K sees K - L + r + 1 positions.
    const double visible = s.first * (s.second - s.first) + s.first * (s.first + 1) / 2.0;
    flops += 4.0 * D * Hq * visible;
  }
  const double bytes = kv_bytes + 2.0 * T * Hq * D * qes + 2.0 * T * Hkv * D * kes;
  const double t_mem = bytes / stream, t_fma = flops / fma;
  const double roofline = std::max(t_mem, t_fma);
  const double fraction = roofline / median_s;
  // The same in CPU time of the workers: what the figures would be on an idle machine, as
  // far as CPU sharing goes (memory bandwidth stays shared).
  const double cpu_roofline =
      std::max(bytes / stream_rate.per_cpu_s, flops / fma_rate.per_cpu_s);
  const double cpu_fraction = cpu_roofline / median_cpu_s;
  const char* bound = t_mem >= t_fma ? "memory" : "compute";
  const double overlap =
      f.decompose ? (resident_s + t_mem - median_s) / std::min(resident_s, t_mem) : 0.0;
  // The target dispatch picks: the best one this CPU supports *and* this build compiled
  // (SupportedTargets() alone may name one Highway was not built for, e.g. AVX3_DL).
  const char* target = hwy::TargetName(f.target != 0 ? f.target
                                                     : hwy::SupportedAndGeneratedTargets()[0]);
  const std::string_view kvn = DTypeName(f.kv_dtype), qn = DTypeName(f.q_dtype);
  if (f.json) {
    std::string extra;
    if (f.decompose) {
      extra = Concat(", \"resident_ms\": ", resident_s * 1e3, ", \"memory_ms\": ", t_mem * 1e3,
                     ", \"overlap\": ", overlap);
    }
    if (f.versus) {
      extra += Concat(", \"versus_kv_dtype\": \"", DTypeName(*f.versus),
                      "\", \"versus_median_ms\": ", versus_s * 1e3,
                      ", \"speedup_vs\": ", versus_s / median_s);
    }
    std::printf(
        "{\"mode\": \"%s\", \"kv_dtype\": \"%.*s\", \"q_dtype\": \"%.*s\", \"seqs\": %lld, "
        "\"ctx\": %lld, \"q_len\": %lld, \"q_heads\": %lld, \"kv_heads\": %lld, "
        "\"head_dim\": %lld, \"page_size\": %lld, \"threads\": %d, \"target\": \"%s\", "
        "\"reps\": %zu, "
        "\"median_ms\": %.6g, \"min_ms\": %.6g, \"kv_bytes\": %.6g, \"kv_bytes_per_s\": %.6g, "
        "\"bytes_moved\": %.6g, \"flops\": %.6g, \"stream_bytes_per_s\": %.6g, "
        "\"fma_flops_per_s\": %.6g, \"roofline_ms\": %.6g, \"roofline_fraction\": %.4f, "
        "\"median_cpu_ms\": %.6g, \"cpu_stream_bytes_per_s\": %.6g, "
        "\"cpu_fma_flops_per_s\": %.6g, \"cpu_roofline_fraction\": %.4f, \"bound\": \"%s\"%s}\n",
        f.mode.c_str(), static_cast<int>(kvn.size()), kvn.data(), static_cast<int>(qn.size()),
        qn.data(), static_cast<long long>(f.seqs), static_cast<long long>(f.ctx),
        static_cast<long long>(f.mode == "decode" ? 1 : f.q_len),
        static_cast<long long>(Hq), static_cast<long long>(Hkv), static_cast<long long>(D),
        static_cast<long long>(PS), threads, target, times.size(), median_s * 1e3,
        *std::min_element(times.begin(), times.end()) * 1e3, kv_bytes, kv_bytes / median_s,
        bytes, flops, stream, fma, roofline * 1e3, fraction, median_cpu_s * 1e3,
        stream_rate.per_cpu_s, fma_rate.per_cpu_s, cpu_fraction, bound, extra.c_str());
  } else {
    std::printf("bench-attention %s kv=%.*s q=%.*s seqs=%lld ctx=%lld q_len=%lld heads=%lld/%lld "
                "D=%lld page=%lld threads=%d reps=%zu\n",
                f.mode.c_str(), static_cast<int>(kvn.size()), kvn.data(),
                static_cast<int>(qn.size()), qn.data(), static_cast<long long>(f.seqs),
                static_cast<long long>(f.ctx),
                static_cast<long long>(f.mode == "decode" ? 1 : f.q_len),
                static_cast<long long>(Hq), static_cast<long long>(Hkv),
                static_cast<long long>(D), static_cast<long long>(PS), threads, times.size());
    std::printf("  median %.3f ms (min %.3f)   KV read %.2f GB/s   %.1f GFLOP/s\n",
                median_s * 1e3, *std::min_element(times.begin(), times.end()) * 1e3,
                kv_bytes / median_s * 1e-9, flops / median_s * 1e-9);
    std::printf("  ceilings: read %.2f GB/s, FMA %.1f GFLOP/s   roofline %.3f ms (%s-bound)\n",
                stream * 1e-9, fma * 1e-9, roofline * 1e3, bound);
    std::printf("  roofline_fraction %.3f\n", fraction);
    std::printf("  per worker CPU time: median %.3f ms, read %.2f GB/s, FMA %.1f GFLOP/s, "
                "roofline_fraction %.3f\n",
                median_cpu_s * 1e3, stream_rate.per_cpu_s * 1e-9, fma_rate.per_cpu_s * 1e-9,
                cpu_fraction);
    if (f.decompose) {
      std::printf("  on cache-resident KV %.3f ms, memory stream alone %.3f ms, overlap %.2f\n",
                  resident_s * 1e3, t_mem * 1e3, overlap);
    }
    if (f.versus) {
      const std::string_view vn = DTypeName(*f.versus);
      std::printf("  versus kv=%.*s (calls alternated): median %.3f ms, %.3fx faster than it\n",
                  static_cast<int>(vn.size()), vn.data(), versus_s * 1e3, versus_s / median_s);
    }
  }
  return 0;
}

}  // namespace rpa::cli
