#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gated_activation.cc"
#include "kernels/gated_activation.h"

#include <algorithm>
#include <atomic>

#include "util/thread_pool.h"

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <GateActivation kAct>
void GatedActivationRangeT(const float* gate, const float* up, float* out, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const auto one = hn::Set(df, 1.0f);
  const auto half = hn::Set(df, 0.5f);
  const auto c0 = hn::Set(df, 0.7978845608028654f);  // sqrt(2 / pi)
  const auto c1 = hn::Set(df, 0.044715f);
  auto act = [&](hn::Vec<decltype(df)> x) {
    if constexpr (kAct == GateActivation::kSilu) {
      // exp(-x) overflows to inf for x < -88: x / inf = -0, the limit.
      return hn::Div(x, hn::Add(one, hn::Exp(df, hn::Neg(x))));
    } else {
      const auto u = hn::Mul(c0, hn::MulAdd(hn::Mul(c1, x), hn::Mul(x, x), x));
      return hn::Mul(hn::Mul(half, x), hn::Add(one, hn::Tanh(df, u)));
    }
  };
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(act(hn::LoadU(df, gate + i)), hn::LoadU(df, up + i)), df, out + i);
  }
  if (i < n) {  // the tail through a padded vector, so it gets the same formulas
    const size_t r = n - i;
    HWY_ALIGN float g[hn::MaxLanes(df)] = {}, u[hn::MaxLanes(df)] = {}, o[hn::MaxLanes(df)];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    hn::Store(hn::Mul(act(hn::Load(df, g)), hn::Load(df, u)), df, o);
    std::copy(o, o + r, out + i);
  }
}

void GatedActivationRange(GateActivation act, const float* gate, const float* up, float* out,
                          size_t n) {
  if (act == GateActivation::kSilu) {
    GatedActivationRangeT<GateActivation::kSilu>(gate, up, out, n);
  } else {
    GatedActivationRangeT<GateActivation::kGeluTanh>(gate, up, out, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {

HWY_EXPORT(GatedActivationRange);

void GatedActivation(GateActivation act, const float* gate, const float* up, float* out,
                     size_t n) {
  // Chunks of 16 Ki elements (64 KiB per operand): big enough to amortize a task claim,
  // small enough to balance two cores over one token's FFN row (decode: one chunk or less,
  // run inline without waking the pool).
  constexpr size_t kChunk = size_t{1} << 14;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) {
    HWY_DYNAMIC_DISPATCH(GatedActivationRange)(act, gate, up, out, n);
    return;
  }
  ThreadPool& pool = ThreadPool::Global();
  std::atomic<size_t> next{0};
  pool.Run(static_cast<int>(std::min<size_t>(chunks, pool.num_threads())), [&](int) {
    for (size_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      const size_t b = c * kChunk, e = std::min(n, b + kChunk);
      HWY_DYNAMIC_DISPATCH(GatedActivationRange)(act, gate + b, up + b, out + b, e - b);
    }
  });
}

}  // namespace rpa
#endif  // HWY_ONCE
