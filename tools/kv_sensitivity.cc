// rpa kv-sensitivity: which layers, and K or V, an fp8 KV cache hurts. One reference pass
// over the evaluation chunks with a bf16 (or f32) cache, then one pass per variant with
// FakeQuantBackend emulating fp8 on part of the model over the same cache dtype:
//   all:K, all:V, all:KV   every layer, keys only / values only / both
//   layer:L               layer L only, keys and values
//   layer:L:K, layer:L:V  layer L only, keys / values only (--split-kv)
//   fp8-cache             the real thing: an fp8 cache with the same scales, every layer
//                         (differs from all:KV over a bf16 base only by the double rounding
//                         described in src/layers/fake_quant_backend.h)
//   all:KV-keep:N         every layer but the first N of --keep-layers (they stay in the
//                         base dtype), for N = 1, 2, 4, ... and the whole list
//   rotation-only         (--rotate-qk) the Hadamard rotation of q/k alone, no fp8
// Each variant is compared with the reference over the same tokens (src/eval: mean KL
// divergence of the next-token distributions, top-1 agreement, ΔPPL). Every variant differs
// from the reference in the emulated tensors only, so its KLD is theirs alone.
// --rotate-qk rotates every layer's query and key heads (Walsh-Hadamard, src/layers/hadamard.h)
// in every emulated variant; the reference is not rotated, and the fp8-cache variant (the
// decoder's own unrotated path) is skipped.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "eval/eval_inputs.h"
#include "eval/logits_file.h"
#include "eval/perplexity.h"
#include "eval/reference_comparison.h"
#include "kv/memory_budget.h"
#include "layers/attention_backend.h"
#include "layers/fake_quant_backend.h"
#include "model/decoder.h"
#include "model/gguf.h"
#include "model/model_loader.h"
#include "model/tokenizer.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/json_value.h"
#include "tools/kv_scales_file.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: rpa kv-sensitivity [-m PATH|smollm2|gemma3] --kv-cache-dtype fp8|fp8_e4m3|fp8_e5m2\n"
    "                          [--kv-scales FILE] [--ctx N] [--chunks N] [--text FILE]\n"
    "                          [--base bfloat16|auto] [--no-per-layer | --split-kv]\n"
    "                          [--batch-chunks K] [--weights bf16|f32] [--reference-logits FILE]\n"
    "                          [--rotate-qk] [--keep-layers L1,L2,...] [--json] [--quiet]\n"
    "Emulates the fp8 cache on every layer (K only, V only, both) and on each layer alone\n"
    "(K and V) over a --base cache, runs the real fp8 cache once, and reports each variant's\n"
    "mean KL divergence, top-1 agreement and dPPL against a reference pass with the --base\n"
    "cache on the same chunks.\n"
    "--rotate-qk: rotate query/key heads by a normalized Walsh-Hadamard matrix in every\n"
    "  emulated variant (adds rotation-only; skips fp8-cache).\n"
    "--keep-layers L1,L2,...: adds all:KV-keep:N, fp8 K/V on every layer but the first N listed\n"
    "  (N = 1, 2, 4, ... and the whole list), e.g. the layers ranked most sensitive first.\n"
    "Defaults: -m smollm2, --kv-cache-dtype fp8, scales 1.0, --ctx 512, --chunks 4, --text\n"
    "WikiText-2 test, --base bfloat16, reference logits in a temporary f32 file (removed).\n";

// Forwards to whichever backend the current pass uses (the decoder's backend is fixed at
// construction; the variants are not).
class SwitchBackend final : public AttentionBackend {
 public:
  explicit SwitchBackend(AttentionBackend* target) : target_(target) {}
  void set_target(AttentionBackend* target) { target_ = target; }
  void Run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cache,
           const AttentionMetadata& m, const AttentionOptions& o, const TensorView& out) override {
    target_->Run(q, k, v, cache, m, o, out);
  }
  void RunWithPlans(AttentionPlanCache* plans, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& cache, const AttentionMetadata& m,
                    const AttentionOptions& o, const TensorView& out) override {
    target_->RunWithPlans(plans, q, k, v, cache, m, o, out);
  }

 private:
  AttentionBackend* target_;
};

struct Variant {
  std::string name;
  int32_t layer = -1;  // -1: every layer
  bool keys = true, values = true;
  bool real = false;               // the real fp8 cache instead of the emulation
  std::vector<int32_t> kept = {};  // layer = -1: these stay in the base dtype
  bool none = false;               // no layer emulated (rotation only)
};

