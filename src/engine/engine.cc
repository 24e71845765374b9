#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "util/error.h"

namespace rpa {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
  }
  return "invalid";
}

namespace {

int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace

Engine::Engine(CausalLm& model, const KvCacheConfig& kv_config, const EngineConfig& config)
    : model_(model), kv_config_(kv_config), config_(config) {
  const ModelInfo& info = model_.info();
  if (config_.max_num_seqs <= 0 || config_.max_num_batched_tokens <= 0 ||
      config_.page_size <= 0) {
    throw InvalidArgument(Concat("Invalid engine config: max_num_seqs=", config_.max_num_seqs,
                                 ", max_num_batched_tokens=", config_.max_num_batched_tokens,
                                 ", page_size=", config_.page_size, " (all must be > 0)"));
  }
  if (kv_config_.num_layers() != info.num_layers) {
    throw InvalidArgument(Concat("KV cache config has ", kv_config_.num_layers(),
                                 " layers; the model has ", info.num_layers));
  }
  spec_.num_layers = info.num_layers;
  spec_.num_kv_heads = info.num_kv_heads;
  spec_.head_dim = info.head_dim;
  spec_.page_size = config_.page_size;
  spec_.dtype = kv_config_.dtype();
  spec_.kv_donor = info.kv_donor;
  spec_.Validate();
  plan_ = PlanKvCache(spec_, config_.kv_cache_bytes, config_.max_num_seqs);
  capacity_line_ = DescribeKvCache(spec_, plan_);

  KvCacheStorageOptions storage_options;
  storage_options.fill = config_.nan_fill_cache ? KvCacheStorageOptions::Fill::kNaN
                                                : KvCacheStorageOptions::Fill::kZero;
  storage_ = std::make_unique<KvCacheStorage>(spec_, plan_.num_pages, storage_options);
  const int32_t pages_per_seq = CeilDiv(info.max_context, config_.page_size);
  pool_ = std::make_unique<PagePool>(
      PagePoolOptions{plan_.num_pages, config_.page_size, config_.max_num_seqs, pages_per_seq});
  builder_ = std::make_unique<BatchBuilder>(config_.max_num_seqs,
                                            config_.max_num_batched_tokens, pages_per_seq);
  chunks_.reserve(config_.max_num_seqs);
  running_.reserve(config_.max_num_seqs);
  logits_.resize(static_cast<size_t>(config_.max_num_seqs) * info.vocab_size);
  for (int32_t s = config_.max_num_seqs - 1; s >= 0; --s) free_slots_.push_back(s);
  if (config_.warmup) Warmup();
}

void Engine::Validate(const std::vector<int32_t>& prompt, const SamplingParams& params) const {
  const ModelInfo& info = model_.info();
  if (prompt.empty()) throw InvalidArgument("prompt is empty; a request needs at least one token");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= info.vocab_size) {
      throw InvalidArgument(Concat("prompt token ", prompt[i], " at index ", i,
                                   " is outside the vocabulary [0, ", info.vocab_size, ")"));
    }
  }
  ValidateSamplingParams(params, info.vocab_size);
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  if (total > info.max_context) {
    throw InvalidArgument(Concat("prompt (", prompt.size(), " tokens) + max_tokens (",
                                 params.max_tokens, ") = ", total,
                                 " exceeds the model's context of ", info.max_context,
                                 " tokens"));
  }
  if (total > plan_.num_tokens()) {
    throw InvalidArgument(Concat("prompt (", prompt.size(), " tokens) + max_tokens (",
                                 params.max_tokens, ") = ", total,
                                 " exceeds the KV cache capacity of ", plan_.num_tokens(),
                                 " tokens"));
  }
}

int64_t Engine::AddRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                           TokenCallback callback) {
  Validate(prompt, params);
  auto seq = std::make_unique<Sequence>();
  seq->prompt_len = static_cast<int32_t>(prompt.size());
  seq->tokens = std::move(prompt);
  seq->tokens.reserve(seq->tokens.size() + params.max_tokens);
  seq->params = params;
  seq->callback = std::move(callback);
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  seq->id = next_id_++;
  const int64_t id = seq->id;
  inbox_.push_back(std::move(seq));
  return id;
}

void Engine::DrainInbox() {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  while (!inbox_.empty()) {
    waiting_.push_back(std::move(inbox_.front()));
    inbox_.pop_front();
  }
}

