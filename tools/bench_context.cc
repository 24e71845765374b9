// rpa bench-context: decode speed of a real model against context length, and attention's
// share of the step time, for one or more KV cache dtypes.
//
// For each context length C, B sequences each hold C tokens of KV in every layer and one
// decode step runs them together (B tokens, each at position C-1 over kv_len C), through the
// real decoder, kernel and cache layout: tokens/s = B / median step time. The step is
// repeated with the same kv_len (each repetition rewrites the token at C-1), so every
// timed step sees exactly C keys per sequence.
//
// What is synthetic, and why that is honest for timing: the cached K/V are not produced by
// a prefill of real text (a real prefill of 32K tokens costs many minutes on a small CPU,
// attention's quadratic part alone ~4e13 FLOPs for SmolLM2). They are random normal values
// in the cache dtype (one random page per layer, copied to every page: fp8 never NaN, bf16
// finite), so attention reads exactly the bytes, pages and block tables a real cache of
// that length has; the kernel's work does not depend on the values. Contexts beyond the
// model's trained maximum (ModelInfo::max_context) are run with the model's own weights and
// shapes — nothing in the step's cost depends on the position — and marked
// `beyond_max_context`: their timing is the model's shape at that length, their logits
// mean nothing and are not used.
//
// Several dtypes (--kv-cache-dtype bfloat16,fp8) are measured in one process with their
// steps interleaved (one step of each dtype in turn), so that load from other processes on
// a shared machine falls on every dtype alike and their ratio stays meaningful.
//
// Attention's share: the decoder's attention backend is a TimingBackend around the kernel,
// so "attention" is the ragged_paged_attention call of every layer (new K/V written to the
// cache, attention over the context); Q/K/V/O projections, quantize_kv and RoPE count as
// the rest of the step.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention_plan_cache.h"
#include "kernels/packed_weights.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_cache_storage.h"
#include "kv/memory_budget.h"
#include "layers/kv_cache_config.h"
#include "layers/timing_backend.h"
#include "model/gguf.h"
#include "model/model_loader.h"
#include "numerics/convert.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: rpa bench-context [-m PATH|smollm2|gemma3] [--kv-cache-dtype D1[,D2...]]\n"
    "                         [--contexts C1,C2,...] [--batch B] [--steps N] [--warmup W]\n"
    "                         [--page-size PS] [--weights bf16|f32] [--json]\n"
    "  Decode tokens/s of B sequences at each context length C (synthetic KV of C tokens in\n"
    "  every layer; see tools/bench_context.cc), and attention's share of the step time.\n"
    "  Several dtypes are timed in one run, their steps interleaved.\n"
    "  Defaults: smollm2, fp8, contexts 512,1024,2048,4096,8192,16384,32768, B 1, N 8, W 2,\n"
    "  PS 16, bf16 weights. Contexts past the model's maximum are run and marked\n"
    "  beyond_max_context.\n";

struct Flags {
  std::string model = "smollm2";
  std::vector<std::string> kv_dtypes = {"fp8"};
  std::vector<int32_t> contexts = {512, 1024, 2048, 4096, 8192, 16384, 32768};
  int32_t batch = 1, steps = 8, warmup = 2, page_size = 16;
  WeightFormat weights = kDefaultWeightFormat;
  bool json = false;
};

// "a,b" -> {"a", "b"}; empty items are kept (and rejected by the dtype parser).
std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// "512,1024" -> {512, 1024}. Throws naming the offending item.
std::vector<int32_t> ParseContexts(std::string_view text) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1 ||
        v > (int64_t{1} << 22)) {
      throw InvalidArgument(Concat("--contexts expects comma-separated integers in [1, ",
                                   int64_t{1} << 22, "], got '", item, "' in '", text, "'"));
    }
    out.push_back(static_cast<int32_t>(v));
    start = comma + 1;
  }
  return out;
}

