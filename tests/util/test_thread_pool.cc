// ThreadPool: every task runs exactly once per job, jobs do not overlap, the pool is
// reusable many times (the kernels call it once or twice per layer), and concurrent Run()
// calls from different threads are serialized.
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/aligned_buffer.h"

namespace rpa {
namespace {

TEST(ThreadPool, EveryParticipantRunsOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int participants : {1, 2, 3, 4, 9}) {
    std::vector<std::atomic<int>> hits(4);
    pool.Run(participants, [&](int w) { hits[w].fetch_add(1); });
    const int expected = std::min(participants, 4);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(hits[w].load(), w < expected ? 1 : 0) << w;
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 2000; ++job) {
    pool.Run(3, [&](int w) { total.fetch_add(w + 1); });
  }
  EXPECT_EQ(total.load(), 2000 * (1 + 2 + 3));
}

TEST(ThreadPool, RunReturnsOnlyAfterAllWork) {
  ThreadPool pool(2);
  std::vector<int> out(2, 0);
  for (int job = 1; job <= 200; ++job) {
    pool.Run(2, [&](int w) { out[w] = job; });
    ASSERT_EQ(out[0], job);
    ASSERT_EQ(out[1], job);
  }
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int> inside{0}, max_inside{0};
  auto caller = [&] {
    for (int i = 0; i < 200; ++i) {
      pool.Run(2, [&](int) {
        const int now = inside.fetch_add(1) + 1;
        int seen = max_inside.load();
        while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
        }
        inside.fetch_sub(1);
      });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_LE(max_inside.load(), 2);  // one job (two participants) at a time
}

// While the caller is busy with task 0, an awake worker takes task 1 on its own thread.
TEST(ThreadPool, WorkerTakesTasksWhileCallerIsBusy) {
  ThreadPool pool(2);
  std::vector<std::thread::id> ran_on(2);
  pool.Run(2, [&](int t) {
    ran_on[t] = std::this_thread::get_id();
    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  EXPECT_EQ(ran_on[0], std::this_thread::get_id());
  EXPECT_NE(ran_on[1], std::this_thread::get_id());
}

// Tasks that sleep at random: each still runs exactly once per job, whichever thread takes
// it (a late worker may find nothing left and skip the job).
TEST(ThreadPool, UnevenTasksRunExactlyOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(2);
  for (int job = 0; job < 300; ++job) {
    pool.Run(2, [&](int t) {
      if ((job + t) % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      hits[t].fetch_add(1);
    });
  }
  EXPECT_EQ(hits[0].load(), 300);
  EXPECT_EQ(hits[1].load(), 300);
}

// An exception from the caller's task propagates once the workers are out of the job, and
// the pool stays usable.
TEST(ThreadPool, CallerExceptionPropagatesAndPoolSurvives) {
  ThreadPool pool(2);
  std::atomic<int> other{0};
  EXPECT_THROW(pool.Run(2,
                        [&](int t) {
                          if (t == 0) throw std::runtime_error("task 0");
                          other.fetch_add(1);
                        }),
               std::runtime_error);
  std::atomic<int> total{0};
  pool.Run(2, [&](int t) { total.fetch_add(t + 1); });
  EXPECT_EQ(total.load(), 3);
}

TEST(ThreadPool, SingleThreadPoolRunsInline) {
  ThreadPool pool(0);  // < 1 means 1
  EXPECT_EQ(pool.num_threads(), 1);
  int ran = 0;
  pool.Run(4, [&](int w) { ran += 1 + w; });
  EXPECT_EQ(ran, 1);
}

TEST(AlignedBuffer, AlignedAndGrows) {
  AlignedBuffer<float> b;
  EXPECT_EQ(b.capacity(), 0u);
  b.Reserve(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer<float>::kAlignment, 0u);
  b.Reserve(1000);
  EXPECT_GE(b.capacity(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer<float>::kAlignment, 0u);
  b[999] = 1.0f;
  EXPECT_EQ(b[999], 1.0f);
}

}  // namespace
}  // namespace rpa