// "3,17,5" -> {3, 17, 5}; each in [0, layers), no repeats.
std::vector<int32_t> ParseLayerList(std::string_view text, int32_t layers) {
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, end - pos);
    int32_t l = -1;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), l);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || l < 0 ||
        l >= layers || std::find(out.begin(), out.end(), l) != out.end()) {
      throw InvalidArgument(Concat("--keep-layers ", text, ": '", item,
                                   "' is not a new layer index in [0, ", layers, ")"));
    }
    out.push_back(l);
    pos = end + 1;
  }
  return out;
}

// Removes a temporary file when the command ends, however it ends.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }
};

std::string DefaultTextPath() {
  std::vector<std::filesystem::path> starts{std::filesystem::current_path()};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  const std::string found = eval::FindFileUpwards(eval::kWikiTextRelativePath, starts);
  if (found.empty()) {
    throw InvalidArgument(
        Concat("cannot find ", eval::kWikiTextRelativePath, "; pass --text FILE"));
  }
  return found;
}

// [3, 17] -> "[3, 17]".
std::string KeptJson(const std::vector<int32_t>& kept) {
  std::string out = "[";
  for (size_t i = 0; i < kept.size(); ++i) out += Concat(i ? ", " : "", kept[i]);
  return out + "]";
}

double Seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

}  // namespace

