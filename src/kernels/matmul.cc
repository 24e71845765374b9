// MatMul, Highway SIMD with dynamic dispatch.
//
// Both operands are read along K, their contiguous dimension, so every output element is a
// dot product of two contiguous rows. The kernel walks y in register tiles of kRows x rows
// by kCols w rows: kRows * kCols vector accumulators, and per K step kRows + kCols vector
// loads feed kRows * kCols FMAs, so each loaded vector is reused 4 or 2 times from
// registers instead of being reloaded per output. With 2 x 4 the tile needs 8 accumulators
// + 6 operands, which fits AVX2's 16 registers without spills (AVX-512 has 32). Edge tiles
// use the same code with smaller compile-time sizes. The K tail (K not a multiple of the
// vector length) is finished in scalar code, so no load ever reads past a row.
// Threads split the columns (rows of w) in blocks of whole tiles: each thread streams its own
// slice of the weights, which is what a memory-bound decode step needs. Every output element
// is computed by the same code whatever the split, so results do not depend on the number of
// threads or on M.
// Projection weights are re-read once per 2 rows of x; for the serving shapes (T up to a
// few hundred, weights in L2/L3) that is the dominant traffic and is what a larger M tile
// would cut next.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "kernels/matmul.h"

#include <algorithm>

#include "util/thread_pool.h"

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[r, c] for r in [0, kRows), c in [0, kCols) of the tile whose top-left is (x, w).
// ldy is y's row stride.
template <size_t kRows, size_t kCols>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                     float* HWY_RESTRICT y, size_t ldy, size_t k) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V acc[kRows][kCols];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols; ++c) acc[r][c] = hn::Zero(d);
  }
  size_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    V wv[kCols];
    for (size_t c = 0; c < kCols; ++c) wv[c] = hn::LoadU(d, w + c * k + i);
    for (size_t r = 0; r < kRows; ++r) {
      const V xv = hn::LoadU(d, x + r * k + i);
      for (size_t c = 0; c < kCols; ++c) acc[r][c] = hn::MulAdd(xv, wv[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < kCols; ++c) {
      float sum = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
      for (size_t j = i; j < k; ++j) sum += x[r * k + j] * w[c * k + j];
      y[r * ldy + c] = sum;
    }
  }
}

// All columns of kRows rows of y.
template <size_t kRows>
HWY_INLINE void RowBlock(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                         float* HWY_RESTRICT y, size_t n, size_t ldy, size_t k) {
  constexpr size_t kCols = 4;
  size_t c = 0;
  for (; c + kCols <= n; c += kCols) Tile<kRows, kCols>(x, w + c * k, y + c, ldy, k);
  for (; c < n; ++c) Tile<kRows, 1>(x, w + c * k, y + c, ldy, k);
}

// Columns [0, n) of y (row stride ldy) from n rows of w.
void MatMulImpl(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, float* HWY_RESTRICT y,
                size_t m, size_t n, size_t ldy, size_t k) {
  constexpr size_t kRows = 2;
  size_t r = 0;
  for (; r + kRows <= m; r += kRows) RowBlock<kRows>(x + r * k, w, y + r * ldy, n, ldy, k);
  for (; r < m; ++r) RowBlock<1>(x + r * k, w, y + r * ldy, n, ldy, k);
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {

HWY_EXPORT(MatMulImpl);

namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs
// a few microseconds, about what ~2^16 FMAs take on one core.
constexpr size_t kMinParallelFmas = size_t{1} << 16;
// Columns are split in blocks of this many: a whole number of 4-column register tiles.
constexpr size_t kColumnBlock = 16;

}  // namespace

void MatMul(const float* x, const float* w, float* y, size_t m, size_t n, size_t k) {
  const auto impl = HWY_DYNAMIC_DISPATCH(MatMulImpl);
  ThreadPool& pool = ThreadPool::Global();
  const size_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  const int threads = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(pool.num_threads()), blocks));
  if (threads <= 1 || m * n * k < kMinParallelFmas) {
    impl(x, w, y, m, n, n, k);
    return;
  }
  pool.Run(threads, [&](int t) {
    // Thread t takes blocks [t * blocks / threads, (t + 1) * blocks / threads).
    const size_t c0 = std::min(n, t * blocks / threads * kColumnBlock);
    const size_t c1 = std::min(n, (t + 1) * blocks / threads * kColumnBlock);
    if (c1 > c0) impl(x, w + c0 * k, y + c0, m, c1 - c0, n, k);
  });
}

}  // namespace rpa
#endif  // HWY_ONCE
