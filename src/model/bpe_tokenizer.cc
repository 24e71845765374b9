#include "model/bpe_tokenizer.h"

#include <queue>

#include "model/bpe_byte_map.h"
#include "model/tokenizer_utf8.h"
#include "util/error.h"

namespace rpa {

BpeTokenizer::BpeTokenizer(const TokenizerSpec& spec)
    : Tokenizer(spec), splitter_(PreTokenizerRegexes(spec.pre)) {
  const auto& ids = token_ids();
  byte_token_.resize(256);
  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &spelled);
    auto it = ids.find(spelled);
    // Some vocabularies (SmolLM2's) lack a few control bytes: those encode as the unknown
    // token, as Hugging Face does.
    byte_token_[b] = it != ids.end() ? it->second : spec.unk_id.value_or(-1);
  }
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& m = spec.merges[rank];
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      throw InvalidArgument(Concat("BPE merge ", rank, " '", m, "' is not 'left right'"));
    }
    const std::string_view sv = m;
    const auto left = ids.find(sv.substr(0, space));
    const auto right = ids.find(sv.substr(space + 1));
    const auto merged =
        ids.find(std::string(sv.substr(0, space)) + std::string(sv.substr(space + 1)));
    // A merge whose parts or result are not tokens can never fire (converters emit none);
    // skipping it keeps the ranks of the others.
    if (left == ids.end() || right == ids.end() || merged == ids.end()) continue;
    merges_.emplace(PairKey(left->second, right->second),
                    Merge{static_cast<int32_t>(rank), merged->second});
  }
  pieces_.reserve(tokens().size());
  for (const std::string& t : tokens()) {
    // Stored text that is not UTF-8 cannot be in the alphabet: its bytes are the piece.
    pieces_.push_back(FindInvalidUtf8(t) == std::string_view::npos ? BpeTextToBytes(t) : t);
  }
}

void BpeTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string_view> words;
  splitter_.Split(text, &words);
  for (std::string_view w : words) EncodeWord(w, out);
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // Symbols form a doubly linked list over the word's bytes; a min-heap holds candidate
  // pairs by (rank, position of the left symbol), so the lowest rank merges first and the
  // leftmost pair wins ties. A popped pair is stale when either symbol has changed since it
  // was pushed; the ids it recorded detect that. O(n log n) for an n-byte word.
  const int n = static_cast<int>(word.size());
  std::vector<int32_t> id(n), prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    id[i] = byte_token_[static_cast<uint8_t>(word[i])];
    if (id[i] < 0) {
      throw InvalidArgument(Concat("byte-level BPE vocabulary has no token for byte ",
                                   static_cast<int>(static_cast<uint8_t>(word[i])),
                                   " and no unknown token"));
    }
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](int left) {
    const int right = next[left];
    if (right < 0) return;
    auto it = merges_.find(PairKey(id[left], id[right]));
    if (it != merges_.end()) heap.push({it->second.rank, left, id[left], id[right]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int left = c.left;
    const int right = next[left];
    if (id[left] != c.left_id || right < 0 || id[right] != c.right_id) continue;  // stale
    id[left] = merges_.at(PairKey(c.left_id, c.right_id)).merged;
    id[right] = -1;  // dead
    next[left] = next[right];
    if (next[left] >= 0) prev[next[left]] = left;
    if (prev[left] >= 0) push(prev[left]);
    push(left);
  }
  std::vector<int32_t> ids;
  for (int i = 0; i >= 0 && i < n; i = next[i]) ids.push_back(id[i]);
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedWords) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

void BpeTokenizer::AppendPiece(int32_t id, std::string* out) const { out->append(pieces_[id]); }

}  // namespace rpa
