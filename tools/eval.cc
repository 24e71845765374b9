// rpa eval: perplexity of a model over WikiText-2 with a given KV cache dtype, llama.cpp's
// `llama-perplexity` protocol (src/eval/perplexity.h), and optionally the comparison with a
// reference run's logits (KL divergence, top-1 agreement, ΔPPL: src/eval/logits_file.h).
//
//   rpa eval -m smollm2 --kv-cache-dtype bfloat16 --chunks 20 --logits-out /tmp/ref.bin
//   rpa eval -m smollm2 --kv-cache-dtype fp8 --reference-logits /tmp/ref.bin --json
#include <unistd.h>

#include <cmath>
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
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/json_value.h"
#include "tools/kv_scales_file.h"
#include "tools/model_session.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using eval::PerplexityOptions;

constexpr char kUsage[] =
    "usage: rpa eval [-m PATH|smollm2|gemma3] [--kv-cache-dtype D] [--kv-scales FILE]\n"
    "                [--ctx N] [--chunks N] [--text FILE] [--batch-chunks K]\n"
    "                [--logits-out FILE [--logits-dtype f16|f32]] [--reference-logits FILE]\n"
    "                [--weights bf16|f32] [--kv-rotation none|hadamard] [--json] [--quiet]\n"
    "Perplexity over WikiText-2 as llama.cpp's llama-perplexity computes it: chunks of --ctx\n"
    "tokens (512, 1024, 2048, ...), each a fresh sequence with BOS first iff the model wants\n"
    "it, second half scored. --logits-out saves every scored distribution; a later run with\n"
    "--reference-logits on the same tokens reports mean/p99 KL divergence, top-1 agreement\n"
    "and ΔPPL against it. --kv-rotation hadamard rotates query/key heads (Walsh-Hadamard,\n"
    "after RoPE; logits unchanged in exact arithmetic) so fp8 rounds K less harmfully.\n"
    "Defaults: -m smollm2, --kv-cache-dtype fp8, --ctx 512, every chunk of the text (with a\n"
    "reference: its chunks), --text ../shared/data/wikitext-2-raw/wiki.test.raw found above\n"
    "the current directory or the rpa binary, --batch-chunks 1, --logits-dtype f16, bf16\n"
    "weights, --kv-rotation none.\n";

// The WikiText file above the working directory or the executable, or an error saying so.
std::string DefaultTextPath() {
  std::vector<std::filesystem::path> starts{std::filesystem::current_path()};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  const std::string found = eval::FindFileUpwards(eval::kWikiTextRelativePath, starts);
  if (found.empty()) {
    std::string where;
    for (const auto& s : starts) where += Concat(where.empty() ? "" : " or ", s.string());
    throw InvalidArgument(Concat("cannot find ", eval::kWikiTextRelativePath, " above ", where,
                                 "; pass --text FILE"));
  }
  return found;
}

// "\r[chunk 3/20] PPL 17.1234 | 512 tok/s | ETA 45 s" on a terminal; in a log, a line at
// every tenth of the run.
class ProgressLine {
 public:
  ProgressLine(bool enabled, int32_t n_ctx)
      : enabled_(enabled), n_ctx_(n_ctx), live_(enabled && isatty(fileno(stderr))) {}

