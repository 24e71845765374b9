// ThreadPool: a fixed set of persistent worker threads that run one parallel job at a time.
//
// Kernels call Run() once or twice per entry point; creating threads per call would cost
// tens of microseconds each, far more than a decode step's dispatch budget. Workers spin
// for a while after a job (the next one usually follows at once, e.g. the merge phase or
// the next layer), then sleep on a futex (std::atomic::wait) so an idle pool costs no CPU.
//
// A job's calls are tasks, not thread assignments: whoever is free takes the next task
// index, the caller included, and a worker that has not started by the time the caller has
// run out of tasks skips the job. On a machine shared with other processes a descheduled
// worker therefore costs at most the task it holds, instead of stalling every job until the
// OS runs it again (which made batch-1 decode several times slower under load).
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

  // Runs fn(task) once for each task in [0, participants), concurrently on up to
  // participants threads (the caller runs task 0 and any task no worker has taken), and
  // returns when every call has returned. participants is clamped to [1, num_threads()].
  // fn must not assume which thread runs a task, nor that tasks run at the same time (no
  // barriers between tasks). An exception thrown by fn on the caller propagates after the
  // workers are done (tasks not started by then are skipped); one thrown on a worker
  // terminates the process (kernels report errors by validating before they run).
  void Run(int participants, const std::function<void(int task)>& fn);

  // The process-wide pool the kernels use, sized to the hardware concurrency.
  static ThreadPool& Global();

 private:
  // job_state_: the job's generation (high 32 bits), kClosed, and the number of workers
  // inside the job (low bits). A worker joins only an open job of the generation it woke
  // for; the caller closes the job when no task is left and waits for the joined ones.
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kActiveMask = kClosed - 1;

  void WorkerLoop();
  // Runs tasks from next_task_ until none is left.
  void RunTasks();

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // serializes Run()
  const std::function<void(int)>* job_ = nullptr;
  int participants_ = 0;
  std::atomic<int> next_task_{0};
  std::atomic<uint64_t> generation_{0};  // bumped once per job; idle workers wait on it
  std::atomic<uint64_t> job_state_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace rpa
