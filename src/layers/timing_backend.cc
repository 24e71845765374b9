#include "layers/timing_backend.h"

namespace rpa {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the time from construction to destruction to `total`: counted on every exit,
// exceptions included.
class ScopedTimer {
 public:
  explicit ScopedTimer(Clock::duration& total) : total_(total), start_(Clock::now()) {}
  ~ScopedTimer() { total_ += Clock::now() - start_; }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  Clock::duration& total_;
  Clock::time_point start_;
};

}  // namespace

void TimingBackend::Run(const TensorView& queries, const TensorView& keys, const TensorView& values,
                        const TensorView& kv_cache, const AttentionMetadata& metadata,
                        const AttentionOptions& options, const TensorView& output) {
  ++calls_;
  ScopedTimer timer(total_);
  inner_.Run(queries, keys, values, kv_cache, metadata, options, output);
}

void TimingBackend::RunWithPlans(AttentionPlanCache* plans, const TensorView& queries,
                                 const TensorView& keys, const TensorView& values,
                                 const TensorView& kv_cache, const AttentionMetadata& metadata,
                                 const AttentionOptions& options, const TensorView& output) {
  ++calls_;
  ScopedTimer timer(total_);
  inner_.RunWithPlans(plans, queries, keys, values, kv_cache, metadata, options, output);
}

}  // namespace rpa
