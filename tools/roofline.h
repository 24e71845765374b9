// The machine's two ceilings, measured in-process for roofline figures:
//  - read bandwidth: a STREAM-like pass that sums a buffer much larger than the last-level
//    cache, split across the workers of the global thread pool;
//  - FMA peak: every worker runs independent chains of f32 vector FMAs, enough of them to
//    cover the FMA latency on every port.
// Each is the best of `reps` runs: a ceiling, not a typical value (other processes on a
// shared machine only ever lower it). Rates are given per wall second and per CPU second of
// a worker; the latter is what a loaded machine cannot disturb as much.
#pragma once

#include <cstddef>

namespace rpa::cli {

struct Rate {
  double per_wall_s = 0;  // units per elapsed second
  double per_cpu_s = 0;   // units per (process CPU seconds / workers)
};

// Bytes per second read by `threads` workers summing a `bytes`-byte buffer.
Rate MeasureReadBandwidth(int threads, size_t bytes, int reps);

// f32 FLOPs per second (an FMA counts 2) of `threads` workers.
Rate MeasureFmaPeak(int threads, int reps);

// CPU seconds used by the whole process so far.
double ProcessCpuSeconds();

}  // namespace rpa::cli