bool Engine::HasWork() {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  return !inbox_.empty() || !waiting_.empty() || !running_.empty();
}

int32_t Engine::TakeSlot() {
  RPA_CHECK(!free_slots_.empty());
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

std::unique_ptr<Sequence> Engine::Release(Sequence* seq) {
  pool_->Free(seq->slot);
  free_slots_.push_back(seq->slot);
  seq->slot = -1;
  auto it = std::find_if(running_.begin(), running_.end(),
                         [seq](const auto& p) { return p.get() == seq; });
  RPA_CHECK(it != running_.end());
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  return owned;
}

void Engine::Preempt(Sequence* seq) {
  std::unique_ptr<Sequence> owned = Release(seq);
  seq->num_computed = 0;
  ++seq->num_preemptions;
  ++stats_.preemptions;
  // Back into the queue at its arrival position, so it is re-admitted before newer ones.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [seq](const auto& w) { return w->id > seq->id; });
  waiting_.insert(pos, std::move(owned));
}

void Engine::Admit(Sequence* seq, int32_t chunk) {
  seq->slot = TakeSlot();
  RPA_CHECK(pool_->Allocate(seq->slot, chunk));
  RPA_CHECK(waiting_.front().get() == seq);
  running_.push_back(std::move(waiting_.front()));
  waiting_.pop_front();
  stats_.peak_running = std::max(stats_.peak_running, static_cast<int32_t>(running_.size()));
}

bool Engine::Schedule() {
  const int32_t page_size = config_.page_size;
  for (;;) {
    chunks_.clear();
    int32_t budget = config_.max_num_batched_tokens;
    // 1. Decodes, oldest first. A decode that cannot get a page preempts the newest
    //    running sequence (possibly itself).
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i].get();
      if (s->num_pending() != 1) continue;
      bool self_preempted = false;
      while (!pool_->CanGrow(s->slot, s->num_computed + 1)) {
        Sequence* victim = running_.back().get();
        Preempt(victim);
        if (victim == s) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;  // s was the newest: nothing after it is running any more
      RPA_CHECK(pool_->Grow(s->slot, s->num_computed + 1));
      chunks_.push_back({s, 1, true});
      --budget;
    }
    // 2. Chunks of prefills already running, as far as free pages allow.
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i].get();
      if (s->num_pending() <= 1) continue;
      const int64_t fits =
          static_cast<int64_t>(pool_->NumPages(s->slot) + pool_->NumFreePages()) * page_size -
          s->num_computed;
      const int32_t chunk =
          static_cast<int32_t>(std::min<int64_t>({s->num_pending(), budget, fits}));
      if (chunk <= 0) continue;
      RPA_CHECK(pool_->Grow(s->slot, s->num_computed + chunk));
      chunks_.push_back({s, chunk, chunk == s->num_pending()});
      budget -= chunk;
    }
    // 3. New (or preempted) requests in arrival order, while slots, budget and pages last.
    while (!waiting_.empty() && budget > 0 && !free_slots_.empty()) {
      Sequence* s = waiting_.front().get();
      const int64_t fits = static_cast<int64_t>(pool_->NumFreePages()) * page_size;
      const int32_t chunk =
          static_cast<int32_t>(std::min<int64_t>({s->num_pending(), budget, fits}));
      if (chunk <= 0) break;
      Admit(s, chunk);
      chunks_.push_back({s, chunk, chunk == s->num_pending()});
      budget -= chunk;
    }
    if (!chunks_.empty()) return true;
    if (running_.empty()) return false;
    // Every running sequence is a prefill starved of pages: give the newest one's pages
    // back so the older ones can go on (requests never exceed the whole cache, so this
    // terminates).
    Preempt(running_.back().get());
  }
}

void Engine::Finish(Sequence* seq, FinishReason reason) {
  const std::unique_ptr<Sequence> owned = Release(seq);  // destroyed on return
  RequestResult r;
  r.request_id = seq->id;
  r.prompt.assign(seq->tokens.begin(), seq->tokens.begin() + seq->prompt_len);
  r.generated.assign(seq->tokens.begin() + seq->prompt_len, seq->tokens.end());
  r.finish = reason;
  r.num_preemptions = seq->num_preemptions;
  finished_[seq->id] = std::move(r);
}

