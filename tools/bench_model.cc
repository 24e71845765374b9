// rpa bench-model: a real model's prefill and decode speed against this machine's two
// ceilings, measured in the same process (tools/roofline.h):
//   prefill  one P-token prompt in one step; FLOPs (2 per weight per token, plus causal
//            attention) against the FMA peak;
//   decode   B sequences at context C, one token each per step; bytes read per step (every
//            weight once, plus the B sequences' KV) against the read bandwidth.
// Times are medians over repeated steps; fractions are roofline time / measured time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/model_session.h"
#include "tools/roofline.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: rpa bench-model [-m PATH|smollm2|gemma3] [--kv-cache-dtype D] [--weights bf16|f32]\n"
    "                       [--batch 1,8,32] [--prompt-len P] [--context C] [--steps N] [--json]\n"
    "Defaults: smollm2, fp8, bf16 weights, batches 1,8,32, P 512, C 512, 8 timed steps.\n";

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int32_t> ParseList(std::string_view s) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string item(s.substr(i, j - i));
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 4096) {
      throw InvalidArgument(Concat("--batch: \"", s, "\" is not a list of sizes in [1, 4096]"));
    }
    out.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return out;
}

// Weights one token multiplies (the LM head counted separately: it runs only for the rows
// whose logits are wanted).
struct ModelCost {
  double body_weights = 0;     // per token, all layers
  double head_weights = 0;     // per logits row
  double attention_flops_per_key = 0;  // QK and PV of one query against one key, all layers
};

ModelCost CostOf(const DecoderConfig& c) {
  const double dm = c.d_model, q = double(c.num_q_heads) * c.head_dim,
               kv = double(c.num_kv_heads) * c.head_dim;
  ModelCost m;
  m.body_weights = c.num_layers * (dm * q + 2 * dm * kv + q * dm + 3 * dm * c.ffn_dim);
  m.head_weights = double(c.vocab_size) * dm;
  m.attention_flops_per_key = c.num_layers * 4.0 * q;
  return m;
}

std::vector<int32_t> SyntheticPrompt(int32_t len, int32_t seed, int32_t vocab) {
  std::vector<int32_t> p(len);
  for (int32_t j = 0; j < len; ++j) p[j] = (seed * 7919 + j * 104729) % vocab;
  return p;
}

}  // namespace

