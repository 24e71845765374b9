// The reference logits file: round trips (f32 exact, f16 within one rounding), and every
// kind of mismatch or damage refused with a message saying what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "eval/logits_file.h"
#include "numerics/convert.h"
#include "util/error.h"

namespace rpa::eval {
namespace {

// 2 chunks of n_ctx 8: first_scored 4, 3 rows per chunk, vocab 10.
LogitsFileLayout SmallLayout() { return LogitsFileLayout{10, 8, 4, 3, 2}; }

struct FakeRun {
  std::vector<int32_t> tokens;
  std::vector<float> log_probs;  // [chunks * rows, vocab]
  std::vector<float> nll;        // [chunks * rows]
};

FakeRun MakeRun(const LogitsFileLayout& l, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-20.0f, 0.0f);
  FakeRun r;
  for (int i = 0; i < l.num_chunks * l.n_ctx; ++i)
    r.tokens.push_back(static_cast<int32_t>(rng() % l.vocab));
  for (int i = 0; i < l.num_chunks * l.rows_per_chunk * l.vocab; ++i) r.log_probs.push_back(u(rng));
  for (int i = 0; i < l.num_chunks * l.rows_per_chunk; ++i) r.nll.push_back(-u(rng));
  return r;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin"))
      .string();
}

void Write(const std::string& path, const LogitsFileLayout& l, const FakeRun& r, DType type,
           bool finish = true) {
  LogitsFileWriter w(path, l, r.tokens, type, "bfloat16");
  const size_t per_chunk = static_cast<size_t>(l.rows_per_chunk) * l.vocab;
  for (int c = 0; c < l.num_chunks; ++c) {
    w.WriteChunk(std::span<const float>(r.log_probs).subspan(c * per_chunk, per_chunk),
                 std::span<const float>(r.nll).subspan(c * l.rows_per_chunk, l.rows_per_chunk));
  }
  if (finish) w.Finish(12.5, 0.25);
}

// Runs `fn`, expecting InvalidArgument whose message contains `needle`.
template <typename Fn>
void ExpectError(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

int32_t ArgMaxOf(const float* row, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

TEST(LogitsFile, RoundTripF32IsExact) {
  const LogitsFileLayout l = SmallLayout();
  const FakeRun r = MakeRun(l, 1);
  const std::string path = TempPath("rt32");
  Write(path, l, r, DType::kFloat32);
  EXPECT_EQ(std::filesystem::file_size(path), LogitsFileBytes(l, DType::kFloat32));
  // header + tokens + rows * (top1 + nll + vocab f32)
  EXPECT_EQ(LogitsFileBytes(l, DType::kFloat32), 96u + 16 * 4 + 6 * (8 + 10 * 4));

  LogitsFileReader reader(path);
  EXPECT_EQ(reader.label(), "bfloat16");
  EXPECT_EQ(reader.header().ppl, 12.5);
  EXPECT_EQ(reader.header().ppl_stderr, 0.25);
  EXPECT_EQ(reader.value_type(), DType::kFloat32);
  EXPECT_EQ(std::vector<int32_t>(reader.tokens().begin(), reader.tokens().end()), r.tokens);
  reader.CheckSameRun(l, r.tokens);
  // Chunks in any order.
  for (int c : {1, 0}) {
    std::vector<float> lp(l.rows_per_chunk * l.vocab), nll(l.rows_per_chunk);
    std::vector<int32_t> top1(l.rows_per_chunk);
    reader.ReadChunk(c, lp, top1, nll);
    for (int row = 0; row < l.rows_per_chunk; ++row) {
      const float* want = r.log_probs.data() + (c * l.rows_per_chunk + row) * l.vocab;
      for (int v = 0; v < l.vocab; ++v) EXPECT_EQ(lp[row * l.vocab + v], want[v]);
      EXPECT_EQ(top1[row], ArgMaxOf(want, l.vocab));
      EXPECT_EQ(nll[row], r.nll[c * l.rows_per_chunk + row]);
    }
  }
  std::filesystem::remove(path);
}

TEST(LogitsFile, RoundTripF16IsOneRounding) {
  const LogitsFileLayout l = SmallLayout();
  const FakeRun r = MakeRun(l, 2);
  const std::string path = TempPath("rt16");
  Write(path, l, r, DType::kFloat16);
  EXPECT_EQ(std::filesystem::file_size(path), 96u + 16 * 4 + 6 * (8 + 10 * 2));
  LogitsFileReader reader(path);
  std::vector<float> lp(l.rows_per_chunk * l.vocab), nll(l.rows_per_chunk);
  std::vector<int32_t> top1(l.rows_per_chunk);
  reader.ReadChunk(1, lp, top1, nll);
  for (int row = 0; row < l.rows_per_chunk; ++row) {
    const float* want = r.log_probs.data() + (l.rows_per_chunk + row) * l.vocab;
    for (int v = 0; v < l.vocab; ++v) {
      // One round-to-nearest to 11 significant bits: |error| <= 2^-11 |x|.
      EXPECT_LE(std::fabs(lp[row * l.vocab + v] - want[v]), std::ldexp(std::fabs(want[v]), -11));
    }
    // top1 and nll are exact whatever the value type.
    EXPECT_EQ(top1[row], ArgMaxOf(want, l.vocab));
    EXPECT_EQ(nll[row], r.nll[l.rows_per_chunk + row]);
  }
  std::filesystem::remove(path);
}

TEST(LogitsFile, MismatchedRunRefused) {
  const LogitsFileLayout l = SmallLayout();
  const FakeRun r = MakeRun(l, 3);
  const std::string path = TempPath("mismatch");
  Write(path, l, r, DType::kFloat16);
  LogitsFileReader reader(path);
  std::vector<int32_t> other = r.tokens;
  other[13] = (other[13] + 1) % l.vocab;  // chunk 1, position 5
  ExpectError([&] { reader.CheckSameRun(l, other); }, "chunk 1 position 5");
  LogitsFileLayout more_vocab = l;
  more_vocab.vocab = 11;
  ExpectError([&] { reader.CheckSameRun(more_vocab, r.tokens); }, "vocabulary of 10");
  const LogitsFileLayout other_ctx{10, 10, 5, 4, 2};
  ExpectError([&] { reader.CheckSameRun(other_ctx, std::vector<int32_t>(20)); }, "--ctx 8");
  const LogitsFileLayout one_chunk{10, 8, 4, 3, 1};
  ExpectError([&] { reader.CheckSameRun(one_chunk, std::span<const int32_t>(r.tokens).first(8)); },
              "holds 2 chunks");
  std::filesystem::remove(path);
}

TEST(LogitsFile, DamagedFilesRefused) {
  const LogitsFileLayout l = SmallLayout();
  const FakeRun r = MakeRun(l, 4);
  const std::string path = TempPath("damaged");
  Write(path, l, r, DType::kFloat16);
  const uintmax_t size = std::filesystem::file_size(path);

  std::filesystem::resize_file(path, size - 1);
  ExpectError([&] { LogitsFileReader reader(path); }, "(truncated)");
  std::filesystem::resize_file(path, size + 7);
  ExpectError([&] { LogitsFileReader reader(path); }, "implies");
  std::filesystem::resize_file(path, 40);
  ExpectError([&] { LogitsFileReader reader(path); }, "too short");

  // Interrupted: never finished.
  Write(path, l, r, DType::kFloat16, /*finish=*/false);
  ExpectError([&] { LogitsFileReader reader(path); }, "incomplete");

  // Not ours.
  { std::ofstream(path, std::ios::binary) << std::string(200, 'x'); }
  ExpectError([&] { LogitsFileReader reader(path); }, "bad magic");
  ExpectError([&] { LogitsFileReader reader(path + ".missing"); }, "cannot read");
  std::filesystem::remove(path);
}

TEST(LogitsFile, WriterChecksItsInput) {
  const LogitsFileLayout l = SmallLayout();
  const FakeRun r = MakeRun(l, 5);
  const std::string path = TempPath("writer");
  ExpectError([&] { LogitsFileWriter w(path, l, r.tokens, DType::kBFloat16, ""); },
              "float16 or float32");
  ExpectError(
      [&] {
        LogitsFileWriter w(path, l, std::span<const int32_t>(r.tokens).first(5), DType::kFloat16,
                           "");
      },
      "5 tokens");
  const LogitsFileLayout bad_rows{10, 8, 4, 4, 2};
  ExpectError([&] { LogitsFileWriter w(path, bad_rows, r.tokens, DType::kFloat16, ""); },
              "rows_per_chunk=4");
  LogitsFileWriter w(path, l, r.tokens, DType::kFloat16, "");
  ExpectError([&] { w.Finish(1, 0); }, "0 of 2 chunks");
  ExpectError(
      [&] {
        w.WriteChunk(std::span<const float>(r.log_probs).first(10),
                     std::span<const float>(r.nll).first(3));
      },
      "3 rows of 10");
  std::filesystem::remove(path);
  EXPECT_EQ(ParseLogitsValueType("f16"), DType::kFloat16);
  EXPECT_EQ(ParseLogitsValueType("float32"), DType::kFloat32);
  EXPECT_THROW(ParseLogitsValueType("bf16"), InvalidArgument);
}

}  // namespace
}  // namespace rpa::eval
