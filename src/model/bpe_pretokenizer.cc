#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/bpe_pretokenizer.h"

#include <pcre2.h>

#include "model/tokenizer_utf8.h"
#include "util/error.h"

namespace rpa {
namespace {

// Whitespace as Unicode's White_Space property, which llama.cpp and Hugging Face (Rust
// regex) use for \s. PCRE2's UCP \s is "Z or \t\n\v\f\r" and lacks U+0085 (NEXT LINE), so it
// is added back explicitly.
#define RPA_WS "\\s\\x{85}"

// GPT-2's split: contractions, letter runs, digit runs and other-symbol runs (each with an
// optional leading space), then whitespace, a run before a non-space giving up its last
// character (\s+(?!\S)) so that the space prefixes the next word.
constexpr const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" RPA_WS
                                   "\\p{L}\\p{N}]+|[" RPA_WS "]+(?![^" RPA_WS "])|[" RPA_WS "]+";

#undef RPA_WS

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::vector<std::string> PreTokenizerRegexes(std::string_view pre) {
  // SmolLM's vocabulary was trained with each digit alone, then GPT-2's split.
  if (pre == "smollm") return {"\\p{N}", kGpt2Regex};
  if (pre == "gpt2" || pre == "default") return {kGpt2Regex};
  throw InvalidArgument(Concat("byte-level BPE pre-tokenizer '", pre,
                               "' is not supported (rpa knows: smollm, gpt2, default)"));
}

struct RegexSplitter::Pass {
  pcre2_code* code = nullptr;
  ~Pass() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto pass = std::make_unique<Pass>();
    pass->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                               PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (!pass->code) {
      throw InvalidArgument(Concat("pre-tokenizer regex '", p, "' does not compile at offset ",
                                   err_offset, ": ", Pcre2Message(err)));
    }
    // JIT is an optimisation only: a build without it runs the interpreter.
    pcre2_jit_compile(pass->code, PCRE2_JIT_COMPLETE);
    passes_.push_back(std::move(pass));
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

void RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* out) const {
  out->clear();
  if (text.empty()) return;
  out->push_back(text);
  std::vector<std::string_view> next;
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
  RPA_CHECK(match != nullptr);
  pcre2_match_data* md = match.get();
  for (const auto& pass : passes_) {
    next.clear();
    for (std::string_view piece : *out) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;  // end of the last match
      size_t start = 0;
      while (start < piece.size()) {
        const int rc =
            pcre2_match(pass->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw InvalidArgument(Concat("pre-tokenizer regex failed: ", Pcre2Message(rc)));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {
          // An empty match (none of rpa's patterns has one) must not loop: step one character.
          start = m0 < piece.size() ? m0 + Utf8CharLength(piece, m0) : piece.size();
          continue;
        }
        if (m0 > pos) next.push_back(piece.substr(pos, m0 - pos));
        next.push_back(piece.substr(m0, m1 - m0));
        pos = start = m1;
      }
      if (pos < piece.size()) next.push_back(piece.substr(pos));
    }
    out->swap(next);
  }
}

}  // namespace rpa
