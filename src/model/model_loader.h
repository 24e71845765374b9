// Model loader: a GGUF file -> a Decoder, for the `llama` (SmolLM2) and `gemma3` (Gemma 3)
// architectures (../shared/docs/MODELS.md §2).
//
// Every hyper-parameter comes from the file's metadata under the architecture's prefix
// (`llama.block_count`, `gemma3.attention.sliding_window`, ...); a missing key, an
// architecture rpa cannot run, an option it does not implement (partial RoPE, logit
// soft-capping, an unknown RoPE scaling) or a tensor whose shape disagrees with the
// metadata throws rpa::ModelFormatError naming the key or tensor. The few facts GGUF does
// not record are the architecture's, as llama.cpp also hard-codes them:
//   llama   RoPE on adjacent pairs (x[2i], x[2i+1]): the GGUF converter permuted the Q/K
//           rows of the checkpoint so that this pairing equals HF's NEOX halves.
//   gemma3  NEOX-halves RoPE; every 6th layer (l % 6 == 5) global, the others local with
//           `attention.sliding_window` and base `rope.freq_base_swa` (10000 if absent);
//           QK-norm, sandwich norms, embeddings scaled by sqrt(d_model), GELU-tanh MLP,
//           softmax scale 1/sqrt(head_dim). Norm weights in the file already include
//           Gemma's "+1" (the converter added it), so RMSNorm uses them as-is
//           (weight_offset 0).
//
// Weights are dequantized to f32 ([out, in], nn.Linear layout), then packed by the decoder
// into the chosen WeightFormat: bfloat16 by default (half the bytes a memory-bound decode
// step streams; docs/weights.md has the measurements), float32 to keep the dequantized
// GGUF values exactly (the logits check against transformers uses it). The lm_head is tied
// to the embedding when the file has no `output.weight`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "model/decoder.h"
#include "model/gguf.h"

namespace rpa {

// Called as layers are read: (0, n) before the first, (i + 1, n) after layer i.
using LoadProgress = std::function<void(int32_t layers_done, int32_t num_layers)>;

struct LoadedModel {
  std::string architecture;  // general.architecture: "llama" or "gemma3"
  std::string name;          // general.name, or "" when absent
  std::unique_ptr<Decoder> decoder;
};

// Returns true iff rpa can build a decoder for `architecture`.
bool IsSupportedArchitecture(std::string_view architecture);

// The default weight format for real models.
inline constexpr WeightFormat kDefaultWeightFormat = WeightFormat::kBFloat16;

// The decoder's configuration from the metadata (and the embedding's shape, for the
// vocabulary size), with `weights` as its weight format. Cheap: reads no weights. Throws
// ModelFormatError as described above.
DecoderConfig ReadDecoderConfig(const GgufFile& file,
                                WeightFormat weights = kDefaultWeightFormat);

// Every weight of `config`'s decoder, dequantized to f32. Throws ModelFormatError for a
// missing tensor, a shape other than the config implies, or a type rpa cannot dequantize.
DecoderWeights ReadDecoderWeights(const GgufFile& file, const DecoderConfig& config,
                                  const LoadProgress& progress = nullptr);

// Opens, reads and builds. Throws InvalidArgument when the file cannot be read and
// ModelFormatError when it is not a model rpa can run.
LoadedModel LoadModel(const std::string& path, const LoadProgress& progress = nullptr,
                      WeightFormat weights = kDefaultWeightFormat);
// The same from an open file (whose tokenizer the caller may also read); rotate_qk sets
// DecoderConfig::rotate_qk. Throws ModelFormatError as above.
LoadedModel LoadModel(const GgufFile& file, const LoadProgress& progress, WeightFormat weights,
                      bool rotate_qk);

}  // namespace rpa
