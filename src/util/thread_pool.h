// ThreadPool: a fixed set of persistent worker threads that run one parallel job at a time.
//
// Kernels call Run() once or twice per entry point; creating threads per call would cost
// tens of microseconds each, far more than a decode step's dispatch budget. Workers spin
// briefly after a job (the next one usually follows at once, e.g. the merge phase or the
// next layer), then sleep on a futex (std::atomic::wait) so an idle pool costs no CPU.
//
// Thread safety: Run() may be called from any thread; concurrent calls are serialized.
// REQUIRES: fn never calls Run() on the same pool (that would deadlock).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rpa {

class ThreadPool {
 public:
  // num_threads: total participants including the caller of Run(); spawns num_threads - 1
  // workers. Values < 1 mean 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(worker) for worker in [0, participants) concurrently, the caller being worker 0,
  // and returns when every call has returned. participants is clamped to
  // [1, num_threads()]. An exception thrown by fn on a worker thread terminates the process
  // (kernels report errors by validating before they run).
  void Run(int participants, const std::function<void(int worker)>& fn);

  // The process-wide pool the kernels use, sized to the hardware concurrency.
  static ThreadPool& Global();

 private:
  void WorkerLoop(int worker);

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // serializes Run()
  const std::function<void(int)>* job_ = nullptr;
  int participants_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped once per job; workers wait on it
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace rpa
