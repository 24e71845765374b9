// What the model-running subcommands share: resolving a model name to its GGUF file,
// loading it with a progress line, its tokenizer, and one generation through the engine
// with streamed text and timing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "kv/memory_budget.h"
#include "layers/kv_cache_config.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"

namespace rpa::cli {

// "smollm2" / "gemma3" -> the file scripts/fetch-models writes under $RPA_MODEL_DIR (else
// ~/.cache/rpa/models); anything else is taken as a path. Throws if the file is missing,
// saying how to fetch it.
std::string ResolveModelPath(std::string_view name_or_path);

struct ModelSession {
  std::string path;
  LoadedModel model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// The budget in bytes; a fraction is taken of MemAvailable (read only then).
uint64_t ResolveKvCacheBytes(const MemoryBudget& budget);

// Loads model and tokenizer, printing a progress line on stderr unless quiet. rotate_qk:
// DecoderConfig::rotate_qk (--kv-rotation hadamard).
ModelSession LoadModelSession(const std::string& path, bool quiet,
                              WeightFormat weights = kDefaultWeightFormat, bool rotate_qk = false);

// --kv-rotation: "none" -> false (the default), "hadamard" -> true (Walsh-Hadamard rotation
// of query/key heads, DecoderConfig::rotate_qk). Throws InvalidArgument otherwise.
bool ParseKvRotation(std::string_view name);

// The prompt's token ids: as chat (the model's chat template, one user turn) or plain text.
std::vector<int32_t> EncodePrompt(const ModelSession& session, std::string_view prompt, bool chat);

struct GenerationReport {
  std::vector<int32_t> tokens;
  std::string text;
  int32_t prompt_tokens = 0;
  double prompt_seconds = 0;      // until the first generated token
  double generation_seconds = 0;  // from the first generated token to the last
  FinishReason finish = FinishReason::kNone;
};

// Generates one completion; streams its text to stdout iff `stream`.
GenerationReport Generate(Engine& engine, const ModelSession& session,
                          std::vector<int32_t> prompt, const SamplingParams& params, bool stream);

// "prompt 12 tokens 150.2 tok/s | generation 32 tokens 25.1 tok/s | KV cache ..." line.
std::string SummaryLine(const GenerationReport& r, const Engine& engine);

}  // namespace rpa::cli
