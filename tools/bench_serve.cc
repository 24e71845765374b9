// rpa bench-serve: offline serving throughput of a real model through the engine. N
// requests of P synthetic prompt tokens and G generated tokens (EOS ignored, so lengths are
// fixed) are queued at once; reports tokens/s, time to first token, inter-token latency and
// how the KV cache coped (peak concurrent sequences, preemptions).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "kv/memory_budget.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/kv_scales_file.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: rpa bench-serve [-m PATH|smollm2|gemma3] [--kv-cache-dtype D] [--kv-scales FILE]\n"
    "                       [--kv-cache-memory SIZE]\n"
    "                       [--requests N] [--prompt-len P] [--gen-len G] [--max-num-seqs S]\n"
    "                       [--max-num-batched-tokens B] [--weights bf16|f32]\n"
    "                       [--kv-rotation none|hadamard] [--json]\n"
    "Defaults: smollm2, fp8, 256MiB, 8 requests, P 128, G 64, S 32, B 512, bf16 weights,\n"
    "--kv-rotation none.\n";

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int RunBenchServe(Args args) {
  std::string model = "smollm2", kv_dtype = "fp8", kv_memory = "256MiB";
  int32_t requests = 8, prompt_len = 128, gen_len = 64;
  EngineConfig config;
  bool json = false, rotate_qk = false;
  std::string kv_scales;  // per-layer fp8 scales from `rpa calibrate` (docs/kv-scales.md)
  WeightFormat weights = kDefaultWeightFormat;
  FlagReader f(args);
  while (f.Next()) {
    if (f.Is("--help", "-h")) {
      std::printf("%s", kUsage);
      return 0;
    } else if (f.Is("--model", "-m")) {
      model = f.Value();
    } else if (f.Is("--kv-cache-dtype")) {
      kv_dtype = f.Value();
    } else if (f.Is("--weights")) {
      weights = ParseWeightFormat(f.Value());
    } else if (f.Is("--kv-rotation")) {
      rotate_qk = ParseKvRotation(f.Value());
    } else if (f.Is("--kv-scales")) {
      kv_scales = f.Value();
    } else if (f.Is("--kv-cache-memory")) {
      kv_memory = f.Value();
    } else if (f.Is("--requests")) {
      requests = static_cast<int32_t>(f.Int(1, 100000));
    } else if (f.Is("--prompt-len")) {
      prompt_len = static_cast<int32_t>(f.Int(1, 1 << 20));
    } else if (f.Is("--gen-len")) {
      gen_len = static_cast<int32_t>(f.Int(1, 1 << 20));
    } else if (f.Is("--max-num-seqs")) {
      config.max_num_seqs = static_cast<int32_t>(f.Int(1, 4096));
    } else if (f.Is("--max-num-batched-tokens")) {
      config.max_num_batched_tokens = static_cast<int32_t>(f.Int(1, 1 << 20));
    } else if (f.Is("--json")) {
      json = true;
    } else {
      f.Unknown();
    }
  }
  const MemoryBudget budget = ParseMemoryBudget(kv_memory);
  ParseKvCacheDtype(kv_dtype, DType::kFloat32);
  ModelSession session =
      LoadModelSession(ResolveModelPath(model), /*quiet=*/json, weights, rotate_qk);
  Decoder& decoder = *session.model.decoder;
  KvCacheConfig kv = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, decoder.info().num_layers);
  if (!kv_scales.empty()) ApplyKvScalesFile(kv_scales, kv);
  config.kv_cache_bytes = ResolveKvCacheBytes(budget);
  Engine engine(decoder, kv, config);
  if (!json) std::fprintf(stderr, "%s\n", engine.capacity_line().c_str());

  // Synthetic prompts: deterministic ids spread over the vocabulary (no specials needed).
  const int32_t vocab = decoder.info().vocab_size;
  std::vector<Clock::time_point> last(requests);
  std::vector<double> ttft, itl;
  const auto start = Clock::now();
  for (int32_t r = 0; r < requests; ++r) {
    std::vector<int32_t> prompt(prompt_len);
    for (int32_t j = 0; j < prompt_len; ++j) prompt[j] = (r * 7919 + j * 104729) % vocab;
    SamplingParams p;
    p.max_tokens = gen_len;
    p.ignore_eos = true;
    engine.AddRequest(std::move(prompt), p, [&, r](const TokenEvent& e) {
      const auto now = Clock::now();
      const double since = std::chrono::duration<double>(now - (e.index == 0 ? start : last[r])).count();
      (e.index == 0 ? ttft : itl).push_back(since);
      last[r] = now;
    });
  }
  engine.RunUntilDone();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const EngineStats& s = engine.stats();
  const double gen_tps = s.generated_tokens / seconds;
  const double total_tps = (static_cast<double>(requests) * prompt_len + s.generated_tokens) / seconds;
  if (json) {
    std::printf(
        "{\"model\": \"%s\", \"kv_cache_dtype\": \"%s\", \"requests\": %d, \"prompt_len\": %d, "
        "\"gen_len\": %d, \"seconds\": %.4f, \"generated_tokens_per_s\": %.2f, "
        "\"total_tokens_per_s\": %.2f, \"ttft_median_ms\": %.2f, \"ttft_p99_ms\": %.2f, "
        "\"itl_median_ms\": %.2f, \"itl_p99_ms\": %.2f, \"peak_concurrent_seqs\": %d, "
        "\"preemptions\": %lld, \"kv_capacity_tokens\": %lld, \"kv_bytes_per_token\": %llu, "
        "\"kv_capacity_pages\": %d, \"page_size\": %d, \"kv_cache_bytes\": %llu, "
        "\"max_num_seqs\": %d, \"max_num_batched_tokens\": %d, \"steps\": %lld, "
        "\"prompt_tokens_computed\": %lld, \"weights\": \"%s\", \"kv_rotation\": \"%s\"}\n",
        model.c_str(), std::string(DTypeName(kv.dtype())).c_str(), requests, prompt_len, gen_len,
        seconds, gen_tps, total_tps, 1e3 * Percentile(ttft, 0.5), 1e3 * Percentile(ttft, 0.99),
        1e3 * Percentile(itl, 0.5), 1e3 * Percentile(itl, 0.99), s.peak_running,
        static_cast<long long>(s.preemptions), static_cast<long long>(engine.kv_plan().num_tokens()),
        static_cast<unsigned long long>(engine.kv_spec().BytesPerToken()),
        engine.kv_plan().num_pages, engine.kv_plan().page_size,
        static_cast<unsigned long long>(engine.kv_plan().budget_bytes), config.max_num_seqs,
        config.max_num_batched_tokens, static_cast<long long>(s.steps),
        static_cast<long long>(s.prompt_tokens), std::string(WeightFormatName(weights)).c_str(),
        rotate_qk ? "hadamard" : "none");
  } else {
    std::printf(
        "%d requests x (%d prompt + %d generated) in %.2f s: %.1f generated tok/s, %.1f total tok/s\n"
        "TTFT median %.1f ms p99 %.1f ms | ITL median %.1f ms p99 %.1f ms | peak %d concurrent "
        "sequences, %lld preemptions\n"
        "KV cache %d pages = %lld tokens | %lld prompt tokens computed (recomputation "
        "included) in %lld steps\n",
        requests, prompt_len, gen_len, seconds, gen_tps, total_tps, 1e3 * Percentile(ttft, 0.5),
        1e3 * Percentile(ttft, 0.99), 1e3 * Percentile(itl, 0.5), 1e3 * Percentile(itl, 0.99),
        s.peak_running, static_cast<long long>(s.preemptions), engine.kv_plan().num_pages,
        static_cast<long long>(engine.kv_plan().num_tokens()),
        static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.steps));
  }
  return 0;
}

}  // namespace rpa::cli
