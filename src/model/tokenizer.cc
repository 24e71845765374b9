#include "model/tokenizer.h"

#include "model/bpe_tokenizer.h"
#include "model/gguf.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/tokenizer_utf8.h"
#include "util/error.h"

namespace rpa {
namespace {

void CheckSpecId(const TokenizerSpec& spec, const std::optional<int32_t>& id, const char* what) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= spec.tokens.size())) {
    throw InvalidArgument(Concat("tokenizer ", what, " id ", *id, " is outside the vocabulary [0, ",
                                 spec.tokens.size(), ")"));
  }
}

void Validate(const TokenizerSpec& spec) {
  if (spec.model != "gpt2" && spec.model != "llama") {
    throw InvalidArgument(
        Concat("tokenizer model '", spec.model, "' is not supported (rpa knows: gpt2, llama)"));
  }
  if (spec.tokens.empty() || spec.tokens.size() > (size_t{1} << 30)) {
    throw InvalidArgument(Concat("tokenizer vocabulary has ", spec.tokens.size(), " tokens"));
  }
  if (!spec.types.empty() && spec.types.size() != spec.tokens.size()) {
    throw InvalidArgument(Concat("tokenizer has ", spec.types.size(), " token types for ",
                                 spec.tokens.size(), " tokens"));
  }
  for (size_t i = 0; i < spec.types.size(); ++i) {
    const auto t = static_cast<int32_t>(spec.types[i]);
    if (t < 0 || t > static_cast<int32_t>(TokenType::kByte)) {
      throw InvalidArgument(Concat("token ", i, " has unknown token type ", t));
    }
  }
  if (spec.model == "llama" && spec.scores.size() != spec.tokens.size()) {
    throw InvalidArgument(Concat("SentencePiece tokenizer has ", spec.scores.size(), " scores for ",
                                 spec.tokens.size(), " tokens"));
  }
  CheckSpecId(spec, spec.bos_id, "BOS");
  CheckSpecId(spec, spec.eos_id, "EOS");
  CheckSpecId(spec, spec.unk_id, "unknown-token");
  if (spec.add_bos && !spec.bos_id) throw InvalidArgument("tokenizer adds BOS but has no BOS id");
  if (spec.add_eos && !spec.eos_id) throw InvalidArgument("tokenizer adds EOS but has no EOS id");
}

std::optional<int32_t> FindId(const GgufFile& f, std::string_view key) {
  const GgufValue* value = f.FindKey(key);
  if (value && (value->type == GgufValueType::kI32 || value->type == GgufValueType::kI64)) {
    const int32_t id = f.GetI32(key);  // some converters write -1 for "no such token"
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  const std::optional<uint32_t> v = f.FindU32(key);
  if (!v) return std::nullopt;
  return static_cast<int32_t>(std::min<uint32_t>(*v, 0x7FFFFFFF));  // Validate rejects it
}

}  // namespace

TokenizerSpec TokenizerSpec::FromGguf(const GgufFile& f) {
  TokenizerSpec spec;
  spec.model = std::string(f.GetString("tokenizer.ggml.model"));
  spec.pre = std::string(f.FindString("tokenizer.ggml.pre").value_or("default"));
  for (std::string_view t : f.GetStringArray("tokenizer.ggml.tokens")) spec.tokens.emplace_back(t);
  if (f.FindKey("tokenizer.ggml.token_type")) {
    for (int32_t t : f.GetI32Array("tokenizer.ggml.token_type")) {
      spec.types.push_back(static_cast<TokenType>(t));
    }
  }
  if (f.FindKey("tokenizer.ggml.scores")) spec.scores = f.GetF32Array("tokenizer.ggml.scores");
  if (f.FindKey("tokenizer.ggml.merges")) {
    for (std::string_view m : f.GetStringArray("tokenizer.ggml.merges"))
      spec.merges.emplace_back(m);
  }
  spec.bos_id = FindId(f, "tokenizer.ggml.bos_token_id");
  spec.eos_id = FindId(f, "tokenizer.ggml.eos_token_id");
  spec.unk_id = FindId(f, "tokenizer.ggml.unknown_token_id");
  // llama.cpp's defaults when a key is absent: SentencePiece vocabularies add BOS and a
  // dummy space prefix, byte-level ones neither.
  const bool spm = spec.model == "llama";
  spec.add_bos = f.FindBool("tokenizer.ggml.add_bos_token").value_or(spm);
  spec.add_eos = f.FindBool("tokenizer.ggml.add_eos_token").value_or(false);
  spec.add_space_prefix = f.FindBool("tokenizer.ggml.add_space_prefix").value_or(spm);
  spec.chat_template = std::string(f.FindString("tokenizer.chat_template").value_or(""));
  return spec;
}

std::unique_ptr<Tokenizer> Tokenizer::Create(TokenizerSpec spec) {
  Validate(spec);
  if (spec.model == "gpt2") return std::make_unique<BpeTokenizer>(spec);
  return std::make_unique<SentencePieceTokenizer>(spec);
}

std::unique_ptr<Tokenizer> Tokenizer::FromGguf(const GgufFile& file) {
  try {
    return Create(TokenizerSpec::FromGguf(file));
  } catch (const ModelFormatError&) {
    throw;
  } catch (const InvalidArgument& e) {
    throw ModelFormatError(Concat(file.label(), ": ", e.what()));
  }
}

Tokenizer::Tokenizer(const TokenizerSpec& spec)
    : model_(spec.model),
      tokens_(spec.tokens),
      types_(spec.types),
      bos_id_(spec.bos_id),
      eos_id_(spec.eos_id),
      add_bos_(spec.add_bos),
      add_eos_(spec.add_eos),
      chat_template_(spec.chat_template) {
  if (types_.empty()) types_.assign(tokens_.size(), TokenType::kNormal);
  token_ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    token_ids_.emplace(tokens_[i], id);
    if (types_[i] == TokenType::kControl || types_[i] == TokenType::kUserDefined) {
      specials_.Add(tokens_[i], id, types_[i] == TokenType::kControl);
    }
  }
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::CheckId(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw InvalidArgument(
        Concat("token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")"));
  }
}

const std::string& Tokenizer::token_text(int32_t id) const {
  CheckId(id);
  return tokens_[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  CheckId(id);
  return types_[id];
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  auto it = token_ids_.find(text);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const size_t bad = FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    throw InvalidArgument(Concat("text to tokenize is not valid UTF-8 at byte ", bad, " (0x",
                                 std::hex, static_cast<int>(static_cast<uint8_t>(text[bad])), ")"));
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_) out.push_back(*bos_id_);
  size_t pos = 0;
  while (pos < text.size()) {
    const auto m = specials_.FindNext(text, pos, parse_special);
    const size_t end = m ? m->offset : text.size();
    if (end > pos) EncodeText(text.substr(pos, end - pos), &out);
    if (!m) break;
    out.push_back(m->id);
    pos = m->offset + m->length;
  }
  if (add_special && add_eos_) out.push_back(*eos_id_);
  return out;
}

std::string Tokenizer::TokenPiece(int32_t id, bool render_special) const {
  CheckId(id);
  switch (types_[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      return render_special ? tokens_[id] : std::string();
    case TokenType::kUserDefined:
      return tokens_[id];
    default: {
      std::string piece;
      AppendPiece(id, &piece);
      return piece;
    }
  }
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  Utf8StreamDecoder decoder;
  std::string out;
  for (int32_t id : ids) out += decoder.Push(TokenPiece(id, render_special));
  out += decoder.Flush();
  return out;
}

}  // namespace rpa
