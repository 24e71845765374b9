// What an evaluation run starts from: the text file (found by walking up from a few
// directories), its tokens, the BOS decision, and the model — the latter optionally built
// around a caller's AttentionBackend so that tests can run a whole model over a faulty
// attention path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layers/attention_backend.h"
#include "model/decoder.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"

namespace rpa::eval {

// WikiText-2's test split, relative to the project root (../shared/docs/MODELS.md §5).
inline constexpr std::string_view kWikiTextRelativePath =
    "../shared/data/wikitext-2-raw/wiki.test.raw";

// The first existing `dir / relative` for dir = each start, then its parents, up to the
// root; "" if none exists.
std::string FindFileUpwards(std::string_view relative,
                            std::span<const std::filesystem::path> starts);

// The whole file. Throws InvalidArgument naming the path when it cannot be read.
std::string ReadTextFile(const std::string& path);

// The text's tokens as perplexity evaluations use them: plain text, no chat template, no
// BOS/EOS added, control-token text not parsed.
std::vector<int32_t> TokenizeForEvaluation(const Tokenizer& tokenizer, std::string_view text);

// The token that replaces each chunk's first token: the model's BOS iff the tokenizer's
// metadata asks for it (tokenizer.ggml.add_bos_token; Gemma 3 yes, SmolLM2 no), else -1.
int32_t EvaluationBosToken(const ModelInfo& info, const Tokenizer& tokenizer);

// A decoder from a GGUF file whose attention layers dispatch to `backend` (not owned, must
// outlive the decoder; null: rpa's kernel), weights stored as `weights`. Throws as LoadModel.
std::unique_ptr<Decoder> LoadDecoder(const std::string& gguf_path, AttentionBackend* backend,
                                     WeightFormat weights = kDefaultWeightFormat,
                                     const LoadProgress& progress = nullptr);

}  // namespace rpa::eval
