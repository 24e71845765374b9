// rpa demo: the main job on the default model. One greedy chat completion from
// SmolLM2-135M-Instruct with an fp8 (e4m3fn) KV cache, and the same with a bf16 cache
// beside it, so the two can be compared by eye (and are compared token by token).
#include <cstdio>

#include "tools/commands.h"
#include "tools/model_session.h"

namespace rpa::cli {
namespace {

constexpr char kPrompt[] = "What is the capital of France? Answer in one sentence.";

}  // namespace

int RunDemo(Args) {
  ModelSession session = LoadModelSession(ResolveModelPath("smollm2"), /*quiet=*/false);
  Decoder& decoder = *session.model.decoder;
  SamplingParams greedy;
  greedy.max_tokens = 48;
  std::printf("prompt: %s\n", kPrompt);
  std::vector<int32_t> out[2];
  const char* dtypes[] = {"fp8", "bfloat16"};
  for (int i = 0; i < 2; ++i) {
    const KvCacheConfig kv =
        KvCacheConfig::Parse(dtypes[i], DType::kFloat32, decoder.info().num_layers);
    EngineConfig config;
    config.max_num_seqs = 1;
    Engine engine(decoder, kv, config);
    std::printf("\n--- KV cache %s ---\n%s\n", std::string(DTypeName(kv.dtype())).c_str(),
                engine.capacity_line().c_str());
    const GenerationReport r = Generate(engine, session, EncodePrompt(session, kPrompt, true),
                                        greedy, /*stream=*/true);
    std::printf("%s\n", SummaryLine(r, engine).c_str());
    out[i] = r.tokens;
  }
  size_t same = 0;
  while (same < out[0].size() && same < out[1].size() && out[0][same] == out[1][same]) ++same;
  std::printf("\nfp8 and bf16 KV caches agree on the first %zu of %zu greedy tokens.\n", same,
              std::max(out[0].size(), out[1].size()));
  return 0;
}

}  // namespace rpa::cli