  void Update(const eval::PerplexityProgress& p) {
    if (!enabled_) return;
    const double tps = p.seconds > 0 ? static_cast<double>(p.chunks_done) * n_ctx_ / p.seconds : 0;
    const double eta =
        p.chunks_done > 0 ? p.seconds / p.chunks_done * (p.num_chunks - p.chunks_done) : 0;
    const int tenth = 10 * p.chunks_done / p.num_chunks;
    if (!live_ && tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(stderr, "%s[chunk %d/%d] PPL %.4f | %.0f tok/s | ETA %.0f s%s", live_ ? "\r" : "",
                 p.chunks_done, p.num_chunks, p.ppl, tps, eta, live_ ? "   " : "\n");
    if (live_ && p.chunks_done == p.num_chunks) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  int32_t n_ctx_;
  bool live_;
  int last_tenth_ = -1;
};

}  // namespace

int RunEval(Args args) {
  std::string model = "smollm2", kv_dtype = "fp8", kv_scales, text_path, logits_out, reference;
  DType logits_dtype = DType::kFloat16;
  WeightFormat weights = kDefaultWeightFormat;
  PerplexityOptions options;
  bool json = false, quiet = false, rotate_qk = false;
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
    } else if (f.Is("--batch-chunks")) {
      options.chunks_per_forward = static_cast<int32_t>(f.Int(1, 64));
    } else if (f.Is("--logits-out")) {
      logits_out = f.Value();
    } else if (f.Is("--logits-dtype")) {
      logits_dtype = eval::ParseLogitsValueType(f.Value());
    } else if (f.Is("--reference-logits")) {
      reference = f.Value();
    } else if (f.Is("--weights")) {
      weights = ParseWeightFormat(f.Value());
    } else if (f.Is("--kv-rotation")) {
      rotate_qk = ParseKvRotation(f.Value());
    } else if (f.Is("--json")) {
      json = true;
    } else if (f.Is("--quiet", "-q")) {
      quiet = true;
    } else {
      f.Unknown();
    }
  }
  // Every check that needs no model first, so a typo fails at once.
  ParseKvCacheDtype(kv_dtype, DType::kFloat32);
  if (text_path.empty()) text_path = DefaultTextPath();
  if (!logits_out.empty() && !reference.empty() &&
      std::filesystem::weakly_canonical(logits_out) ==
          std::filesystem::weakly_canonical(reference)) {
    throw InvalidArgument("--logits-out and --reference-logits name the same file");
  }
  std::unique_ptr<eval::LogitsFileReader> ref;
  if (!reference.empty()) {
    ref = std::make_unique<eval::LogitsFileReader>(reference);
    if (options.max_chunks == 0) options.max_chunks = ref->header().num_chunks;
  }
  const bool verbose = !quiet && !json;
  const std::string text = eval::ReadTextFile(text_path);

  ModelSession session =
      LoadModelSession(ResolveModelPath(model), /*quiet=*/!verbose, weights, rotate_qk);
  Decoder& decoder = *session.model.decoder;
  KvCacheConfig kv = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, decoder.info().num_layers);
  if (!kv_scales.empty()) ApplyKvScalesFile(kv_scales, kv);

  const std::vector<int32_t> tokens = eval::TokenizeForEvaluation(*session.tokenizer, text);
  options.bos_token = eval::EvaluationBosToken(decoder.info(), *session.tokenizer);
  const int32_t vocab = decoder.info().vocab_size;
  const eval::ChunkPlan plan = eval::PlanChunks(tokens, options, vocab);
  const eval::LogitsFileLayout layout{vocab, plan.n_ctx, plan.first_scored, plan.rows_per_chunk,
                                      plan.num_chunks};
  if (verbose) {
    std::fprintf(stderr,
                 "%s: %zu tokens; %d chunks of %d, %lld tokens scored, BOS %s, KV cache %s\n",
                 text_path.c_str(), tokens.size(), plan.num_chunks, plan.n_ctx,
                 static_cast<long long>(plan.num_rows()),
                 options.bos_token >= 0 ? Concat(options.bos_token).c_str() : "none",
                 std::string(DTypeName(kv.dtype())).c_str());
  }

  std::unique_ptr<eval::ReferenceComparison> comparison;
  if (ref) comparison = std::make_unique<eval::ReferenceComparison>(*ref, plan, vocab);
  std::unique_ptr<eval::LogitsFileWriter> writer;
  if (!logits_out.empty()) {
    const uint64_t bytes = eval::LogitsFileBytes(layout, logits_dtype);
    const std::filesystem::path parent = std::filesystem::absolute(logits_out).parent_path();
    std::error_code ec;
    const std::filesystem::space_info space = std::filesystem::space(parent, ec);
    if (!ec && space.available < bytes) {
      throw InvalidArgument(Concat("--logits-out ", logits_out, " needs ", FormatBytes(bytes),
                                   "; only ", FormatBytes(space.available), " free in ",
                                   parent.string()));
    }
    if (!quiet) {
      std::fprintf(stderr, "writing %s: %s (%s log-probabilities, %lld rows x %d)\n",
                   logits_out.c_str(), FormatBytes(bytes).c_str(),
                   std::string(DTypeName(logits_dtype)).c_str(),
                   static_cast<long long>(plan.num_rows()), vocab);
    }
    writer = std::make_unique<eval::LogitsFileWriter>(
        logits_out, layout, plan.tokens, logits_dtype,
        Concat(DTypeName(kv.dtype()), rotate_qk ? "+hadamard" : ""));
  }

  ProgressLine progress(!quiet, plan.n_ctx);
  const eval::PerplexityResult r = eval::EvaluatePerplexity(
      decoder, kv, plan, options,
      [&](const eval::ScoredChunk& chunk) {
        if (writer) writer->WriteChunk(chunk.log_probs, chunk.nll);
        if (comparison) comparison->AddChunk(chunk);
      },
      [&](const eval::PerplexityProgress& p) { progress.Update(p); });
  if (writer) writer->Finish(r.ppl, r.ppl_stderr);
  const eval::ComparisonResult c = comparison ? comparison->Result() : eval::ComparisonResult{};

  const std::string dtype_name(DTypeName(kv.dtype()));
  if (json) {
    std::printf(
        "{\"model\": %s, \"weights\": \"%s\", \"kv_cache_dtype\": \"%s\", "
        "\"kv_rotation\": \"%s\", \"ctx\": %d, \"chunks\": %d, "
        "\"bos\": %d, \"tokens_scored\": %lld, \"ppl\": %.6f, \"ppl_stderr\": %.6f, "
        "\"seconds\": %.3f, \"forward_seconds\": %.3f, \"tokens_per_s\": %.2f",
        JsonQuote(model).c_str(), std::string(WeightFormatName(weights)).c_str(),
        dtype_name.c_str(), rotate_qk ? "hadamard" : "none", r.n_ctx, r.chunks, options.bos_token,
        static_cast<long long>(r.tokens_scored), r.ppl, r.ppl_stderr, r.seconds, r.forward_seconds,
        r.tokens_per_second());
    if (comparison) {
      std::printf(
          ", \"reference_kv_cache_dtype\": %s, \"reference_ppl\": %.6f, \"kld_mean\": %.8f, "
          "\"kld_stderr\": %.8f, \"kld_median\": %.8f, \"kld_p99\": %.8f, \"kld_max\": %.8f, "
          "\"top1\": %.6f, \"top1_stderr\": %.6f, \"dppl_percent\": %.5f, "
          "\"dppl_percent_stderr\": %.5f",
          JsonQuote(ref->label()).c_str(), c.ref_ppl, c.kld_mean, c.kld_stderr, c.kld_median,
          c.kld_p99, c.kld_max, c.top1, c.top1_stderr, c.dppl_percent, c.dppl_percent_stderr);
    }
    std::printf("}\n");
    return 0;
  }
  std::printf(
      "PPL = %.4f +/- %.5f over %lld tokens (%d chunks of %d, KV cache %s) in %.1f s, "
      "%.1f tok/s\n",
      r.ppl, r.ppl_stderr, static_cast<long long>(r.tokens_scored), r.chunks, r.n_ctx,
      Concat(dtype_name, rotate_qk ? ", hadamard q/k rotation" : "").c_str(), r.seconds,
      r.tokens_per_second());
  if (comparison) {
    std::printf(
        "vs %s (%s, PPL %.4f): dPPL %+.3f%% +/- %.3f%% | KLD mean %.6f +/- %.6f, "
        "median %.6f, p99 %.6f, max %.4f | top-1 %.2f%% +/- %.2f%%\n",
        reference.c_str(), ref->label().c_str(), c.ref_ppl, c.dppl_percent, c.dppl_percent_stderr,
        c.kld_mean, c.kld_stderr, c.kld_median, c.kld_p99, c.kld_max, 100 * c.top1,
        100 * c.top1_stderr);
  }
  return 0;
}

}  // namespace rpa::cli
