// KV calibration: run calibration text through a model whose attention calls go through a
// KvAmaxBackend, and turn the observed per-layer max |K| / |V| into a scales file
// (tools/kv_scales_file.h). `rpa calibrate` is this plus model loading and flags.
//
// The text is cut as the evaluation cuts WikiText (src/eval/perplexity.h): non-overlapping
// chunks of ctx tokens, each a fresh sequence whose first token is replaced by BOS when the
// model wants one, a trailing partial chunk dropped. Each chunk is one prefill through the
// engine (the serving path), over an "auto" (f32) cache so K/V are seen unquantized.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "layers/kv_amax_backend.h"
#include "model/causal_lm.h"
#include "tools/kv_scales_file.h"

namespace rpa::cli {

struct KvCalibrationOptions {
  int32_t ctx = 512;          // tokens per chunk
  int64_t max_tokens = 8192;  // at most this many tokens in all (whole chunks)
  int32_t bos_token = -1;     // >= 0: first token of every chunk
};

// Cuts `text` into chunks (see above). Throws InvalidArgument when ctx < 2, max_tokens < ctx,
// or the text holds less than one chunk.
std::vector<std::vector<int32_t>> CalibrationChunks(std::span<const int32_t> text,
                                                    const KvCalibrationOptions& options);

// Runs every chunk through `model`, whose attention backend must be `observer` (reset
// first), one prefill per chunk on an f32 cache. progress(done, total) after each chunk.
// Throws InvalidArgument if the observer did not see exactly one call per layer per
// forward pass (the layer-attribution assumption) or saw non-finite K/V.
void ObserveKvAmax(CausalLm& model, KvAmaxBackend& observer,
                   const std::vector<std::vector<int32_t>>& chunks,
                   const std::function<void(int32_t, int32_t)>& progress = nullptr);

// The observations as a scales file for `kv_cache_dtype` (a vLLM fp8 string): amax and
// per-head amax of every layer, kv donors from `info`, scales by ComputeKvScales.
KvScalesFile MakeKvScalesFile(const KvAmaxBackend& observer, const ModelInfo& info,
                              const std::string& kv_cache_dtype);

}  // namespace rpa::cli
