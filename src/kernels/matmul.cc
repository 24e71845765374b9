// MatMul, Highway SIMD with dynamic dispatch: a register-blocked GEMM over the panel layout
// of packed_weights.h.
//
// Micro-kernel: kRows rows of x times two vectors of one panel's columns (vector A holds
// columns o..o+L-1, vector B columns 16+o..16+o+L-1, L = lanes ≤ 16). Per K step it loads
// the two weight vectors once and broadcasts one x value per row: 2 * kRows FMAs per
// 2 + kRows loads, the weights coming from L1 and x's rows from L1/L2. kRows * 2
// accumulators + 2 weights + 1 broadcast must fit the register file: kRows = 12 with 32
// vector registers (AVX-512, NEON), 6 with 16 (AVX2 and older x86). A panel takes
// 16 / L passes (1 on AVX-512, 2 on AVX2).
//
// Blocking (the classic GEMM order, sized for a 32-48 KiB L1 and ≥ 1 MiB L2):
//   for each block of kRowBlock rows of x          (x block: 96 x 128 f32 = 48 KiB, L2)
//     for each block of kDepthBlock K steps        (panel chunk: 128 x 32 f32 = 16 KiB, L1)
//       for each panel of this thread, each pass, each kRows tile of the row block
// so a panel chunk is reused by every row of the block from L1 and x's block by every panel
// from L2. Each K block's chain starts from zero in registers and is added to y after it:
// an accumulator loaded from y before the loop makes GCC keep the whole accumulator array
// on the stack (a store per FMA). For decode (M ≤ 12) this is one pass over the weights, a
// sequential stream per panel — the memory-bound case.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "util/thread_pool.h"

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rpa {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::CappedTag<float, 16>;
using V = hn::Vec<D>;

#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr size_t kMaxRows = 6;  // 16 vector registers
#else
constexpr size_t kMaxRows = 12;  // 32 vector registers
#endif
constexpr size_t kRowBlock = 96;  // a multiple of both kMaxRows
// 128, not 256: a 256-step f32 panel chunk (32 KiB) plus a 12-row x tile (12 KiB) nearly
// fills a 48 KiB L1, and prefill measured ~10% slower with it.
constexpr size_t kDepthBlock = 128;
constexpr size_t kPanel = PackedWeights::kPanelCols;

// The two weight vectors of K step `k` of a panel at lane offset o.
template <WeightFormat kFormat>
HWY_INLINE void LoadWeights(const void* HWY_RESTRICT panel, size_t k, size_t o, V& a, V& b) {
  const D d;
  if constexpr (kFormat == WeightFormat::kFloat32) {
    const float* p = static_cast<const float*>(panel) + k * kPanel + o;
    a = hn::LoadU(d, p);
    b = hn::LoadU(d, p + 16);
  } else {
    // 32-bit word i of a K step holds bf16 columns i (low half) and i + 16 (high half);
    // a bf16 is the top half of its f32, so the low half moves up and the high half is
    // masked in place.
    const hn::RebindToUnsigned<D> du;
    const uint32_t* p = static_cast<const uint32_t*>(panel) + k * (kPanel / 2) + o;
    const auto words = hn::LoadU(du, p);
    a = hn::BitCast(d, hn::ShiftLeft<16>(words));
    b = hn::BitCast(d, hn::And(words, hn::Set(du, 0xFFFF0000u)));
  }
}

// y[r, A/B columns] (+)= x[r, k0..k1) · panel[k0..k1) for r < kRows. x and y point at the
// tile's first row (x at column 0, y at the panel's first column); all 32 columns of y are
// stored (the caller passes a scratch tile for a partial panel).
template <size_t kRows, WeightFormat kFormat, bool kPrefetch>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT x, size_t ldx, const void* HWY_RESTRICT panel,
                       size_t k0, size_t k1, size_t o, float* HWY_RESTRICT y, size_t ldy,
                       bool accumulate) {
  const D d;
  V acc[kRows][2];
  for (size_t r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = hn::Zero(d);
  // Streaming (panel-major) calls prefetch kPrefetchBytes ahead along the panel (past its
  // end it touches the next panel or nothing; a prefetch never faults). The hardware
  // prefetchers alone left decode at ~0.5 of the read bandwidth; with this SmolLM2's batch-1
  // step went 23.3 -> 14.7 ms and batch 32 37.7 -> 29.7 ms in one run (8 KiB measured better
  // than 4 and as good as 16). K-blocked calls (prefill) reuse a panel chunk from L1, where
  // prefetching the next block would only evict x's block (measured: 2x slower f32 prefill).
  constexpr size_t kStepBytes = kFormat == WeightFormat::kFloat32 ? kPanel * 4 : kPanel * 2;
  constexpr size_t kPrefetchBytes = 8192;
  const uint8_t* ahead = static_cast<const uint8_t*>(panel) + kPrefetchBytes;
  for (size_t k = k0; k < k1; ++k) {
    V a, b;
    if constexpr (kPrefetch) {
      for (size_t line = 0; line < kStepBytes; line += 64) {
        hwy::Prefetch(ahead + k * kStepBytes + line);
      }
    }
    LoadWeights<kFormat>(panel, k, o, a, b);
    for (size_t r = 0; r < kRows; ++r) {
      const V xv = hn::Set(d, x[r * ldx + k]);
      acc[r][0] = hn::MulAdd(xv, a, acc[r][0]);
      acc[r][1] = hn::MulAdd(xv, b, acc[r][1]);
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    float* row = y + r * ldy;
    if (accumulate) {
      acc[r][0] = hn::Add(hn::LoadU(d, row + o), acc[r][0]);
      acc[r][1] = hn::Add(hn::LoadU(d, row + 16 + o), acc[r][1]);
    }
    hn::StoreU(acc[r][0], d, row + o);
    hn::StoreU(acc[r][1], d, row + 16 + o);
  }
}

// Tile<rows> for a run-time rows in [1, kRows].
template <size_t kRows, WeightFormat kFormat, bool kPrefetch>
HWY_INLINE void TileRows(size_t rows, const float* x, size_t ldx, const void* panel, size_t k0,
                         size_t k1, size_t o, float* y, size_t ldy, bool accumulate) {
  if constexpr (kRows == 1) {
    Tile<1, kFormat, kPrefetch>(x, ldx, panel, k0, k1, o, y, ldy, accumulate);
  } else {
    if (rows == kRows) {
      Tile<kRows, kFormat, kPrefetch>(x, ldx, panel, k0, k1, o, y, ldy, accumulate);
    } else {
      TileRows<kRows - 1, kFormat, kPrefetch>(rows, x, ldx, panel, k0, k1, o, y, ldy,
                                              accumulate);
    }
  }
}

template <WeightFormat kFormat>
void Panels(const float* HWY_RESTRICT x, const PackedWeights& w, float* HWY_RESTRICT y,
            size_t m, size_t p0, size_t p1) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  const size_t n = w.rows(), k = w.cols();
  // A partial last panel is computed into this [kRowBlock, 32] tile and its real columns
  // copied out, so no vector ever touches y past a row's end.
  HWY_ALIGN float edge[kRowBlock * kPanel];
  // One (row block, K block, panel) step; y holds the previous K blocks' sum.
  auto step = [&](size_t m0, size_t m1, size_t k0, size_t p, auto prefetch) {
    const size_t k1 = std::min(k, k0 + kDepthBlock);
    const size_t cols = std::min(kPanel, n - p * kPanel);
    float* out = y + m0 * n + p * kPanel;
    size_t ld = n;
    if (cols < kPanel) {
      out = edge;
      ld = kPanel;
      for (size_t r = m0; r < m1; ++r) {
        if (k0 > 0) std::memcpy(edge + (r - m0) * kPanel, y + r * n + p * kPanel, cols * 4);
      }
    }
    for (size_t o = 0; o < 16; o += lanes) {
      for (size_t r = m0; r < m1; r += kMaxRows) {
        TileRows<kMaxRows, kFormat, decltype(prefetch)::value>(
            std::min(kMaxRows, m1 - r), x + r * k, k, w.panel(p), k0, k1, o,
            out + (r - m0) * ld, ld, k0 > 0);
      }
    }
    if (cols < kPanel) {
      for (size_t r = m0; r < m1; ++r) {
        std::memcpy(y + r * n + p * kPanel, edge + (r - m0) * kPanel, cols * 4);
      }
    }
  };
  // K blocks outside panels keep x's block in L1 while each panel chunk serves every row
  // tile. When all of x fits in half of L1 anyway (decode: a few rows) the panel loop goes
  // outside instead, so each panel is read as one sequential stream, which the hardware
  // prefetchers follow best. Either order performs the same operations on each output
  // element in the same order, so a row's result does not depend on the batch it is in.
  constexpr size_t kPanelMajorXBytes = 24 * 1024;
  const bool panel_major = m * k * sizeof(float) <= kPanelMajorXBytes;
  for (size_t m0 = 0; m0 < m; m0 += kRowBlock) {
    const size_t m1 = std::min(m, m0 + kRowBlock);
    if (panel_major) {
      for (size_t p = p0; p < p1; ++p)
        for (size_t k0 = 0; k0 < k; k0 += kDepthBlock) step(m0, m1, k0, p, std::true_type{});
    } else {
      for (size_t k0 = 0; k0 < k; k0 += kDepthBlock)
        for (size_t p = p0; p < p1; ++p) step(m0, m1, k0, p, std::false_type{});
    }
  }
}

// Output columns of panels [p0, p1) for all m rows.
void MatMulPanels(const float* HWY_RESTRICT x, const PackedWeights& w, float* HWY_RESTRICT y,
                  size_t m, size_t p0, size_t p1) {
  if (w.format() == WeightFormat::kFloat32) {
    Panels<WeightFormat::kFloat32>(x, w, y, m, p0, p1);
  } else {
    Panels<WeightFormat::kBFloat16>(x, w, y, m, p0, p1);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rpa
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rpa {

HWY_EXPORT(MatMulPanels);

namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs
// a few microseconds, about what ~2^16 FMAs take on one core.
constexpr size_t kMinParallelFmas = size_t{1} << 16;

}  // namespace

void MatMul(const float* x, const PackedWeights& w, float* y, size_t m) {
  const size_t n = w.rows(), k = w.cols();
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(y, y + m * n, 0.0f);
    return;
  }
  const auto impl = HWY_DYNAMIC_DISPATCH(MatMulPanels);
  ThreadPool& pool = ThreadPool::Global();
  const size_t panels = w.num_panels();
  const int threads = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(pool.num_threads()), panels));
  if (threads <= 1 || m * n * k < kMinParallelFmas) {
    impl(x, w, y, m, 0, panels);
    return;
  }
  // Panels are handed out in chunks, ~4 per thread, to whichever thread is free: a thread
  // the OS deschedules holds up only its current chunk, not half the matrix.
  const size_t chunk = std::max<size_t>(1, panels / (4 * static_cast<size_t>(threads)));
  std::atomic<size_t> next{0};
  pool.Run(threads, [&](int) {
    for (size_t p0 = next.fetch_add(chunk, std::memory_order_relaxed); p0 < panels;
         p0 = next.fetch_add(chunk, std::memory_order_relaxed)) {
      impl(x, w, y, m, p0, std::min(panels, p0 + chunk));
    }
  });
}

}  // namespace rpa
#endif  // HWY_ONCE
