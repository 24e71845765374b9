// Tokenizers built from a GGUF file's metadata: text <-> token ids.
//
// Two algorithms, chosen by `tokenizer.ggml.model` (../shared/docs/MODELS.md §4):
//   "gpt2"  byte-level BPE (SmolLM2): regex pre-tokenizer, GPT-2 byte-to-unicode alphabet,
//           merges by lowest rank (bpe_tokenizer.h);
//   "llama" SentencePiece-style BPE (Gemma 3): ' ' -> U+2581, merges by highest score, byte
//           fallback to <0xXX> tokens (sentencepiece_tokenizer.h).
// Both first cut the text at tokens written verbatim: user-defined tokens always (as
// llama.cpp and Hugging Face tokenizers do), control tokens such as "<|im_start|>" only when
// the caller asks to parse specials (chat prompts do; user text should not).
//
// Text is UTF-8. Encode rejects invalid UTF-8; Decode always returns valid UTF-8 (an invalid
// byte sequence, which only odd id sequences produce, becomes U+FFFD per maximal subpart).
// Thread safety: immutable after construction apart from an internal cache guarded by a
// mutex; concurrent Encode/Decode calls are safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tokenizer_special.h"

namespace rpa {

class GgufFile;

// Token types as GGUF stores them in `tokenizer.ggml.token_type` (llama.cpp's codes).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <bos>, <|im_end|>: matched in text only when parsing specials
  kUserDefined = 4,  // always matched verbatim in text, rendered verbatim
  kUnused = 5,
  kByte = 6,  // <0xXX> byte-fallback tokens (SentencePiece)
};

// Everything a tokenizer is built from: the `tokenizer.*` metadata of a GGUF file, or a
// hand-written vocabulary in tests.
struct TokenizerSpec {
  std::string model;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;    // tokenizer.ggml.pre: the gpt2 pre-tokenizer ("smollm", "gpt2", ...)
  std::vector<std::string> tokens;
  std::vector<TokenType> types;     // empty: all kNormal; else one per token
  std::vector<float> scores;        // llama: one per token (higher merges first)
  std::vector<std::string> merges;  // gpt2: "left right", in rank order
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  bool add_bos = false;  // Encode(add_special) prepends BOS
  bool add_eos = false;  // Encode(add_special) appends EOS
  // llama: prepend U+2581 to each run of text between specials (llama.cpp's dummy prefix)
  bool add_space_prefix = false;
  std::string chat_template;  // tokenizer.chat_template (Jinja source), may be empty

  // Reads the tokenizer metadata of `file`. Throws rpa::ModelFormatError naming the key
  // when a required key is missing or malformed.
  static TokenizerSpec FromGguf(const GgufFile& file);
};

class Tokenizer {
 public:
  // The tokenizer `spec` describes. Throws rpa::InvalidArgument (rpa::ModelFormatError when
  // built from a file) naming the problem: unknown model or pre-tokenizer, ids out of range,
  // array lengths that disagree, a byte-level vocabulary missing a byte.
  static std::unique_ptr<Tokenizer> Create(TokenizerSpec spec);
  static std::unique_ptr<Tokenizer> FromGguf(const GgufFile& file);

  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`. add_special: add BOS / EOS where the model's metadata asks for them.
  // parse_special: control tokens written in the text become their ids (else they are
  // tokenized as ordinary text). Throws rpa::InvalidArgument when `text` is not valid UTF-8.
  std::vector<int32_t> Encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;

  // The text of `ids`: the concatenation of their pieces, decoded as UTF-8 with U+FFFD for
  // invalid sequences. Control tokens are rendered iff render_special. Throws
  // rpa::InvalidArgument on an id outside [0, vocab_size()).
  std::string Decode(std::span<const int32_t> ids, bool render_special = false) const;

  // The raw bytes token `id` stands for. A byte-fallback token or a byte-level token may be
  // part of a multi-byte UTF-8 character: feed pieces to a Utf8StreamDecoder
  // (tokenizer_utf8.h) to print text while generating. Control tokens give their text iff
  // render_special, else "".
  std::string TokenPiece(int32_t id, bool render_special = false) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // The token's text as the vocabulary stores it (byte-level tokens in GPT-2's alphabet).
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;
  // The id of the token whose stored text is `text`, or nullopt.
  std::optional<int32_t> FindToken(std::string_view text) const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  const std::string& model() const { return model_; }
  const std::string& chat_template() const { return chat_template_; }

 protected:
  // REQUIRES: spec validated by Create.
  explicit Tokenizer(const TokenizerSpec& spec);

  // Appends the ids of `text`, a non-empty run of UTF-8 between verbatim-matched tokens
  // (or the start or end of the input), to `out`.
  virtual void EncodeText(std::string_view text, std::vector<int32_t>* out) const = 0;
  // Appends the raw bytes of a token that is neither control nor user-defined.
  virtual void AppendPiece(int32_t id, std::string* out) const = 0;

  const std::vector<std::string>& tokens() const { return tokens_; }
  // Stored text -> id (first id on duplicates).
  const std::unordered_map<std::string_view, int32_t>& token_ids() const { return token_ids_; }

 private:
  void CheckId(int32_t id) const;

  std::string model_;
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, int32_t> token_ids_;  // views into tokens_
  SpecialTokenMatcher specials_;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::string chat_template_;
};

}  // namespace rpa
