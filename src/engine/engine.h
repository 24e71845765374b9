// Engine: continuous batching over a paged KV cache.
//
// Each step packs the decode tokens of running sequences first, then chunks of prefills
// (running ones, then newly admitted requests in arrival order), within max_num_seqs and the
// token budget; builds the ragged metadata; runs the model once; samples the sequences whose
// chunk reached their end. When a decode cannot get a page, the newest running sequence
// gives its pages back and is recomputed later from its tokens (prompt + generated so far):
// nothing is lost or duplicated, and because sampling draws are a function of (seed, token
// index) its output does not change.
//
// At construction the engine sizes the cache from the memory budget, logs the capacity line
// and (unless disabled) warms up: one decode batch at max_num_seqs, one prefill chunk at the
// token budget and one mixed batch, on scratch pages, so a wrong dtype or shape fails at
// start-up with a clear message instead of at the first request.
//
// Thread safety: AddRequest() may be called from any thread at any time. Step(),
// RunUntilDone() and the accessors belong to one driving thread; token callbacks run on it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/batch_builder.h"
#include "engine/engine_config.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "kv/kv_cache_plan.h"
#include "kv/kv_cache_spec.h"
#include "kv/kv_cache_storage.h"
#include "kv/page_pool.h"
#include "layers/kv_cache_config.h"
#include "model/causal_lm.h"

namespace rpa {

struct EngineStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int32_t peak_running = 0;        // most sequences holding pages at once
  int64_t prompt_tokens = 0;       // prefill tokens computed (recomputation included)
  int64_t generated_tokens = 0;
};

class Engine {
 public:
  // `model` must outlive the engine. Throws InvalidArgument for a bad config, a budget that
  // does not hold one page per sequence, or a failed warmup (naming the batch that failed).
  Engine(CausalLm& model, const KvCacheConfig& kv_config, const EngineConfig& config);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. Throws InvalidArgument (the engine is unaffected) for
  // an empty prompt, token ids outside the vocabulary, prompt + max_tokens beyond the
  // model's context or the whole cache, or invalid sampling parameters.
  int64_t AddRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                     TokenCallback callback = nullptr);

  // Runs one step. Returns false iff there was nothing to do.
  bool Step();
  // Steps until every queued request has finished; returns the results of the requests
  // that finished during the call, by id.
  std::map<int64_t, RequestResult> RunUntilDone();

  bool HasWork();
  const EngineStats& stats() const { return stats_; }
  const KvCacheSpec& kv_spec() const { return spec_; }
  const KvCachePlan& kv_plan() const { return plan_; }
  // The start-up capacity line, e.g. "KV cache: 4096 pages x 16 = 65536 tokens, ...".
  const std::string& capacity_line() const { return capacity_line_; }
  const PagePool& page_pool() const { return *pool_; }

 private:
  void Validate(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  void DrainInbox();
  // Fills chunks_ for this step; may preempt. Returns false iff nothing could run.
  bool Schedule();
  // Gives back the running seq's pages and slot and takes it out of running_.
  std::unique_ptr<Sequence> Release(Sequence* seq);
  void Preempt(Sequence* seq);
  void Admit(Sequence* seq, int32_t chunk);
  void Finish(Sequence* seq, FinishReason reason);
  // Lays out chunks_, runs the model once; returns the logits of the sampled rows.
  std::span<const float> ForwardChunks();
  void RunChunks();
  void Warmup();
  int32_t TakeSlot();

  CausalLm& model_;
  KvCacheConfig kv_config_;
  EngineConfig config_;
  KvCacheSpec spec_;
  KvCachePlan plan_;
  std::string capacity_line_;
  std::unique_ptr<KvCacheStorage> storage_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<BatchBuilder> builder_;
  Sampler sampler_;
  EngineStats stats_;

  std::mutex inbox_mutex_;
  std::deque<std::unique_ptr<Sequence>> inbox_;  // guarded by inbox_mutex_
  int64_t next_id_ = 0;                          // guarded by inbox_mutex_

  std::deque<std::unique_ptr<Sequence>> waiting_;  // arrival order (preempted ones re-inserted)
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order; newest last
  std::vector<int32_t> free_slots_;
  std::vector<ScheduledChunk> chunks_;
  std::vector<float> logits_;
  std::map<int64_t, RequestResult> finished_;
};

}  // namespace rpa