// Returns false when --help was asked for.
bool ParseFlags(Args args, Flags& f) {
  FlagReader r(args);
  while (r.Next()) {
    if (r.Is("--help", "-h")) {
      std::printf("%s", kUsage);
      return false;
    } else if (r.Is("--model", "-m")) {
      f.model = r.Value();
    } else if (r.Is("--kv-cache-dtype")) {
      f.kv_dtypes = SplitCommas(r.Value());
    } else if (r.Is("--contexts")) {
      f.contexts = ParseContexts(r.Value());
    } else if (r.Is("--batch")) {
      f.batch = static_cast<int32_t>(r.Int(1, 1024));
    } else if (r.Is("--steps")) {
      f.steps = static_cast<int32_t>(r.Int(1, 100000));
    } else if (r.Is("--warmup")) {
      f.warmup = static_cast<int32_t>(r.Int(0, 100000));
    } else if (r.Is("--page-size")) {
      f.page_size = static_cast<int32_t>(r.Int(1, 4096));
    } else if (r.Is("--weights")) {
      f.weights = ParseWeightFormat(r.Value());
    } else if (r.Is("--json")) {
      f.json = true;
    } else {
      r.Unknown();
    }
  }
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Fills every storage layer with one page of random normal K/V in the cache dtype, copied
// to every page (see the file comment).
void FillSynthetic(const KvCacheStorage& storage, uint64_t seed) {
  const KvCacheSpec& spec = storage.spec();
  const size_t page_elems =
      static_cast<size_t>(spec.page_size) * 2 * spec.num_kv_heads * spec.head_dim;
  const size_t page_bytes = page_elems * DTypeSize(spec.dtype);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> f32(page_elems);
  std::vector<std::byte> page(page_bytes);
  for (int32_t l = 0; l < spec.num_layers; ++l) {
    if (!spec.OwnsStorage(l)) continue;
    for (float& x : f32) x = normal(rng);
    // |x| stays far below every dtype's max, so saturation never triggers; it only rules
    // out an fp8 NaN by construction.
    Convert(DType::kFloat32, f32.data(), spec.dtype, page.data(), page_elems, Overflow::kSaturate);
    std::byte* base = static_cast<std::byte*>(storage.Layer(l).data);
    for (int32_t p = 0; p < storage.num_pages(); ++p) {
      std::memcpy(base + static_cast<size_t>(p) * page_bytes, page.data(), page_bytes);
    }
  }
}

struct ContextResult {
  int32_t context = 0;
  bool beyond_max_context = false;
  double step_ms = 0;       // median
  double attention_ms = 0;  // median over the same steps
  double attention_share = 0;
  double tokens_per_s = 0;
  uint64_t kv_bytes_read = 0;  // per step, all layers (local layers: their window only)
  double attention_gb_per_s = 0;
};

KvCacheSpec SpecFor(const ModelInfo& info, int32_t page_size, DType dtype) {
  KvCacheSpec spec;
  spec.num_layers = info.num_layers;
  spec.num_kv_heads = info.num_kv_heads;
  spec.head_dim = info.head_dim;
  spec.page_size = page_size;
  spec.dtype = dtype;
  spec.kv_donor = info.kv_donor;
  return spec;
}

// Times decode steps at `context` for every dtype of `kvs`, interleaved; one result each.
std::vector<ContextResult> RunContext(Decoder& decoder, TimingBackend& timing,
                                      const std::vector<KvCacheConfig>& kvs, const Flags& f,
                                      int32_t context) {
  const ModelInfo& info = decoder.info();
  const int32_t b = f.batch, ps = f.page_size;
  const int32_t pages_per_seq = (context + ps - 1) / ps;
  std::vector<std::unique_ptr<KvCacheStorage>> storages;
  for (const KvCacheConfig& kv : kvs) {
    storages.push_back(
        std::make_unique<KvCacheStorage>(SpecFor(info, ps, kv.dtype()), pages_per_seq * b));
    FillSynthetic(*storages.back(), /*seed=*/context);
  }

  // One decode token per sequence; sequence s owns pages [s*PPS, (s+1)*PPS).
  std::vector<int32_t> tokens(b), positions(b, context - 1), kv_lens(b, context), rows(b);
  std::vector<int32_t> cu_q_lens(b + 1), page_indices(static_cast<size_t>(b) * pages_per_seq);
  for (int32_t s = 0; s < b; ++s) {
    tokens[s] = static_cast<int32_t>((7919LL * (s + 1)) % info.vocab_size);
    rows[s] = s;
    cu_q_lens[s + 1] = s + 1;
  }
  for (size_t i = 0; i < page_indices.size(); ++i) page_indices[i] = static_cast<int32_t>(i);
  const std::vector<int32_t> distribution = {b, b, b};
  AttentionPlanCache plans;
  StepInput in;
  in.tokens = tokens;
  in.positions = positions;
  in.batch.metadata = {kv_lens, page_indices, cu_q_lens, distribution};
  in.batch.plans = &plans;
  in.logit_rows = rows;
  std::vector<float> logits(static_cast<size_t>(b) * info.vocab_size);

  const size_t n = kvs.size();
  std::vector<std::vector<double>> step_s(n), attn_s(n);
  for (int32_t i = 0; i < f.warmup + f.steps; ++i) {
    for (size_t d = 0; d < n; ++d) {
      plans.Reset();  // as the batch builder does every step: planning is part of the step
      timing.Reset();
      const auto start = Clock::now();
      decoder.Forward(in, *storages[d], kvs[d], logits);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (i < f.warmup) continue;
      step_s[d].push_back(seconds);
      attn_s[d].push_back(timing.seconds());
    }
  }
  std::vector<ContextResult> results;
  const DecoderConfig& dc = decoder.config();
  for (size_t d = 0; d < n; ++d) {
    ContextResult r;
    r.context = context;
    r.beyond_max_context = context > info.max_context;
    r.step_ms = 1e3 * Median(step_s[d]);
    r.attention_ms = 1e3 * Median(attn_s[d]);
    double total_step = 0, total_attn = 0;
    for (size_t i = 0; i < step_s[d].size(); ++i) {
      total_step += step_s[d][i];
      total_attn += attn_s[d][i];
    }
    r.attention_share = total_attn / total_step;
    r.tokens_per_s = b / Median(step_s[d]);
    // Bytes of K/V the step's attention reads: local (sliding-window) layers see at most
    // their window, global layers the whole context.
    const uint64_t per_token_layer = SpecFor(info, ps, kvs[d].dtype()).BytesPerTokenPerLayer();
    for (int32_t l = 0; l < info.num_layers; ++l) {
      const int32_t visible = dc.IsLocal(l) ? std::min(context, dc.sliding_window) : context;
      r.kv_bytes_read += static_cast<uint64_t>(b) * visible * per_token_layer;
    }
    r.attention_gb_per_s = r.kv_bytes_read / Median(attn_s[d]) / 1e9;
    results.push_back(r);
  }
  return results;
}

}  // namespace

