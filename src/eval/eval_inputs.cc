#include "eval/eval_inputs.h"

#include <fstream>
#include <sstream>

#include "model/gguf.h"
#include "util/error.h"

namespace rpa::eval {

std::string FindFileUpwards(std::string_view relative,
                            std::span<const std::filesystem::path> starts) {
  for (const std::filesystem::path& start : starts) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::absolute(start, ec);
    if (ec) continue;
    for (;;) {
      const std::filesystem::path candidate = (dir / relative).lexically_normal();
      if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
      if (!dir.has_parent_path() || dir.parent_path() == dir) break;
      dir = dir.parent_path();
    }
  }
  return "";
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(Concat("cannot read text file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InvalidArgument(Concat("error reading text file ", path));
  return text.str();
}

std::vector<int32_t> TokenizeForEvaluation(const Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.Encode(text, /*add_special=*/false, /*parse_special=*/false);
}

int32_t EvaluationBosToken(const ModelInfo& info, const Tokenizer& tokenizer) {
  return tokenizer.add_bos() && info.bos_token >= 0 ? info.bos_token : -1;
}

std::unique_ptr<Decoder> LoadDecoder(const std::string& gguf_path, AttentionBackend* backend,
                                     WeightFormat weights, const LoadProgress& progress) {
  const GgufFile file = GgufFile::Open(gguf_path);
  const DecoderConfig config = ReadDecoderConfig(file, weights);
  return std::make_unique<Decoder>(config, ReadDecoderWeights(file, config, progress), backend);
}

}  // namespace rpa::eval
