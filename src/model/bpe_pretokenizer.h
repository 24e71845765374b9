// The pre-tokenizer of byte-level BPE: splits text into the words whose bytes BPE merges
// (merges never cross a word boundary), with the regexes the vocabulary was trained with.
//
// A pre-tokenizer is a sequence of regex passes (llama.cpp's model): each pass splits every
// piece left by the previous one into its matches and the gaps between them, matching
// within the piece alone (its end is the end of the subject). GGUF names the sequence in
// `tokenizer.ggml.pre` (../shared/docs/MODELS.md §4). Regexes need Unicode properties
// (\p{L}, \p{N}), so they run on PCRE2 in UTF + UCP mode, JIT-compiled where available.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rpa {

// The regex passes for a `tokenizer.ggml.pre` value. Throws rpa::InvalidArgument naming
// the value when rpa does not know it.
std::vector<std::string> PreTokenizerRegexes(std::string_view pre);

class RegexSplitter {
 public:
  // Compiles the passes. Throws rpa::InvalidArgument with PCRE2's message and offset when a
  // pattern does not compile.
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Replaces `out` with the pieces of `text`: non-empty views into `text` whose
  // concatenation is `text`. REQUIRES: `text` is well-formed UTF-8 (not re-checked).
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

 private:
  struct Pass;
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace rpa
