// The KV scales file: per-layer static k_scale / v_scale for an fp8 KV cache, written by
// `rpa calibrate` and read by `rpa generate|bench-serve|eval|kv-sensitivity --kv-scales`.
// Format (JSON, versioned): docs/kv-scales.md.
//
//   {"format": "rpa-kv-scales", "version": 1, "model": "...", "kv_cache_dtype": "fp8_e4m3",
//    "layers": [{"k_scale": 0.0301, "v_scale": 0.0042, "k_amax": 13.5, "v_amax": 1.9,
//                "k_amax_per_head": [...], "v_amax_per_head": [...]}, ...],
//    "calibration": {"text": "...", "tokens": 8192, "ctx": 512, "chunks": 16}}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/kv_cache_config.h"
#include "numerics/dtype.h"

namespace rpa::cli {

inline constexpr std::string_view kKvScalesFormat = "rpa-kv-scales";
inline constexpr int kKvScalesVersion = 1;

struct KvScalesLayer {
  float k_scale = 1.0f;  // the cache stores K / k_scale
  float v_scale = 1.0f;
  // Informational (not needed to apply the file): what the scales were derived from.
  float k_amax = 0.0f;  // max |K| over the calibration tokens, all heads
  float v_amax = 0.0f;
  std::vector<float> k_amax_per_head;  // [Hkv], may be empty
  std::vector<float> v_amax_per_head;  // [Hkv], may be empty
  int32_t kv_donor = -1;               // >= 0: KV-shared layer; its scales are the donor's
};

struct KvScalesFile {
  std::string model;           // general.name (or the file name) of the calibrated model
  std::string kv_cache_dtype;  // vLLM string the scales were computed for: fp8_e4m3, ...
  std::vector<KvScalesLayer> layers;
  // Informational: where the amax came from.
  std::string calibration_text;
  int64_t calibration_tokens = 0;
  int32_t calibration_ctx = 0;
  int32_t calibration_chunks = 0;
};

// Scales from observed per-layer amax: scale = amax / max finite of `cache_dtype` (448 for
// float8_e4m3fn, 57344 for float8_e5m2), so the largest calibration value maps to the
// largest finite code. A layer whose amax is 0 (never seen non-zero) gets scale 1. A
// KV-shared layer (kv_donor >= 0) gets its donor's scales: it reads the donor's cache,
// which the donor wrote with its own scales. REQUIRES: IsFp8(cache_dtype); amax finite and
// >= 0 (throws InvalidArgument naming the layer otherwise).
void ComputeKvScales(DType cache_dtype, KvScalesFile& file);

// The file's JSON text (ends with a newline).
std::string FormatKvScalesFile(const KvScalesFile& file);

// Parses and checks a scales file. `origin` names it in messages (e.g. the path). Throws
// InvalidArgument for bad JSON, a wrong format/version, a missing or mistyped field, or a
// scale that is not finite and > 0.
KvScalesFile ParseKvScalesFile(std::string_view json, std::string_view origin);

// Reads / writes a file. Throws InvalidArgument naming the path if it cannot be read or
// written, or (reading) as ParseKvScalesFile.
KvScalesFile ReadKvScalesFile(const std::string& path);
void WriteKvScalesFile(const std::string& path, const KvScalesFile& file);

// Sets every layer's scales of `config` from `file`. Throws InvalidArgument when the layer
// counts differ (naming both) or a scale is invalid (KvCacheConfig::SetScales). Prints a
// warning on stderr when the file was computed for another cache dtype than config's, or
// when config's cache is not fp8 (scales then have no effect).
void ApplyKvScales(const KvScalesFile& file, std::string_view origin, KvCacheConfig& config);

// ReadKvScalesFile(path) then ApplyKvScales: what `--kv-scales FILE` does.
void ApplyKvScalesFile(const std::string& path, KvCacheConfig& config);

}  // namespace rpa::cli
