// All 2^32 f32 bit patterns: bulk Convert == the scalar codec for f32 -> e4m3fn, e5m2 and
// bf16, both overflow modes, on the best SIMD target (split over two threads). The other
// targets run a strided subset (every 257th pattern, ~16.7 M inputs: every exponent and
// sign, and a sliding window of fraction bits). Label "exhaustive": it takes minutes, so
// `ctest -LE exhaustive` skips it.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "numerics/convert.h"
#include "numerics/scalar_codec.h"
#include "tests/numerics/target_loop.h"

namespace rpa {
namespace {

struct Mismatch {
  uint64_t count = 0;
  uint32_t first_input = 0;
  const char* first_format = "";
};

// Checks inputs first, first + stride, ... below end (64-bit to reach 2^32).
Mismatch CheckRange(uint64_t first, uint64_t end, uint64_t stride) {
  constexpr size_t kChunk = 1 << 14;
  std::vector<float> in(kChunk);
  std::vector<uint8_t> e4(kChunk), e4s(kChunk), e5(kChunk), e5s(kChunk);
  std::vector<uint16_t> b(kChunk), bs(kChunk);
  Mismatch m;
  auto note = [&m](bool ok, uint32_t input, const char* format) {
    if (ok) return;
    if (m.count++ == 0) m.first_input = input, m.first_format = format;
  };
  for (uint64_t base = first; base < end;) {
    size_t n = 0;
    for (; n < kChunk && base < end; ++n, base += stride)
      in[n] = F32FromBits(static_cast<uint32_t>(base));
    Convert(DType::kFloat32, in.data(), DType::kFloat8E4M3FN, e4.data(), n);
    Convert(DType::kFloat32, in.data(), DType::kFloat8E4M3FN, e4s.data(), n, Overflow::kSaturate);
    Convert(DType::kFloat32, in.data(), DType::kFloat8E5M2, e5.data(), n);
    Convert(DType::kFloat32, in.data(), DType::kFloat8E5M2, e5s.data(), n, Overflow::kSaturate);
    Convert(DType::kFloat32, in.data(), DType::kBFloat16, b.data(), n);
    Convert(DType::kFloat32, in.data(), DType::kBFloat16, bs.data(), n, Overflow::kSaturate);
    for (size_t i = 0; i < n; ++i) {
      const float x = in[i];
      const uint32_t bits = F32Bits(x);
      note(e4[i] == F32ToE4M3FN(x), bits, "float8_e4m3fn");
      note(e4s[i] == F32ToE4M3FNSaturate(x), bits, "float8_e4m3fn saturating");
      note(e5[i] == F32ToE5M2(x), bits, "float8_e5m2");
      note(e5s[i] == F32ToE5M2Saturate(x), bits, "float8_e5m2 saturating");
      note(b[i] == F32ToBF16(x), bits, "bfloat16");
      note(bs[i] == F32ToBF16Saturate(x), bits, "bfloat16 saturating");
    }
  }
  return m;
}

void ExpectNoMismatch(const Mismatch& m) {
  EXPECT_EQ(m.count, 0u) << "first mismatch: f32 bits 0x" << std::hex << m.first_input << " -> "
                         << m.first_format;
}

TEST(ConvertExhaustive32Test, AllF32InputsOnTheBestTarget) {
  constexpr uint64_t kAll = uint64_t{1} << 32;
  // Resolve the dispatch table before two threads race to do it.
  float warm = 0.0f;
  uint8_t code;
  Convert(DType::kFloat32, &warm, DType::kFloat8E4M3FN, &code, 1);
  Mismatch lower, upper;
  std::thread t([&] { lower = CheckRange(0, kAll / 2, 1); });
  upper = CheckRange(kAll / 2, kAll, 1);
  t.join();
  ExpectNoMismatch(lower);
  ExpectNoMismatch(upper);
}

TEST(ConvertExhaustive32Test, StridedSubsetOnEveryTarget) {
  test::ForEachSupportedTarget(
      [](int64_t) { ExpectNoMismatch(CheckRange(0, uint64_t{1} << 32, 257)); });
}

}  // namespace
}  // namespace rpa