int RunBenchModel(Args args) {
  std::string model = "smollm2", kv_dtype = "fp8";
  std::vector<int32_t> batches = {1, 8, 32};
  int32_t prompt_len = 512, context = 512, steps = 8;
  WeightFormat weights = kDefaultWeightFormat;
  bool json = false;
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
    } else if (f.Is("--batch")) {
      batches = ParseList(f.Value());
    } else if (f.Is("--prompt-len")) {
      prompt_len = static_cast<int32_t>(f.Int(1, 1 << 16));
    } else if (f.Is("--context")) {
      context = static_cast<int32_t>(f.Int(1, 1 << 20));
    } else if (f.Is("--steps")) {
      steps = static_cast<int32_t>(f.Int(1, 10000));
    } else if (f.Is("--json")) {
      json = true;
    } else {
      f.Unknown();
    }
  }
  ParseKvCacheDtype(kv_dtype, DType::kFloat32);
  ModelSession session = LoadModelSession(ResolveModelPath(model), /*quiet=*/json, weights);
  Decoder& decoder = *session.model.decoder;
  const DecoderConfig& dc = decoder.config();
  const KvCacheConfig kv = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, dc.num_layers);
  const int32_t vocab = dc.vocab_size;
  const int threads = ThreadPool::Global().num_threads();
  const Rate bandwidth = MeasureReadBandwidth(threads, size_t{512} << 20, 3);
  const Rate fma = MeasureFmaPeak(threads, 3);
  const ModelCost cost = CostOf(dc);
  const double wbytes = static_cast<double>(WeightFormatBytes(weights));

  // Prefill: one prompt per engine, the whole prompt in one step; median of 3.
  std::vector<double> prefill_s;
  EngineConfig pc;
  pc.max_num_seqs = 1;
  pc.max_num_batched_tokens = prompt_len;
  pc.kv_cache_bytes = 64ull << 20;
  pc.warmup = false;
  for (int rep = 0; rep < 3; ++rep) {
    Engine engine(decoder, kv, pc);
    SamplingParams p;
    p.max_tokens = 1;
    p.ignore_eos = true;
    engine.AddRequest(SyntheticPrompt(prompt_len, rep, vocab), p);
    const auto t0 = Clock::now();
    engine.Step();
    prefill_s.push_back(Seconds(t0, Clock::now()));
  }
  const double prefill_time = Median(prefill_s);
  const double prefill_flops = 2.0 * cost.body_weights * prompt_len + 2.0 * cost.head_weights +
                               cost.attention_flops_per_key * prompt_len * (prompt_len + 1) / 2.0;
  const double prefill_fraction = prefill_flops / fma.per_wall_s / prefill_time;

  if (json) {
    std::printf("{\"model\": \"%s\", \"weights\": \"%s\", \"kv_cache_dtype\": \"%s\", "
                "\"threads\": %d, \"stream_bytes_per_s\": %.4g, \"fma_flops_per_s\": %.4g, "
                "\"prefill\": {\"prompt_len\": %d, \"median_ms\": %.3f, \"tokens_per_s\": %.1f, "
                "\"flops_per_s\": %.4g, \"fma_peak_fraction\": %.3f}, \"decode\": [",
                model.c_str(), std::string(WeightFormatName(weights)).c_str(),
                std::string(DTypeName(kv.dtype())).c_str(), threads, bandwidth.per_wall_s,
                fma.per_wall_s, prompt_len, 1e3 * prefill_time, prompt_len / prefill_time,
                prefill_flops / prefill_time, prefill_fraction);
  } else {
    std::printf("%s, %s weights, %s KV cache, %d threads\n", session.model.name.c_str(),
                std::string(WeightFormatName(weights)).c_str(),
                std::string(DTypeName(kv.dtype())).c_str(), threads);
    std::printf("machine: read bandwidth %.1f GB/s, FMA peak %.0f GFLOP/s (measured now)\n",
                bandwidth.per_wall_s / 1e9, fma.per_wall_s / 1e9);
    std::printf("prefill %d tokens: %.1f ms median, %.0f tok/s, %.1f GFLOP/s = %.2f of FMA peak\n",
                prompt_len, 1e3 * prefill_time, prompt_len / prefill_time,
                prefill_flops / prefill_time / 1e9, prefill_fraction);
  }

  // Decode: B sequences prefilled to `context`, then `steps` timed one-token steps.
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const int32_t b = batches[bi];
    EngineConfig ec;
    ec.max_num_seqs = b;
    ec.max_num_batched_tokens = std::max(512, b);
    ec.warmup = false;
    // Room for every sequence's whole run (plus a page each for rounding): no preemption.
    KvCacheSpec spec;
    spec.num_layers = dc.num_layers;
    spec.num_kv_heads = dc.num_kv_heads;
    spec.head_dim = dc.head_dim;
    spec.page_size = ec.page_size;
    spec.dtype = kv.dtype();
    spec.kv_donor = decoder.info().kv_donor;
    const uint64_t tokens = static_cast<uint64_t>(b) * (context + steps + 2 + ec.page_size);
    ec.kv_cache_bytes = tokens * spec.BytesPerToken();
    Engine engine(decoder, kv, ec);
    for (int32_t r = 0; r < b; ++r) {
      SamplingParams p;
      p.max_tokens = steps + 2;
      p.ignore_eos = true;
      engine.AddRequest(SyntheticPrompt(context, r, vocab), p);
    }
    const int64_t prompt_total = static_cast<int64_t>(b) * context;
    while (engine.stats().prompt_tokens < prompt_total || engine.stats().generated_tokens < b) {
      engine.Step();
    }
    std::vector<double> step_s;
    for (int32_t s = 0; s < steps; ++s) {
      const auto t0 = Clock::now();
      engine.Step();
      step_s.push_back(Seconds(t0, Clock::now()));
    }
    const double step = Median(step_s);
    const double kv_bytes = static_cast<double>(b) * (context + steps / 2.0) *
                            static_cast<double>(engine.kv_spec().BytesPerToken());
    const double weight_bytes = (cost.body_weights + cost.head_weights) * wbytes;
    const double step_bytes = weight_bytes + kv_bytes;
    const double fraction = step_bytes / bandwidth.per_wall_s / step;
    if (json) {
      std::printf("%s{\"batch\": %d, \"context\": %d, \"step_median_ms\": %.3f, "
                  "\"tokens_per_s\": %.1f, \"weight_bytes_per_step\": %.4g, "
                  "\"kv_bytes_per_step\": %.4g, \"bytes_per_token\": %.4g, "
                  "\"bandwidth_fraction\": %.3f}",
                  bi ? ", " : "", b, context, 1e3 * step, b / step, weight_bytes, kv_bytes,
                  step_bytes / b, fraction);
    } else {
      std::printf("decode batch %2d at context %d: %.2f ms/step, %.1f tok/s, %.1f MB/step "
                  "(weights %.1f + KV %.1f) = %.2f of read bandwidth\n",
                  b, context, 1e3 * step, b / step, step_bytes / 1e6, weight_bytes / 1e6,
                  kv_bytes / 1e6, fraction);
    }
  }
  if (json) std::printf("]}\n");
  return 0;
}

}  // namespace rpa::cli
