#include "model/sentencepiece_tokenizer.h"

#include <cstdio>
#include <queue>

#include "model/tokenizer_utf8.h"
#include "util/error.h"

namespace rpa {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// The <0xXX> name of byte b (upper-case hex, as SentencePiece writes them).
std::string ByteTokenName(int b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

// '▁' for each ' ' (other characters unchanged).
std::string Respell(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpace);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The text BPE matches for each token: its stored text, but runs of two or more spaces
// (stored as real spaces) respelled with '▁'.
std::vector<std::string> BpeSpellings(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (const std::string& t : tokens) {
    out.push_back(t.size() >= 2 && t.find_first_not_of(' ') == std::string::npos ? Respell(t) : t);
  }
  return out;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const TokenizerSpec& spec)
    : Tokenizer(spec),
      scores_(spec.scores),
      index_(BpeSpellings(spec.tokens)),
      add_space_prefix_(spec.add_space_prefix),
      unk_id_(spec.unk_id) {
  const auto& ids = token_ids();
  byte_token_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    auto it = ids.find(ByteTokenName(b));
    if (it != ids.end()) byte_token_[b] = it->second;
  }
  pieces_.reserve(tokens().size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const std::string& t = tokens()[id];
    if (token_type(id) == TokenType::kByte) {
      unsigned value = 0;
      char tail = 0;
      if (t.size() != 6 || std::sscanf(t.c_str(), "<0x%2X%c", &value, &tail) != 2 || tail != '>') {
        throw InvalidArgument(Concat("byte token ", id, " '", t, "' is not <0xXX>"));
      }
      pieces_.push_back(std::string(1, static_cast<char>(value)));
      continue;
    }
    std::string piece;
    for (size_t pos = 0; pos < t.size();) {
      if (t.compare(pos, kSpace.size(), kSpace) == 0) {
        piece.push_back(' ');
        pos += kSpace.size();
      } else {
        piece.push_back(t[pos++]);
      }
    }
    pieces_.push_back(std::move(piece));
  }
}

void SentencePieceTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  std::string s = Respell(text);
  if (add_space_prefix_) s.insert(0, kSpace);
  // Symbols: one per character, as byte ranges of `s`, in a doubly linked list. A max-heap
  // holds candidate merges by (score, leftmost); a popped candidate is stale when either
  // symbol has changed since (its recorded lengths no longer match).
  const int n_bytes = static_cast<int>(s.size());
  std::vector<int32_t> start, len, prev, next;
  for (int pos = 0; pos < n_bytes;) {
    const int l = static_cast<int>(Utf8CharLength(s, pos));
    start.push_back(pos);
    len.push_back(l);
    pos += l;
  }
  const int n = static_cast<int>(start.size());
  prev.resize(n);
  next.resize(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    float score;
    int32_t left, left_len, right_len;
    bool operator<(const Candidate& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> heap;
  const std::string_view sv = s;
  const auto push = [&](int left) {
    const int right = next[left];
    if (right < 0) return;
    const int32_t id = index_.Find(sv.substr(start[left], len[left] + len[right]));
    if (id >= 0) heap.push({scores_[id], left, len[left], len[right]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int left = c.left;
    const int right = next[left];
    if (len[left] != c.left_len || right < 0 || len[right] != c.right_len) continue;  // stale
    len[left] += len[right];
    len[right] = 0;  // dead
    next[left] = next[right];
    if (next[left] >= 0) prev[next[left]] = left;
    if (prev[left] >= 0) push(prev[left]);
    push(left);
  }
  for (int i = 0; i >= 0 && i < n; i = next[i]) {
    const std::string_view sym = sv.substr(start[i], len[i]);
    const int32_t id = index_.Find(sym);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    bool bytes_known = true;
    for (char c : sym) bytes_known = bytes_known && byte_token_[static_cast<uint8_t>(c)] >= 0;
    if (bytes_known) {
      for (char c : sym) out->push_back(byte_token_[static_cast<uint8_t>(c)]);
    } else if (unk_id_) {
      out->push_back(*unk_id_);
    } else {
      throw InvalidArgument(Concat("vocabulary has neither '", sym,
                                   "' nor its <0xXX> byte tokens nor an <unk> token"));
    }
  }
}

void SentencePieceTokenizer::AppendPiece(int32_t id, std::string* out) const {
  out->append(pieces_[id]);
}

}  // namespace rpa
