// ExactSubnormals: for its lifetime, the calling thread's floating-point environment treats
// subnormals as numbers (x86 MXCSR DAZ and FTZ clear, AArch64 FPCR.FZ clear), whatever the
// caller had set; the previous state comes back on destruction.
//
// Kernels whose results are defined bit for bit hold one around their work: the attention
// kernel's fp8 decode yields f32 subnormals for fp8 subnormal codes (DecodeE4M3FNBiased),
// which a process that enabled DAZ (e.g. torch.set_flush_denormal(True)) would read as 0.
// Only a thread whose flags are set pays for a write of the control register.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#define RPA_FLOAT_ENV_X86 1
#elif defined(__aarch64__)
#define RPA_FLOAT_ENV_ARM64 1
#endif

namespace rpa {

class ExactSubnormals {
 public:
  ExactSubnormals() {
#if defined(RPA_FLOAT_ENV_X86)
    saved_ = _mm_getcsr();
    if (saved_ & kFlushBits) _mm_setcsr(saved_ & ~kFlushBits);
#elif defined(RPA_FLOAT_ENV_ARM64)
    asm volatile("mrs %0, fpcr" : "=r"(saved_));
    if (saved_ & kFlushBits) asm volatile("msr fpcr, %0" : : "r"(saved_ & ~kFlushBits));
#endif
  }
  ~ExactSubnormals() {
#if defined(RPA_FLOAT_ENV_X86)
    if (saved_ & kFlushBits) _mm_setcsr(saved_);
#elif defined(RPA_FLOAT_ENV_ARM64)
    if (saved_ & kFlushBits) asm volatile("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  ExactSubnormals(const ExactSubnormals&) = delete;
  ExactSubnormals& operator=(const ExactSubnormals&) = delete;

 private:
#if defined(RPA_FLOAT_ENV_X86)
  static constexpr unsigned kFlushBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_ = 0;
#elif defined(RPA_FLOAT_ENV_ARM64)
  static constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FZ
  uint64_t saved_ = 0;
#endif
};

}  // namespace rpa
