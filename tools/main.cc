// rpa: the command-line front end. `rpa --help` lists the subcommands.
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "tools/commands.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

// The subcommand table: add new commands here (declared in tools/commands.h).
constexpr Command kCommands[] = {
    {"version", "print rpa's version and the SIMD targets this CPU runs", RunVersion},
    {"demo", "run the main job on the default model with an fp8 KV cache", RunDemo},
    {"generate", "generate text from a GGUF model (SmolLM2 / Gemma 3), streamed", RunGenerate},
    {"bench-serve", "offline serving throughput, TTFT, ITL and KV capacity of a model", RunBenchServe},
    {"bench-model", "prefill and decode speed of a model against the measured roofline",
     RunBenchModel},
    {"bench-context", "decode tokens/s and attention's share of the step vs context length",
     RunBenchContext},
    {"bench-attention", "time the attention kernel against the measured roofline",
     RunBenchAttention},
    {"calibrate", "per-layer fp8 KV scales (max |K|, |V|) from calibration text", RunCalibrate},
    {"kv-sensitivity", "KL divergence of fp8 K/V emulated per layer and for all layers",
     RunKvSensitivity},
    {"eval", "perplexity over WikiText-2; KL divergence and top-1 vs a reference KV dtype",
     RunEval},
};

void PrintHelp() {
  std::printf(
      "rpa: a serving engine for decoder LLMs with a ragged paged attention kernel and an\n"
      "fp8 KV cache.\n\nusage: rpa <command> [options]   (rpa <command> --help for its options)\n\n"
      "commands:\n");
  for (const Command& c : kCommands) {
    std::printf("  %-18.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                static_cast<int>(c.summary.size()), c.summary.data());
  }
}

}  // namespace
}  // namespace rpa::cli

int main(int argc, char** argv) {
  using namespace rpa::cli;
  std::vector<std::string_view> words(argv + 1, argv + argc);
  if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
    PrintHelp();
    return words.empty() ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (c.name != words[0]) continue;
    try {
      return c.run(Args(words).subspan(1));
    } catch (const rpa::InvalidArgument& e) {
      std::fprintf(stderr, "rpa %s: error: %s\n", argv[1], e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rpa %s: error: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "rpa: unknown command '%s' (see rpa --help)\n", argv[1]);
  return 2;
}
