#include "tools/model_session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include "model/chat_template.h"
#include "model/gguf.h"
#include "model/tokenizer_stream.h"
#include "kv/memory_budget.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string ResolveModelPath(std::string_view name) {
  std::string file;
  if (name == "smollm2") file = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (name == "gemma3") file = "gemma-3-270m-q4_k_m.gguf";
  if (file.empty()) {
    if (!std::filesystem::exists(std::string(name))) {
      throw InvalidArgument(Concat("model file '", name, "' does not exist (use a path, or "
                                   "smollm2 / gemma3)"));
    }
    return std::string(name);
  }
  // The model cache is a CLI-level setting: read here, at the edge, never in the core.
  std::filesystem::path dir;
  if (const char* env = std::getenv("RPA_MODEL_DIR"); env && *env) {
    dir = env;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::filesystem::path(home) / ".cache" / "rpa" / "models";
  } else {
    throw InvalidArgument("neither RPA_MODEL_DIR nor HOME is set: cannot find the model cache");
  }
  const std::filesystem::path path = dir / file;
  if (!std::filesystem::exists(path)) {
    throw InvalidArgument(Concat("model '", name, "' is not in ", dir.string(),
                                 "; fetch it with: python3 scripts/fetch-models ", name));
  }
  return path.string();
}

uint64_t ResolveKvCacheBytes(const MemoryBudget& budget) {
  return ResolveMemoryBudget(
      budget, budget.kind == MemoryBudget::Kind::kBytes ? 0 : ReadMemAvailableBytes());
}

bool ParseKvRotation(std::string_view name) {
  if (name == "none") return false;
  if (name == "hadamard") return true;
  throw InvalidArgument(Concat("--kv-rotation ", name, " is not one of: none, hadamard"));
}

ModelSession LoadModelSession(const std::string& path, bool quiet, WeightFormat weights,
                              bool rotate_qk) {
  ModelSession s;
  s.path = path;
  const auto start = Clock::now();
  // A live progress line on a terminal; in a log, only the final "loaded" line.
  const bool live = !quiet && isatty(fileno(stderr));
  const LoadProgress progress = [&](int32_t done, int32_t total) {
    if (live) {
      std::fprintf(stderr, "\rloading %s: layer %d/%d", path.c_str(), done, total);
      std::fflush(stderr);
    }
  };
  const GgufFile file = GgufFile::Open(path);
  s.model = LoadModel(file, progress, weights, rotate_qk);
  s.tokenizer = Tokenizer::FromGguf(file);
  if (!quiet) {
    std::fprintf(stderr, "%sloaded %s (%s, %s, %s weights) in %.2f s\n",
                 live ? "\r" : "", s.model.name.empty() ? path.c_str() : s.model.name.c_str(),
                 s.model.architecture.c_str(), path.c_str(),
                 std::string(WeightFormatName(weights)).c_str(), Seconds(start, Clock::now()));
  }
  return s;
}

std::vector<int32_t> EncodePrompt(const ModelSession& session, std::string_view prompt, bool chat) {
  if (!chat) return session.tokenizer->Encode(prompt, /*add_special=*/true, /*parse_special=*/false);
  const ChatTemplate tmpl = ChatTemplate::ForTokenizer(*session.tokenizer);
  const ChatMessage messages[] = {{"user", std::string(prompt)}};
  const std::string text = tmpl.Apply(messages, /*add_generation_prompt=*/true);
  return session.tokenizer->Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

GenerationReport Generate(Engine& engine, const ModelSession& session,
                          std::vector<int32_t> prompt, const SamplingParams& params, bool stream) {
  GenerationReport r;
  r.prompt_tokens = static_cast<int32_t>(prompt.size());
  TokenTextStream text(*session.tokenizer);
  Clock::time_point first, last;
  const auto start = Clock::now();
  const int64_t id = engine.AddRequest(std::move(prompt), params, [&](const TokenEvent& e) {
    last = Clock::now();
    if (e.index == 0) first = last;
    // The EOS token ends the text; it is not part of it.
    if (e.finish == FinishReason::kEos) return;
    const std::string piece = text.Push(e.token);
    r.text += piece;
    if (stream) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  });
  auto results = engine.RunUntilDone();
  const std::string tail = text.Flush();
  r.text += tail;
  if (stream) {
    std::printf("%s\n", tail.c_str());
    std::fflush(stdout);
  }
  r.tokens = results[id].generated;
  r.finish = results[id].finish;
  r.prompt_seconds = Seconds(start, first);
  r.generation_seconds = Seconds(first, last);
  return r;
}

std::string SummaryLine(const GenerationReport& r, const Engine& engine) {
  const double prompt_tps = r.prompt_seconds > 0 ? r.prompt_tokens / r.prompt_seconds : 0;
  const size_t n = r.tokens.size();
  const double gen_tps = n > 1 && r.generation_seconds > 0 ? (n - 1) / r.generation_seconds : 0;
  char line[512];
  std::snprintf(line, sizeof line,
                "prompt %d tokens %.1f tok/s | generation %zu tokens %.1f tok/s (%s) | KV cache "
                "%s, %s/token, capacity %lld tokens",
                r.prompt_tokens, prompt_tps, n, gen_tps,
                std::string(FinishReasonName(r.finish)).c_str(),
                std::string(DTypeName(engine.kv_spec().dtype)).c_str(),
                FormatBytes(engine.kv_spec().BytesPerToken()).c_str(),
                static_cast<long long>(engine.kv_plan().num_tokens()));
  return line;
}

}  // namespace rpa::cli
