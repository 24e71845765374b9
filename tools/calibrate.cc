// rpa calibrate: per-layer static k/v scales for an fp8 KV cache from calibration text.
// Writes a scales file (docs/kv-scales.md) for `--kv-scales` of generate / bench-serve /
// eval. scale = max |x| over the calibration tokens / max finite of the fp8 format.
//
// The default calibration text is the license texts every Debian machine ships in
// /usr/share/common-licenses: English prose that is present offline everywhere and is not
// WikiText-2 (the evaluation text: calibrating on it would flatter the evaluation).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "eval/eval_inputs.h"
#include "layers/attention_backend.h"
#include "layers/kv_amax_backend.h"
#include "model/decoder.h"
#include "model/gguf.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/kv_calibration.h"
#include "tools/kv_scales_file.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: rpa calibrate [-m PATH|smollm2|gemma3] --kv-cache-dtype fp8|fp8_e4m3|fp8_e5m2\n"
    "                     -o SCALES.json [--text FILE]... [--ctx N] [--max-tokens N]\n"
    "                     [--weights bf16|f32] [--quiet]\n"
    "Runs calibration text through the model (f32 KV cache), records max |K| and |V| per\n"
    "layer and KV head after QK-norm and RoPE, and writes scale = amax / dtype max per layer.\n"
    "Defaults: -m smollm2, --kv-cache-dtype fp8, --ctx 512, --max-tokens 8192, --text: the\n"
    "license texts in /usr/share/common-licenses (not WikiText-2, the evaluation text).\n";

constexpr const char* kDefaultTexts[] = {"GPL-3",    "Apache-2.0", "MPL-2.0", "LGPL-2.1",
                                         "GFDL-1.3", "Artistic",   "CC0-1.0", "BSD"};
constexpr char kLicenseDir[] = "/usr/share/common-licenses";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(Concat("cannot read calibration text '", path, "'"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double Seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

}  // namespace

int RunCalibrate(Args args) {
  std::string model = "smollm2", kv_dtype = "fp8", out;
  std::vector<std::string> texts;
  KvCalibrationOptions options;
  bool quiet = false;
  WeightFormat weights = kDefaultWeightFormat;  // as served (the amax barely depends on it)
  FlagReader f(args);
  while (f.Next()) {
    if (f.Is("--help", "-h")) {
      std::printf("%s", kUsage);
      return 0;
    } else if (f.Is("--model", "-m")) {
      model = f.Value();
    } else if (f.Is("--kv-cache-dtype")) {
      kv_dtype = f.Value();
    } else if (f.Is("--output", "-o")) {
      out = f.Value();
    } else if (f.Is("--text")) {
      texts.emplace_back(f.Value());
    } else if (f.Is("--ctx")) {
      options.ctx = static_cast<int32_t>(f.Int(2, 1 << 20));
    } else if (f.Is("--max-tokens")) {
      options.max_tokens = f.Int(2, int64_t{1} << 40);
    } else if (f.Is("--weights")) {
      weights = ParseWeightFormat(f.Value());
    } else if (f.Is("--quiet", "-q")) {
      quiet = true;
    } else {
      f.Unknown();
    }
  }
  if (out.empty()) throw InvalidArgument("an output file is required (-o SCALES.json)");
  if (!IsFp8(ParseKvCacheDtype(kv_dtype, DType::kFloat32))) {
    throw InvalidArgument(Concat("--kv-cache-dtype ", kv_dtype,
                                 " is not an fp8 format; scales are for fp8, fp8_e4m3, fp8_e5m2"));
  }
  std::string label;
  if (texts.empty()) {
    for (const char* name : kDefaultTexts) {
      const std::string path = std::string(kLicenseDir) + "/" + name;
      if (!std::filesystem::exists(path)) continue;
      texts.push_back(path);
      label += (label.empty() ? std::string(kLicenseDir) + "/{" : ",") + name;
    }
    if (!label.empty()) label += "}";
    if (texts.empty()) {
      throw InvalidArgument(
          Concat("no default calibration text in ", kLicenseDir, "; give one with --text FILE"));
    }
  }
  std::string text;
  const bool default_texts = !label.empty();
  for (const std::string& t : texts) {
    text += ReadText(t);
    text += "\n\n";
    if (!default_texts) label += (label.empty() ? "" : " + ") + t;
  }

  const std::string path = ResolveModelPath(model);
  const auto start = Clock::now();
  const GgufFile file = GgufFile::Open(path);
  const DecoderConfig config = ReadDecoderConfig(file, weights);
  KernelBackend kernel;
  KvAmaxBackend observer(kernel, config.num_layers);
  Decoder decoder(config, ReadDecoderWeights(file, config), &observer);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::FromGguf(file);
  const std::string name(file.FindString("general.name").value_or(path));
  if (!quiet) std::fprintf(stderr, "loaded %s in %.2f s\n", name.c_str(), Seconds(start));

  // Tokens and BOS exactly as the evaluation takes them from WikiText.
  const std::vector<int32_t> ids = eval::TokenizeForEvaluation(*tokenizer, text);
  options.bos_token = eval::EvaluationBosToken(decoder.info(), *tokenizer);
  const auto chunks = CalibrationChunks(ids, options);
  const bool live = !quiet && isatty(fileno(stderr));
  const auto run_start = Clock::now();
  ObserveKvAmax(decoder, observer, chunks, [&](int32_t done, int32_t total) {
    if (live || (!quiet && done == total)) {
      std::fprintf(stderr, "%scalibrating: chunk %d/%d (%lld tokens) %.1f s%s", live ? "\r" : "",
                   done, total, static_cast<long long>(done) * options.ctx, Seconds(run_start),
                   done == total || !live ? "\n" : "");
      std::fflush(stderr);
    }
  });

  KvScalesFile scales = MakeKvScalesFile(observer, decoder.info(), kv_dtype);
  scales.model = name;
  scales.calibration_text = label;
  scales.calibration_tokens = static_cast<int64_t>(chunks.size()) * options.ctx;
  scales.calibration_ctx = options.ctx;
  scales.calibration_chunks = static_cast<int32_t>(chunks.size());
  WriteKvScalesFile(out, scales);
  if (!quiet) {
    std::printf("layer  k_amax     v_amax     k_scale      v_scale\n");
    for (size_t l = 0; l < scales.layers.size(); ++l) {
      const KvScalesLayer& x = scales.layers[l];
      std::printf("%5zu  %-9.4g  %-9.4g  %-11.5g  %-11.5g\n", l, x.k_amax, x.v_amax, x.k_scale,
                  x.v_scale);
    }
    std::printf("wrote %s (%zu layers, %s, the first %lld tokens of %s)\n", out.c_str(),
                scales.layers.size(), kv_dtype.c_str(),
                static_cast<long long>(scales.calibration_tokens), label.c_str());
  }
  return 0;
}

}  // namespace rpa::cli
