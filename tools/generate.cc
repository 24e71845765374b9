// rpa generate: one completion from a real model, streamed, then a summary line.
#include <cstdio>
#include <string>

#include "kv/memory_budget.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/kv_scales_file.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

constexpr char kUsage[] =
    "usage: rpa generate [-m PATH|smollm2|gemma3] -p PROMPT [-n N] [--chat]\n"
    "                    [--kv-cache-dtype auto|bfloat16|fp8|fp8_e4m3|fp8_e5m2]\n"
    "                    [--kv-scales FILE] [--kv-cache-memory SIZE] [--temperature T]\n"
    "                    [--top-k K] [--top-p P]\n"
    "                    [--seed S] [--weights bf16|f32] [--kv-rotation none|hadamard]\n"
    "                    [--quiet]\n"
    "Defaults: -m smollm2 (SmolLM2-135M-Instruct), -n 64, --kv-cache-dtype fp8 (e4m3fn),\n"
    "--kv-cache-memory 256MiB, greedy (temperature 0), bf16 weights, --kv-rotation none.\n"
    "SIZE: 2GiB, 512MiB, 0.5 or 50% of free RAM.\n";

}  // namespace

int RunGenerate(Args args) {
  std::string model = "smollm2", prompt, kv_dtype = "fp8", kv_memory = "256MiB";
  std::string kv_scales;  // per-layer fp8 scales from `rpa calibrate` (docs/kv-scales.md)
  bool chat = false, quiet = false, have_prompt = false, rotate_qk = false;
  SamplingParams params;
  params.max_tokens = 64;
  WeightFormat weights = kDefaultWeightFormat;
  FlagReader f(args);
  while (f.Next()) {
    if (f.Is("--help", "-h")) {
      std::printf("%s", kUsage);
      return 0;
    } else if (f.Is("--model", "-m")) {
      model = f.Value();
    } else if (f.Is("--prompt", "-p")) {
      prompt = f.Value();
      have_prompt = true;
    } else if (f.Is("--n-predict", "-n")) {
      params.max_tokens = static_cast<int32_t>(f.Int(1, 1 << 20));
    } else if (f.Is("--chat")) {
      chat = true;
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
    } else if (f.Is("--temperature")) {
      params.temperature = static_cast<float>(f.Float(0, 100));
    } else if (f.Is("--top-k")) {
      params.top_k = static_cast<int32_t>(f.Int(0, 1 << 30));
    } else if (f.Is("--top-p")) {
      params.top_p = static_cast<float>(f.Float(0, 1));
    } else if (f.Is("--seed")) {
      params.seed = static_cast<uint64_t>(f.Int(0, INT64_MAX));
    } else if (f.Is("--quiet", "-q")) {
      quiet = true;
    } else {
      f.Unknown();
    }
  }
  if (!have_prompt) throw InvalidArgument("a prompt is required (-p PROMPT)");
  // Parse every string before the (slow) load, so a typo fails at once.
  const MemoryBudget budget = ParseMemoryBudget(kv_memory);
  ParseKvCacheDtype(kv_dtype, DType::kFloat32);

  ModelSession session = LoadModelSession(ResolveModelPath(model), quiet, weights, rotate_qk);
  Decoder& decoder = *session.model.decoder;
  KvCacheConfig kv = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, decoder.info().num_layers);
  if (!kv_scales.empty()) ApplyKvScalesFile(kv_scales, kv);
  EngineConfig config;
  config.max_num_seqs = 1;
  config.kv_cache_bytes = ResolveKvCacheBytes(budget);
  Engine engine(decoder, kv, config);
  if (!quiet) std::fprintf(stderr, "%s\n", engine.capacity_line().c_str());

  std::vector<int32_t> ids = EncodePrompt(session, prompt, chat);
  if (!quiet) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    if (chat) std::printf("\n");
  }
  const GenerationReport r = Generate(engine, session, std::move(ids), params, /*stream=*/true);
  std::fprintf(stderr, "%s\n", SummaryLine(r, engine).c_str());
  return 0;
}

}  // namespace rpa::cli
