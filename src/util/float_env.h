// The calling thread's floating-point control register and its flush-to-zero bits, and
// ExactSubnormals: for its lifetime, the thread treats subnormals as numbers (x86 MXCSR DAZ
// and FTZ clear, AArch64 FPCR.FZ clear), whatever the caller had set; the previous state
// comes back on destruction.
//
// Kernels whose results are defined bit for bit hold one around their work: the attention
// kernel's fp8 decode yields f32 subnormals for fp8 subnormal codes (DecodeE4M3FNBiased),
// which a process that enabled DAZ (e.g. torch.set_flush_denormal(True)) would read as 0.
// Only a thread whose flags are set pays for a write of the control register.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rpa {

// The bits that flush subnormals: x86 MXCSR FTZ (bit 15) | DAZ (bit 6), AArch64 FPCR.FZ
// (bit 24); 0 where unknown (then the control functions do nothing).
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
inline constexpr uint64_t kFlushSubnormalBits = 0x8040;
inline uint64_t ReadFloatControl() { return _mm_getcsr(); }
inline void WriteFloatControl(uint64_t v) { _mm_setcsr(static_cast<unsigned>(v)); }
#elif defined(__aarch64__)
inline constexpr uint64_t kFlushSubnormalBits = uint64_t{1} << 24;
inline uint64_t ReadFloatControl() {
  uint64_t v;
  asm volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
inline void WriteFloatControl(uint64_t v) { asm volatile("msr fpcr, %0" : : "r"(v)); }
#else
inline constexpr uint64_t kFlushSubnormalBits = 0;
inline uint64_t ReadFloatControl() { return 0; }
inline void WriteFloatControl(uint64_t) {}
#endif

class ExactSubnormals {
 public:
  ExactSubnormals() : saved_(ReadFloatControl()) {
    if (saved_ & kFlushSubnormalBits) WriteFloatControl(saved_ & ~kFlushSubnormalBits);
  }
  ~ExactSubnormals() {
    if (saved_ & kFlushSubnormalBits) WriteFloatControl(saved_);
  }
  ExactSubnormals(const ExactSubnormals&) = delete;
  ExactSubnormals& operator=(const ExactSubnormals&) = delete;

 private:
  uint64_t saved_;
};

}  // namespace rpa
