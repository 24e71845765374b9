// rpa_logits: runs a GGUF model through rpa's serving path (LoadModel -> Engine -> Decoder
// -> paged KV cache -> attention kernel) and writes what an independent implementation
// can be compared with. Used by tests/python/test_logits_vs_transformers.py.
//
//   rpa_logits MODEL.gguf PROMPTS.txt OUT_DIR [--kv-cache-dtype DTYPE] [--generate N]
//              [--weights f32|bf16]
//
// Weights default to f32 here (not the serving default bf16): the check compares with
// transformers multiplying the same dequantized f32 weights.
//
// PROMPTS.txt holds one prompt per line as whitespace-separated token ids. For prompt i the
// engine runs one greedy request of N tokens (EOS ignored, so every run has N), and
// OUT_DIR gets
//   logits_<i>.f32  [N, vocab] little-endian f32: row 0 = the logits after the prompt's
//                   last token (they choose generated[0]); row j = those after feeding
//                   generated[j-1] (they choose generated[j]).
//   tokens_<i>.txt  the N generated ids, space-separated.
// stdout ends with one JSON line of timings: load seconds, and per prompt the prefill step
// and the median decode step (milliseconds).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "layers/kv_cache_config.h"
#include "model/model_loader.h"
#include "util/error.h"

namespace rpa {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Forwards to the model and keeps a copy of every logits row while recording is on.
class RecordingLm final : public CausalLm {
 public:
  explicit RecordingLm(CausalLm& inner) : inner_(inner) {}
  const ModelInfo& info() const override { return inner_.info(); }
  void Forward(const StepInput& input, const KvCacheStorage& cache, const KvCacheConfig& kv_config,
               std::span<float> logits) override {
    inner_.Forward(input, cache, kv_config, logits);
    if (recording_) rows_.insert(rows_.end(), logits.begin(), logits.end());
  }
  void StartRecording() {
    recording_ = true;
    rows_.clear();
  }
  const std::vector<float>& rows() const { return rows_; }

 private:
  CausalLm& inner_;
  bool recording_ = false;
  std::vector<float> rows_;
};

std::vector<std::vector<int32_t>> ReadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(Concat("cannot read prompts file ", path));
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int64_t id;
    while (ls >> id) ids.push_back(static_cast<int32_t>(id));
    if (!ls.eof())
      throw InvalidArgument(Concat("prompts file ", path, ": bad line \"", line, "\""));
    if (!ids.empty()) prompts.push_back(std::move(ids));
  }
  return prompts;
}

int Run(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: rpa_logits MODEL.gguf PROMPTS.txt OUT_DIR [--kv-cache-dtype DTYPE]"
                 " [--generate N] [--weights f32|bf16]\n";
    return 2;
  }
  const std::string model_path = argv[1], prompts_path = argv[2], out_dir = argv[3];
  std::string kv_dtype = "auto";
  int32_t generate = 32;
  WeightFormat weights = WeightFormat::kFloat32;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kv-cache-dtype") {
      kv_dtype = argv[i + 1];
    } else if (flag == "--weights") {
      weights = ParseWeightFormat(argv[i + 1]);
    } else if (flag == "--generate") {
      generate = std::atoi(argv[i + 1]);
    } else {
      throw InvalidArgument(Concat("unknown flag ", flag));
    }
  }
  const auto prompts = ReadPrompts(prompts_path);

  const Clock::time_point t_load = Clock::now();
  LoadedModel model = LoadModel(model_path, nullptr, weights);
  const double load_s = SecondsSince(t_load);
  const ModelInfo& info = model.decoder->info();
  RecordingLm recorder(*model.decoder);
  // f32 activations: "auto" is an f32 cache.
  const KvCacheConfig kv = KvCacheConfig::Parse(kv_dtype, DType::kFloat32, info.num_layers);

  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  EngineConfig config;
  config.max_num_seqs = 1;
  // The whole prompt in one step, so the first step's time is the prefill's.
  config.max_num_batched_tokens = static_cast<int32_t>(std::max<size_t>(longest, 16));
  config.kv_cache_bytes = 256ull << 20;
  config.warmup = false;  // a full-budget warmup prefill would only add run time here

  std::ostringstream timings;
  timings << "{\"load_s\": " << load_s << ", \"prompts\": [";
  for (size_t i = 0; i < prompts.size(); ++i) {
    Engine engine(recorder, kv, config);
    SamplingParams params;
    params.max_tokens = generate;
    params.ignore_eos = true;
    const int64_t id = engine.AddRequest(prompts[i], params);
    recorder.StartRecording();
    std::vector<double> step_ms;
    for (;;) {
      const Clock::time_point t0 = Clock::now();
      if (!engine.Step()) break;
      step_ms.push_back(SecondsSince(t0) * 1e3);
    }
    auto results = engine.RunUntilDone();
    const std::vector<int32_t>& generated = results.at(id).generated;
    const size_t vocab = static_cast<size_t>(info.vocab_size);
    if (generated.size() != static_cast<size_t>(generate) ||
        recorder.rows().size() != generated.size() * vocab) {
      throw InvalidArgument(Concat("prompt ", i, ": ", generated.size(), " tokens and ",
                                   recorder.rows().size() / vocab, " logits rows; expected ",
                                   generate));
    }
    const std::string logits_path = Concat(out_dir, "/logits_", i, ".f32");
    std::ofstream logits_out(logits_path, std::ios::binary);
    logits_out.write(reinterpret_cast<const char*>(recorder.rows().data()),
                     static_cast<std::streamsize>(recorder.rows().size() * sizeof(float)));
    std::ofstream tokens_out(Concat(out_dir, "/tokens_", i, ".txt"));
    for (int32_t t : generated) tokens_out << t << ' ';
    if (!logits_out || !tokens_out) throw InvalidArgument(Concat("cannot write to ", out_dir));

    std::vector<double> decode(step_ms.begin() + 1, step_ms.end());
    std::sort(decode.begin(), decode.end());
    timings << (i ? ", " : "") << "{\"prompt_tokens\": " << prompts[i].size()
            << ", \"prefill_ms\": " << step_ms.front()
            << ", \"decode_ms_median\": " << (decode.empty() ? 0.0 : decode[decode.size() / 2])
            << "}";
  }
  timings << "]}";
  std::cout << timings.str() << std::endl;
  return 0;
}

}  // namespace
}  // namespace rpa

int main(int argc, char** argv) {
  try {
    return rpa::Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rpa_logits: " << e.what() << "\n";
    return 1;
  }
}
