// A plain driver for gguf_fuzzer.cc, for compilers without libFuzzer: replays a bounded,
// seeded stream of mutations of valid GGUF files through LLVMFuzzerTestOneInput. Each
// mutation is the kind a corrupted or hostile file shows: bit flips, interesting integers
// (0, -1, 2^31, 2^63, ...) written over 1/4/8-byte fields, truncation, inserted and deleted
// runs, and splices between seeds.
//
//   gguf_fuzz_replay [--iterations N] [--seed S] [--write-seeds DIR]
//
// --write-seeds writes the valid seed files (for libFuzzer's corpus) and exits.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "tests/model/gguf_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::vector<uint8_t>> Seeds() {
  using rpa::testing::GgufBuilder;
  std::vector<std::vector<uint8_t>> seeds;
  seeds.push_back(rpa::testing::SampleBuilder().Build());
  GgufBuilder aligned = rpa::testing::SampleBuilder();
  aligned.alignment = 64;
  seeds.push_back(aligned.Build());
  // One tensor of each dequantizable type, two rows each, bytes patterned.
  GgufBuilder types;
  const struct {
    uint32_t code, block, size;
  } kTypes[] = {{0, 1, 4},   {1, 1, 2},   {30, 1, 2},     {2, 32, 18},   {3, 32, 20},
                {6, 32, 22}, {8, 32, 34}, {12, 256, 144}, {14, 256, 210}};
  for (const auto& t : kTypes) {
    const int64_t ne0 = t.block == 1 ? 4 : t.block;
    std::vector<uint8_t> data(2 * (ne0 / t.block) * t.size);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 37 + t.code);
    std::string name = "t";
    name += std::to_string(t.code);  // not "t" + ...: a false GCC 12 -Wrestrict warning
    types.Tensor({name, t.code, {ne0, 2}, data});
  }
  seeds.push_back(types.Build());
  return seeds;
}

void Mutate(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& seeds,
            std::mt19937_64& rng) {
  static const uint64_t kInteresting[] = {
      0,          1,          2,          3,          4,          31,         32,    255,
      0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1ull << 32, 1ull << 62, 1ull << 63, ~0ull, ~0ull - 31};
  auto pos = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const int n_mutations = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < n_mutations; ++m) {
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (!b.empty()) b[pos(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1: {  // an interesting integer over a 1/4/8-byte field
        const size_t width = size_t{1} << (rng() % 4 == 0 ? 0 : 2 + rng() % 2);
        if (b.size() < width) break;
        const uint64_t v = kInteresting[rng() % std::size(kInteresting)];
        std::memcpy(&b[pos(b.size() - width + 1)], &v, width);
        break;
      }
      case 2:  // truncate
        b.resize(pos(b.size() + 1));
        break;
      case 3: {  // insert a run of random bytes
        const size_t at = pos(b.size() + 1), n = 1 + rng() % 16;
        std::vector<uint8_t> run(n);
        for (uint8_t& x : run) x = static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<long>(at), run.begin(), run.end());
        break;
      }
      case 4: {  // delete a run
        if (b.empty()) break;
        const size_t at = pos(b.size()), n = std::min<size_t>(1 + rng() % 16, b.size() - at);
        b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        break;
      }
      case 5: {  // splice: a prefix of this input, a suffix of another seed
        const std::vector<uint8_t>& other = seeds[rng() % seeds.size()];
        const size_t cut = pos(b.size() + 1), from = pos(other.size() + 1);
        b.resize(cut);
        b.insert(b.end(), other.begin() + static_cast<long>(from), other.end());
        break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 100000;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--iterations") {
      iterations = std::atol(argv[i + 1]);
    } else if (flag == "--seed") {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--write-seeds") {
      const std::vector<std::vector<uint8_t>> seeds = Seeds();
      for (size_t s = 0; s < seeds.size(); ++s) {
        std::ofstream out(std::string(argv[i + 1]) + "/seed" + std::to_string(s) + ".gguf",
                          std::ios::binary);
        out.write(reinterpret_cast<const char*>(seeds[s].data()),
                  static_cast<std::streamsize>(seeds[s].size()));
        if (!out) {
          std::cerr << "cannot write seeds to " << argv[i + 1] << "\n";
          return 1;
        }
      }
      return 0;
    } else {
      std::cerr << "usage: " << argv[0] << " [--iterations N] [--seed S] [--write-seeds DIR]\n";
      return 2;
    }
  }
  const std::vector<std::vector<uint8_t>> seeds = Seeds();
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    std::vector<uint8_t> input = seeds[rng() % seeds.size()];
    Mutate(input, seeds, rng);
    // Parse from an exact-size heap copy so ASan catches a read one byte past the end.
    const std::vector<uint8_t> exact(input);
    LLVMFuzzerTestOneInput(exact.data(), exact.size());
  }
  std::cout << "gguf_fuzz_replay: " << iterations << " mutated inputs, no crash\n";
  return 0;
}