std::span<const float> Engine::ForwardChunks() {
  const StepInput in = builder_->Build(chunks_, *pool_);
  std::span<float> logits(logits_.data(),
                          in.logit_rows.size() * static_cast<size_t>(model_.info().vocab_size));
  model_.Forward(in, *storage_, kv_config_, logits);
  return logits;
}

void Engine::RunChunks() {
  const int32_t vocab = model_.info().vocab_size;
  const std::span<const float> logits = ForwardChunks();
  for (const ScheduledChunk& c : chunks_) {
    if (c.q_len > 1 || c.seq->num_computed < c.seq->prompt_len) stats_.prompt_tokens += c.q_len;
    c.seq->num_computed += c.q_len;
  }
  const int32_t eos = model_.info().eos_token;
  std::span<ScheduledChunk* const> sampled = builder_->sampled();
  for (size_t k = 0; k < sampled.size(); ++k) {
    Sequence* s = sampled[k]->seq;
    const int32_t index = s->num_generated();
    const int32_t token = sampler_.Sample(logits.subspan(k * vocab, vocab), s->params, index);
    s->tokens.push_back(token);
    ++stats_.generated_tokens;
    FinishReason reason = FinishReason::kNone;
    const auto& stops = s->params.stop_tokens;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      reason = FinishReason::kStop;
    } else if (!s->params.ignore_eos && eos >= 0 && token == eos) {
      reason = FinishReason::kEos;
    } else if (s->num_generated() >= s->params.max_tokens) {
      reason = FinishReason::kLength;
    }
    if (s->callback) s->callback(TokenEvent{s->id, token, index, reason});
    if (reason != FinishReason::kNone) Finish(s, reason);
  }
}

bool Engine::Step() {
  DrainInbox();
  if (!Schedule()) return false;
  RunChunks();
  ++stats_.steps;
  return true;
}

std::map<int64_t, RequestResult> Engine::RunUntilDone() {
  while (Step()) {
  }
  return std::exchange(finished_, {});
}

void Engine::Warmup() {
  // Synthetic sequences of token 0 through the real path (builder, model, kernel), on
  // pages taken from the pool and given back, so nothing of it survives into serving.
  const int32_t page_size = config_.page_size;
  const int32_t max_tokens = std::min<int32_t>(
      {config_.max_num_batched_tokens, model_.info().max_context,
       static_cast<int32_t>(std::min<int64_t>(plan_.num_tokens(), INT32_MAX))});
  std::vector<std::unique_ptr<Sequence>> seqs;
  auto make = [&](int32_t len, int32_t computed) {
    auto s = std::make_unique<Sequence>();
    s->tokens.assign(len, 0);
    s->prompt_len = len;
    s->num_computed = computed;
    s->slot = TakeSlot();
    RPA_CHECK(pool_->Allocate(s->slot, len));
    seqs.push_back(std::move(s));
    return seqs.back().get();
  };
  auto run = [&](const char* what) {
    try {
      ForwardChunks();
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(Concat("engine warmup failed on the ", what, " batch (KV cache ",
                                   DTypeName(spec_.dtype), "): ", e.what()));
    }
    for (auto& s : seqs) {
      pool_->Free(s->slot);
      free_slots_.push_back(s->slot);
    }
    seqs.clear();
    chunks_.clear();
  };
  // 1. Decode-only at max_num_seqs (one page each, as far as the cache allows).
  const int32_t n_decode = std::min(config_.max_num_seqs, plan_.num_pages);
  for (int32_t i = 0; i < n_decode && i < max_tokens; ++i) chunks_.push_back({make(1, 0), 1, true});
  run("decode");
  // 2. One prefill chunk at the token budget.
  chunks_.push_back({make(max_tokens, 0), max_tokens, true});
  run("prefill");
  // 3. Mixed: a decode over one cached token, and a prefill chunk over cached context.
  if (max_tokens >= 4 && config_.max_num_seqs >= 2 && plan_.num_pages >= 2 + CeilDiv(max_tokens, page_size)) {
    chunks_.push_back({make(2, 1), 1, true});
    chunks_.push_back({make(max_tokens - 1, 1), max_tokens - 2, true});
    run("mixed");
  }
  pool_->CheckInvariants();
}

}  // namespace rpa
