// The reference logits file: the next-token distributions of one evaluation run, kept so
// that another run over the same tokens (another KV cache dtype) can be compared with it
// (KL divergence, top-1 agreement, ΔPPL) without running both at once.
//
// Layout, little-endian, written and read sequentially chunk by chunk (files reach GBs: a
// 262144-entry vocabulary costs 512 KiB per scored token in f16):
//
//   header  LogitsFileHeader (96 bytes)
//   tokens  int32 [num_chunks * n_ctx], the tokens as fed (BOS in place): a run is compared
//           only with a file of exactly the same tokens, n_ctx and chunks
//   rows    num_chunks * rows_per_chunk records, chunk after chunk, each
//             int32 top1   argmax of the f32 logits (exact, immune to storage rounding)
//             f32   nll    -log p(target) in f32 (for paired ΔPPL statistics)
//             value [vocab] log-softmax, f16 or f32 (`value_type`)
//
// The header's `complete` flag is set last, so a file from an interrupted run is refused,
// as is one whose size is not exactly what its header implies (truncated or padded).
//
// Why f16 is the default: a stored log-prob r <= 0 comes back as r(1 + d), |d| <= 2^-11
// (f16's 11 significant bits). The reader renormalizes the row (log-softmax again), which
// removes any common shift, so with e_v = r_v d_v the KLD error against a run q is
//   KL(p~ || q) - KL(p || q) = KL(p~ || p) + sum_v (p~_v - p_v)(log p_v - log q_v).
// The first term is a positive floor ≈ ½ Var_p(e) <= 2^-23 E_p[r²]: with E_p[r²] <= 40
// (next-token surprisal of these models, entropy 2-4 nats) that is <= 5e-6; it is what a
// run compared with its own f16 file shows. The second term is the p-weighted covariance
// of the rounding errors (a function of r alone) with the log-ratio (a function of the
// other run): no sign bias, bounded by sqrt(Var_p e) sqrt(E_p[(log p/q)²]) ≈
// 2^-11 sqrt(E_p r²) sqrt(2 KL) even if the errors were aligned with the log-ratio (under
// 10% of KL for KL >= 1e-3), and it averages out over rows.
// Measured (SmolLM2, 20 chunks of 512, 5100 rows): bf16 run vs its own f16 file: KLD mean
// 4.2e-7, p99 1.2e-6; fp8 vs the bf16 reference stored in f16 / in f32: KLD mean 0.0068354
// / 0.0068350 (6e-5 relative), p99 0.053951 / 0.053997. f16 halves the file for no
// visible change at fp8's KLDs; for KLDs near 1e-6 (bf16 vs f32 caches) write f32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numerics/dtype.h"

namespace rpa::eval {

// What identifies a run's scored rows.
struct LogitsFileLayout {
  int32_t vocab = 0;
  int32_t n_ctx = 0;
  int32_t first_scored = 0;
  int32_t rows_per_chunk = 0;
  int32_t num_chunks = 0;
};

#pragma pack(push, 1)
struct LogitsFileHeader {
  char magic[8];  // "RPALOGP\0"
  uint32_t version;
  uint32_t value_type;  // 1: f16, 2: f32
  int32_t vocab;
  int32_t n_ctx;
  int32_t first_scored;
  int32_t rows_per_chunk;
  int32_t num_chunks;
  uint32_t complete;  // 1 once every row and the statistics below are written
  double ppl;         // the run's perplexity and its standard error
  double ppl_stderr;
  char label[32];  // the run's KV cache dtype, NUL-padded (for messages only)
  uint8_t reserved[8];
};
#pragma pack(pop)
static_assert(sizeof(LogitsFileHeader) == 96);

// kFloat16 or kFloat32; anything else is refused.
DType ParseLogitsValueType(std::string_view name);  // "f16" / "float16", "f32" / "float32"

// Bytes of a file of `layout` with values of `value_type`.
uint64_t LogitsFileBytes(const LogitsFileLayout& layout, DType value_type);

class LogitsFileWriter {
 public:
  // Creates `path` and writes the header (complete = 0) and the tokens. Throws
  // InvalidArgument when the file cannot be written, the layout is inconsistent, or tokens
  // does not hold num_chunks * n_ctx ids.
  LogitsFileWriter(const std::string& path, const LogitsFileLayout& layout,
                   std::span<const int32_t> tokens, DType value_type, std::string_view label);
  ~LogitsFileWriter();
  LogitsFileWriter(const LogitsFileWriter&) = delete;
  LogitsFileWriter& operator=(const LogitsFileWriter&) = delete;

  // Appends the next chunk's rows: log_probs [rows_per_chunk, vocab], nll [rows_per_chunk].
  void WriteChunk(std::span<const float> log_probs, std::span<const float> nll);
  // After the last chunk: records the statistics and marks the file complete. Throws if
  // chunks are missing or a write failed.
  void Finish(double ppl, double ppl_stderr);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  LogitsFileLayout layout_;
  DType value_type_;
  int32_t chunks_written_ = 0;
  std::vector<uint8_t> record_;  // one row record
};

class LogitsFileReader {
 public:
  // Opens and validates `path`: magic, version, value type, layout, complete flag and the
  // exact size. Throws InvalidArgument naming what is wrong.
  explicit LogitsFileReader(const std::string& path);
  ~LogitsFileReader();
  LogitsFileReader(const LogitsFileReader&) = delete;
  LogitsFileReader& operator=(const LogitsFileReader&) = delete;

  const LogitsFileHeader& header() const { return header_; }
  LogitsFileLayout layout() const;
  DType value_type() const;
  std::string label() const;
  std::span<const int32_t> tokens() const { return tokens_; }

  // Throws InvalidArgument unless this file scored exactly `layout` over `tokens` (the
  // message names the first difference: vocabulary, n_ctx, chunks, or the first token).
  void CheckSameRun(const LogitsFileLayout& layout, std::span<const int32_t> tokens) const;

  // Reads chunk `c`: log_probs [rows_per_chunk, vocab] (as stored, decoded to f32), top1
  // and nll [rows_per_chunk]. Throws on a read error or c out of range.
  void ReadChunk(int32_t c, std::span<float> log_probs, std::span<int32_t> top1,
                 std::span<float> nll);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  LogitsFileHeader header_{};
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> record_;
};

}  // namespace rpa::eval