int RunKvSensitivity(Args args) {
  std::string model = "smollm2", kv_dtype = "fp8", kv_scales, text_path, base = "bfloat16",
              reference_path;
  eval::PerplexityOptions options;
  options.max_chunks = 4;
  WeightFormat weights = kDefaultWeightFormat;
  bool json = false, quiet = false, per_layer = true, split = false, rotate = false;
  std::string keep_layers;
  FlagReader f(args);
  while (f.Next()) {
    if (f.Is("--help", "-h")) {
      std::printf("%s", kUsage);
      return 0;
    } else if (f.Is("--model", "-m")) {
      model = f.Value();
    } else if (f.Is("--kv-cache-dtype")) {
      kv_dtype = f.Value();
    } else if (f.Is("--kv-scales")) {
      kv_scales = f.Value();
    } else if (f.Is("--ctx", "-c")) {
      options.n_ctx = static_cast<int32_t>(f.Int(16, 1 << 20));
    } else if (f.Is("--chunks")) {
      options.max_chunks = static_cast<int32_t>(f.Int(1, 1 << 24));
    } else if (f.Is("--text", "-f")) {
      text_path = f.Value();
    } else if (f.Is("--base")) {
      base = f.Value();
    } else if (f.Is("--no-per-layer")) {
      per_layer = false;
    } else if (f.Is("--split-kv")) {
      split = true;
    } else if (f.Is("--batch-chunks")) {
      options.chunks_per_forward = static_cast<int32_t>(f.Int(1, 64));
    } else if (f.Is("--weights")) {
      weights = ParseWeightFormat(f.Value());
    } else if (f.Is("--reference-logits")) {
      reference_path = f.Value();
    } else if (f.Is("--rotate-qk")) {
      rotate = true;
    } else if (f.Is("--keep-layers")) {
      keep_layers = f.Value();
    } else if (f.Is("--json")) {
      json = true;
    } else if (f.Is("--quiet", "-q")) {
      quiet = true;
    } else {
      f.Unknown();
    }
  }
  const DType fp8 = ParseKvCacheDtype(kv_dtype, DType::kFloat32);
  if (!IsFp8(fp8)) {
    throw InvalidArgument(
        Concat("--kv-cache-dtype ", kv_dtype, " is not an fp8 format (fp8, fp8_e4m3, fp8_e5m2)"));
  }
  const DType base_dtype = ParseKvCacheDtype(base, DType::kFloat32);
  if (IsFp8(base_dtype)) {
    throw InvalidArgument(
        Concat("--base ", base, " must be an unquantized cache (bfloat16, auto)"));
  }
  if (text_path.empty()) text_path = DefaultTextPath();
  const bool verbose = !quiet;

  const std::string path = ResolveModelPath(model);
  const auto start = Clock::now();
  const GgufFile file = GgufFile::Open(path);
  const DecoderConfig config = ReadDecoderConfig(file, weights);
  KernelBackend kernel;
  SwitchBackend backend(&kernel);
  Decoder decoder(config, ReadDecoderWeights(file, config), &backend);
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::FromGguf(file);
  const ModelInfo& info = decoder.info();
  const int32_t layers = info.num_layers;
  if (verbose) std::fprintf(stderr, "loaded %s in %.2f s\n", path.c_str(), Seconds(start));

  KvCacheConfig scales = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, layers);
  if (!kv_scales.empty()) ApplyKvScalesFile(kv_scales, scales);
  const KvCacheConfig base_kv = KvCacheConfig::Parse(base, DType::kFloat32, layers);

  const std::vector<int32_t> tokens =
      eval::TokenizeForEvaluation(*tokenizer, eval::ReadTextFile(text_path));
  options.bos_token = eval::EvaluationBosToken(info, *tokenizer);
  const eval::ChunkPlan plan = eval::PlanChunks(tokens, options, info.vocab_size);
  const eval::LogitsFileLayout layout{info.vocab_size, plan.n_ctx, plan.first_scored,
                                      plan.rows_per_chunk, plan.num_chunks};

  // The reference pass, kept as f32 log-probabilities: single-layer KLDs can be ~1e-5, at
  // the f16 storage floor (src/eval/logits_file.h).
  RemoveOnExit cleanup;
  if (reference_path.empty()) {
    reference_path = (std::filesystem::temp_directory_path() /
                      Concat("rpa-kv-sensitivity-", getpid(), ".logits"))
                         .string();
    cleanup.path = reference_path;
  }
  const uint64_t bytes = eval::LogitsFileBytes(layout, DType::kFloat32);
  {
    std::error_code ec;
    const auto space =
        std::filesystem::space(std::filesystem::absolute(reference_path).parent_path(), ec);
    if (!ec && space.available < bytes) {
      throw InvalidArgument(Concat("the reference logits need ", FormatBytes(bytes), " in ",
                                   reference_path, "; only ", FormatBytes(space.available),
                                   " free (fewer --chunks, or --reference-logits elsewhere)"));
    }
  }
  if (verbose) {
    std::fprintf(
        stderr,
        "%s: %d chunks of %d (%lld tokens scored), reference cache %s, "
        "emulating %s%s; reference logits %s (%s)\n",
        text_path.c_str(), plan.num_chunks, plan.n_ctx, static_cast<long long>(plan.num_rows()),
        std::string(DTypeName(base_kv.dtype())).c_str(), std::string(DTypeName(fp8)).c_str(),
        kv_scales.empty() ? " with scales 1.0" : Concat(" with scales ", kv_scales).c_str(),
        reference_path.c_str(), FormatBytes(bytes).c_str());
  }
  const auto ref_start = Clock::now();
  eval::PerplexityResult ref_result;
  {
    eval::LogitsFileWriter writer(reference_path, layout, plan.tokens, DType::kFloat32,
                                  DTypeName(base_kv.dtype()));
    backend.set_target(&kernel);
    ref_result = eval::EvaluatePerplexity(
        decoder, base_kv, plan, options,
        [&](const eval::ScoredChunk& chunk) { writer.WriteChunk(chunk.log_probs, chunk.nll); });
    writer.Finish(ref_result.ppl, ref_result.ppl_stderr);
  }
  if (verbose) {
    std::fprintf(stderr, "reference (%s cache): PPL %.4f +/- %.4f in %.1f s\n",
                 std::string(DTypeName(base_kv.dtype())).c_str(), ref_result.ppl,
                 ref_result.ppl_stderr, Seconds(ref_start));
  }
  eval::LogitsFileReader reference(reference_path);
  if (!cleanup.path.empty()) {
    // The reader holds the file open: unlinking it now leaves nothing behind even if the
    // variants are interrupted by a signal (RemoveOnExit only covers returns and throws).
    std::error_code ec;
    std::filesystem::remove(cleanup.path, ec);
    cleanup.path.clear();
  }

  std::vector<Variant> variants = {
      {.name = "all:K", .values = false},
      {.name = "all:V", .keys = false},
      {.name = "all:KV"}};
  if (rotate) {
    variants.push_back({.name = "rotation-only", .keys = false, .values = false, .none = true});
  } else {
    variants.push_back({.name = "fp8-cache", .real = true});
  }
  if (!keep_layers.empty()) {
    const std::vector<int32_t> keep = ParseLayerList(keep_layers, layers);
    std::vector<size_t> counts;  // 1, 2, 4, ... below the list's size, then its size
    for (size_t n = 1; n < keep.size(); n *= 2) counts.push_back(n);
    counts.push_back(keep.size());
    for (size_t n : counts) {
      variants.push_back({.name = Concat("all:KV-keep:", n),
                          .kept = std::vector<int32_t>(keep.begin(), keep.begin() + n)});
    }
  }
  if (per_layer) {
    for (int32_t l = 0; l < layers; ++l) {
      // A KV-shared layer reads its donor's cache: emulating it alone changes nothing.
      if (l < static_cast<int32_t>(info.kv_donor.size()) && info.kv_donor[l] >= 0) continue;
      variants.push_back({.name = Concat("layer:", l), .layer = l});
      if (split) {
        variants.push_back({.name = Concat("layer:", l, ":K"), .layer = l, .values = false});
        variants.push_back({.name = Concat("layer:", l, ":V"), .layer = l, .keys = false});
      }
    }
  }
  if (!json) {
    std::printf("%-14s %-12s %-10s %-10s %-9s %s\n", "variant", "KLD mean", "+/-", "KLD p99",
                "top-1 %", "dPPL %");
  }
  const bool live = verbose && isatty(fileno(stderr));
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    std::vector<bool> selected(layers, v.layer < 0 && !v.none);
    if (v.layer >= 0) selected[v.layer] = true;
    for (int32_t l : v.kept) selected[l] = false;
    FakeQuantBackend fake(kernel, fp8, selected, v.keys, v.values, scales, rotate);
    backend.set_target(v.real ? static_cast<AttentionBackend*>(&kernel) : &fake);
    eval::ReferenceComparison comparison(reference, plan, info.vocab_size);
    const auto t0 = Clock::now();
    eval::EvaluatePerplexity(
        decoder, v.real ? scales : base_kv, plan, options,
        [&](const eval::ScoredChunk& chunk) { comparison.AddChunk(chunk); },
        [&](const eval::PerplexityProgress& p) {
          if (live) {
            std::fprintf(stderr, "\r[variant %zu/%zu %s] chunk %d/%d   ", i + 1, variants.size(),
                         v.name.c_str(), p.chunks_done, p.num_chunks);
            std::fflush(stderr);
          }
        });
    backend.set_target(&kernel);
    if (!v.real && (fake.calls() == 0 || fake.calls() % layers != 0)) {
      throw InvalidArgument(Concat("the attention backend saw ", fake.calls(),
                                   " calls, not a multiple of ", layers,
                                   " layers: cannot attribute them to layers"));
    }
    const eval::ComparisonResult c = comparison.Result();
    if (live) std::fprintf(stderr, "\r%60s\r", "");
    if (json) {
      std::printf(
          "{\"model\": %s, \"kv_cache_dtype\": %s, \"base\": %s, \"scales\": %s, "
          "\"ctx\": %d, \"chunks\": %d, \"variant\": %s, \"layer\": %d, \"keys\": %s, "
          "\"values\": %s, \"rotate_qk\": %s, \"kept_layers\": %s, \"rows\": %lld, "
          "\"kld_mean\": %.8g, \"kld_stderr\": %.4g, "
          "\"kld_median\": %.6g, \"kld_p99\": %.6g, \"kld_max\": %.6g, \"top1\": %.6f, "
          "\"top1_stderr\": %.6f, \"ref_ppl\": %.6f, \"dppl_percent\": %.5f, "
          "\"dppl_percent_stderr\": %.5f, \"seconds\": %.2f}\n",
          JsonQuote(model).c_str(), JsonQuote(kv_dtype).c_str(), JsonQuote(base).c_str(),
          JsonQuote(kv_scales).c_str(), plan.n_ctx, plan.num_chunks, JsonQuote(v.name).c_str(),
          v.layer, v.keys ? "true" : "false", v.values ? "true" : "false",
          rotate && !v.real ? "true" : "false", KeptJson(v.kept).c_str(),
          static_cast<long long>(c.rows), c.kld_mean, c.kld_stderr, c.kld_median, c.kld_p99,
          c.kld_max, c.top1, c.top1_stderr, c.ref_ppl, c.dppl_percent, c.dppl_percent_stderr,
          Seconds(t0));
    } else {
      std::printf("%-14s %-12.4e %-10.2e %-10.3e %-9.3f %+.4f +/- %.4f\n", v.name.c_str(),
                  c.kld_mean, c.kld_stderr, c.kld_p99, 100 * c.top1, c.dppl_percent,
                  c.dppl_percent_stderr);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace rpa::cli
