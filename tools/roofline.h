// The machine's two ceilings, measured in-process for roofline figures:
//  - read bandwidth: a STREAM-like pass that sums a buffer much larger than the last-level
//    cache, split across the workers of the global thread pool;
//  - FMA peak: every worker runs independent chains of f32 vector FMAs, enough of them to
//    cover the FMA latency on every port.
// Each is the best of `reps` runs: a ceiling, not a typical value (other processes on a
// shared machine only ever lower it).
#pragma once

#include <cstddef>

namespace rpa::cli {

// Bytes per second read by `threads` workers summing a `bytes`-byte buffer.
double MeasureReadBandwidth(int threads, size_t bytes, int reps);

// f32 FLOPs per second (an FMA counts 2) of `threads` workers.
double MeasureFmaPeak(int threads, int reps);

}  // namespace rpa::cli
