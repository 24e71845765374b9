#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rpa {
namespace {

// How long a worker busy-waits for the next job before sleeping. Waking a sleeping thread
// costs ~200 µs on this VM (futex wake + scheduling), and a decode step is hundreds of
// jobs separated by short serial stretches (norms, RoPE, sampling): with a spin of a few
// microseconds the workers slept between most of them and a batch-1 SmolLM2 step spent
// ~70% of its time waking them. 2 ms covers the gaps inside and between steps; an idle
// engine stops spinning 2 ms after its last job.
constexpr std::chrono::microseconds kSpinTime{2000};
// The caller's wait for the workers' acknowledgements: they are running the same job, so
// only a short spin before sleeping.
constexpr int kCallerSpinIterations = 1 << 13;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  const int n = std::max(num_threads, 1);
  workers_.reserve(n - 1);
  for (int w = 1; w < n; ++w) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunTasks() {
  for (int t = next_task_.fetch_add(1, std::memory_order_relaxed); t < participants_;
       t = next_task_.fetch_add(1, std::memory_order_relaxed)) {
    (*job_)(t);
  }
}

void ThreadPool::Run(int participants, const std::function<void(int)>& fn) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  participants = std::clamp(participants, 1, num_threads());
  if (participants == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  participants_ = participants;
  next_task_.store(1, std::memory_order_relaxed);  // task 0 is the caller's
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_state_.store((gen & 0xFFFFFFFFu) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  // Close the job and wait for the workers inside it, also when fn throws: they read job_.
  auto finish = [&] {
    uint64_t s = job_state_.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
    for (int spin = 0; (s & kActiveMask) != 0 && spin < kCallerSpinIterations; ++spin) {
      CpuRelax();
      s = job_state_.load(std::memory_order_acquire);
    }
    while ((s & kActiveMask) != 0) {
      job_state_.wait(s, std::memory_order_acquire);
      s = job_state_.load(std::memory_order_acquire);
    }
  };
  try {
    fn(0);
    RunTasks();
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    const auto spin_end = std::chrono::steady_clock::now() + kSpinTime;
    for (int spin = 1; gen == seen; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
      // Reading the clock costs ~20 ns: once per 64 pauses.
      if (spin % 64 == 0 && std::chrono::steady_clock::now() > spin_end) break;
    }
    while (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    // Join the job of generation `gen` unless it is closed or already replaced.
    uint64_t s = job_state_.load(std::memory_order_acquire);
    bool joined = false;
    while ((s >> 32) == (gen & 0xFFFFFFFFu) && (s & kClosed) == 0) {
      if (job_state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    RunTasks();
    s = job_state_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    if ((s & kActiveMask) == 0 && (s & kClosed) != 0) job_state_.notify_all();
  }
}

ThreadPool& ThreadPool::Global() {
  static ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace rpa