int RunBenchContext(Args args) {
  Flags f;
  if (!ParseFlags(args, f)) return 0;
  for (const std::string& d : f.kv_dtypes) {
    ParseKvCacheDtype(d, DType::kFloat32);  // a typo fails before the (slow) load
  }
  const std::string path = ResolveModelPath(f.model);
  const GgufFile file = GgufFile::Open(path);
  const DecoderConfig config = ReadDecoderConfig(file, f.weights);
  KernelBackend kernel;
  TimingBackend timing(kernel);
  const auto load_start = Clock::now();
  Decoder decoder(config, ReadDecoderWeights(file, config), &timing);
  const ModelInfo& info = decoder.info();
  std::vector<KvCacheConfig> kvs;
  std::vector<std::string> names;
  for (const std::string& d : f.kv_dtypes) {
    kvs.push_back(KvCacheConfig::Parse(d, DType::kFloat32, info.num_layers));
    names.emplace_back(DTypeName(kvs.back().dtype()));
  }
  if (!f.json) {
    std::fprintf(stderr,
                 "loaded %s in %.1f s: %d layers, %d kv heads x %d, max context %d, %s weights; "
                 "batch %d, %d timed steps (median) after %d warmup, dtypes interleaved\n",
                 path.c_str(), std::chrono::duration<double>(Clock::now() - load_start).count(),
                 info.num_layers, info.num_kv_heads, info.head_dim, info.max_context,
                 std::string(WeightFormatName(f.weights)).c_str(), f.batch, f.steps, f.warmup);
    std::printf("%8s %14s %10s %10s %10s %8s %10s %10s\n", "context", "KV dtype", "KV/token",
                "step ms", "attn ms", "attn %", "tok/s", "attn GB/s");
  }
  std::vector<std::vector<ContextResult>> results(kvs.size());
  for (const int32_t c : f.contexts) {
    const std::vector<ContextResult> rs = RunContext(decoder, timing, kvs, f, c);
    for (size_t d = 0; d < kvs.size(); ++d) {
      results[d].push_back(rs[d]);
      if (f.json) continue;
      const ContextResult& r = rs[d];
      std::printf(
          "%8d %14s %10s %10.2f %10.2f %7.1f%% %10.2f %10.2f%s\n", r.context, names[d].c_str(),
          FormatBytes(SpecFor(info, f.page_size, kvs[d].dtype()).BytesPerToken()).c_str(),
          r.step_ms, r.attention_ms, 100 * r.attention_share, r.tokens_per_s, r.attention_gb_per_s,
          r.beyond_max_context ? "  (beyond the model's max context: timing only)" : "");
    }
    std::fflush(stdout);
  }
  if (f.json) {
    std::printf(
        "{\"model\": \"%s\", \"batch\": %d, \"steps\": %d, \"warmup\": %d, "
        "\"page_size\": %d, \"max_context\": %d, \"weights\": \"%s\", "
        "\"kv_fill\": \"synthetic\", \"interleaved\": true, \"runs\": [",
        f.model.c_str(), f.batch, f.steps, f.warmup, f.page_size, info.max_context,
        std::string(WeightFormatName(f.weights)).c_str());
    for (size_t d = 0; d < kvs.size(); ++d) {
      std::printf(
          "%s\n {\"kv_cache_dtype\": \"%s\", \"batch\": %d, \"kv_bytes_per_token\": %llu, "
          "\"results\": [",
          d ? "," : "", names[d].c_str(), f.batch,
          static_cast<unsigned long long>(
              SpecFor(info, f.page_size, kvs[d].dtype()).BytesPerToken()));
      for (size_t i = 0; i < results[d].size(); ++i) {
        const ContextResult& r = results[d][i];
        std::printf(
            "%s\n  {\"context\": %d, \"beyond_max_context\": %s, \"step_ms_median\": %.4f, "
            "\"attention_ms_median\": %.4f, \"attention_share\": %.4f, "
            "\"decode_tokens_per_s\": %.3f, \"kv_bytes_read_per_step\": %llu, "
            "\"attention_gb_per_s\": %.3f}",
            i ? "," : "", r.context, r.beyond_max_context ? "true" : "false", r.step_ms,
            r.attention_ms, r.attention_share, r.tokens_per_s,
            static_cast<unsigned long long>(r.kv_bytes_read), r.attention_gb_per_s);
      }
      std::printf("]}");
    }
    std::printf("\n]}\n");
  }
  return 0;
}

}  // namespace rpa::cli
