#include "eval/logits_file.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "eval/distribution_stats.h"
#include "numerics/convert.h"
#include "util/error.h"

namespace rpa::eval {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the logits file is little-endian and read with memcpy");

constexpr char kMagic[8] = {'R', 'P', 'A', 'L', 'O', 'G', 'P', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kF16 = 1, kF32 = 2;

uint32_t ValueTypeCode(DType t) {
  if (t == DType::kFloat16) return kF16;
  if (t == DType::kFloat32) return kF32;
  throw InvalidArgument(
      Concat("logits file values must be float16 or float32, not ", DTypeName(t)));
}

// Returns "" iff the layout is usable, else what is wrong.
std::string LayoutProblem(const LogitsFileLayout& l) {
  if (l.vocab <= 0 || l.n_ctx < 4 || l.num_chunks <= 0) {
    return Concat("vocab=", l.vocab, ", n_ctx=", l.n_ctx, ", num_chunks=", l.num_chunks,
                  " (need vocab > 0, n_ctx >= 4, num_chunks > 0)");
  }
  if (l.first_scored != l.n_ctx / 2 || l.rows_per_chunk != l.n_ctx - 1 - l.first_scored) {
    return Concat("first_scored=", l.first_scored, ", rows_per_chunk=", l.rows_per_chunk,
                  " for n_ctx=", l.n_ctx, " (expected ", l.n_ctx / 2, " and ",
                  l.n_ctx - 1 - l.n_ctx / 2, ")");
  }
  return "";
}

uint64_t RecordBytes(int32_t vocab, DType value_type) {
  return 8 + static_cast<uint64_t>(vocab) * DTypeSize(value_type);
}

uint64_t TokensOffset() { return sizeof(LogitsFileHeader); }
uint64_t RowsOffset(const LogitsFileLayout& l) {
  return TokensOffset() + static_cast<uint64_t>(l.num_chunks) * l.n_ctx * sizeof(int32_t);
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

DType ParseLogitsValueType(std::string_view name) {
  if (name == "f16" || name == "float16") return DType::kFloat16;
  if (name == "f32" || name == "float32") return DType::kFloat32;
  throw InvalidArgument(Concat("logits value type '", name, "' is not one of f16, f32"));
}

uint64_t LogitsFileBytes(const LogitsFileLayout& layout, DType value_type) {
  // Each factor is a positive int32, so the row count fits 62 bits and the record < 2^34;
  // sizes beyond 2^63 are rejected rather than wrapped.
  const uint64_t rows = static_cast<uint64_t>(layout.num_chunks) * layout.rows_per_chunk;
  const uint64_t record = RecordBytes(layout.vocab, value_type);
  if (rows != 0 && record > (uint64_t{1} << 63) / rows) {
    throw InvalidArgument(
        Concat("logits file of ", rows, " rows x ", record, " bytes is too large"));
  }
  return RowsOffset(layout) + rows * record;
}

LogitsFileWriter::LogitsFileWriter(const std::string& path, const LogitsFileLayout& layout,
                                   std::span<const int32_t> tokens, DType value_type,
                                   std::string_view label)
    : path_(path), layout_(layout), value_type_(value_type) {
  const uint32_t code = ValueTypeCode(value_type);
  if (const std::string problem = LayoutProblem(layout); !problem.empty()) {
    throw InvalidArgument(Concat("logits file ", path, ": bad layout: ", problem));
  }
  if (tokens.size() != static_cast<size_t>(layout.num_chunks) * layout.n_ctx) {
    throw InvalidArgument(Concat("logits file ", path, ": ", tokens.size(), " tokens for ",
                                 layout.num_chunks, " chunks of ", layout.n_ctx));
  }
  LogitsFileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.value_type = code;
  h.vocab = layout.vocab;
  h.n_ctx = layout.n_ctx;
  h.first_scored = layout.first_scored;
  h.rows_per_chunk = layout.rows_per_chunk;
  h.num_chunks = layout.num_chunks;
  h.complete = 0;
  std::memcpy(h.label, label.data(), std::min(label.size(), sizeof h.label - 1));
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw InvalidArgument(Concat("cannot create ", path, ": ", Errno()));
  if (std::fwrite(&h, sizeof h, 1, file_) != 1 ||
      std::fwrite(tokens.data(), sizeof(int32_t), tokens.size(), file_) != tokens.size()) {
    throw InvalidArgument(Concat("cannot write ", path, ": ", Errno()));
  }
  record_.resize(RecordBytes(layout.vocab, value_type));
}

LogitsFileWriter::~LogitsFileWriter() {
  if (file_) std::fclose(file_);
}

void LogitsFileWriter::WriteChunk(std::span<const float> log_probs, std::span<const float> nll) {
  const size_t vocab = static_cast<size_t>(layout_.vocab);
  const size_t rows = static_cast<size_t>(layout_.rows_per_chunk);
  if (log_probs.size() != rows * vocab || nll.size() != rows) {
    throw InvalidArgument(Concat("logits file ", path_, ": a chunk has ", rows, " rows of ", vocab,
                                 "; got ", log_probs.size(), " values and ", nll.size(), " nll"));
  }
  if (chunks_written_ >= layout_.num_chunks) {
    throw InvalidArgument(
        Concat("logits file ", path_, ": all ", layout_.num_chunks, " chunks are already written"));
  }
  for (size_t r = 0; r < rows; ++r) {
    const std::span<const float> row = log_probs.subspan(r * vocab, vocab);
    const int32_t top1 = ArgMax(row);
    std::memcpy(record_.data(), &top1, 4);
    std::memcpy(record_.data() + 4, &nll[r], 4);
    // One RNE rounding to f16 (or a copy for f32).
    Convert(DType::kFloat32, row.data(), value_type_, record_.data() + 8, vocab);
    if (std::fwrite(record_.data(), 1, record_.size(), file_) != record_.size()) {
      throw InvalidArgument(Concat("cannot write ", path_, ": ", Errno()));
    }
  }
  ++chunks_written_;
}

void LogitsFileWriter::Finish(double ppl, double ppl_stderr) {
  if (chunks_written_ != layout_.num_chunks) {
    throw InvalidArgument(Concat("logits file ", path_, ": ", chunks_written_, " of ",
                                 layout_.num_chunks, " chunks written"));
  }
  const uint32_t complete = 1;
  const bool ok = std::fseek(file_, offsetof(LogitsFileHeader, complete), SEEK_SET) == 0 &&
                  std::fwrite(&complete, 4, 1, file_) == 1 && std::fwrite(&ppl, 8, 1, file_) == 1 &&
                  std::fwrite(&ppl_stderr, 8, 1, file_) == 1;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) throw InvalidArgument(Concat("cannot write ", path_, ": ", Errno()));
}

LogitsFileReader::LogitsFileReader(const std::string& path) : path_(path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument(Concat("cannot read reference logits ", path, ": ", ec.message()));
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw InvalidArgument(Concat("cannot open reference logits ", path, ": ", Errno()));
  if (size < sizeof header_ || std::fread(&header_, sizeof header_, 1, file_) != 1) {
    throw InvalidArgument(Concat(path, ": ", size, " bytes, too short for a logits file header"));
  }
  if (std::memcmp(header_.magic, kMagic, sizeof kMagic) != 0) {
    throw InvalidArgument(Concat(path, " is not an rpa logits file (bad magic)"));
  }
  if (header_.version != kVersion) {
    throw InvalidArgument(Concat(path, ": logits file version ", header_.version,
                                 "; this rpa reads version ", kVersion));
  }
  if (header_.value_type != kF16 && header_.value_type != kF32) {
    throw InvalidArgument(Concat(path, ": unknown value type ", header_.value_type));
  }
  if (const std::string problem = LayoutProblem(layout()); !problem.empty()) {
    throw InvalidArgument(Concat(path, ": bad layout: ", problem));
  }
  if (header_.complete != 1) {
    throw InvalidArgument(Concat(path, " is incomplete: the run that wrote it did not finish"));
  }
  const uint64_t expected = LogitsFileBytes(layout(), value_type());
  if (size != expected) {
    throw InvalidArgument(Concat(path, " has ", size, " bytes; its header (", header_.num_chunks,
                                 " chunks x ", header_.rows_per_chunk, " rows x vocab ",
                                 header_.vocab, ") implies ", expected,
                                 size < expected ? " (truncated)" : ""));
  }
  tokens_.resize(static_cast<size_t>(header_.num_chunks) * header_.n_ctx);
  if (std::fread(tokens_.data(), sizeof(int32_t), tokens_.size(), file_) != tokens_.size()) {
    throw InvalidArgument(Concat("cannot read ", path, ": ", Errno()));
  }
  record_.resize(RecordBytes(header_.vocab, value_type()));
}

LogitsFileReader::~LogitsFileReader() {
  if (file_) std::fclose(file_);
}

LogitsFileLayout LogitsFileReader::layout() const {
  return LogitsFileLayout{header_.vocab, header_.n_ctx, header_.first_scored,
                          header_.rows_per_chunk, header_.num_chunks};
}

DType LogitsFileReader::value_type() const {
  return header_.value_type == kF16 ? DType::kFloat16 : DType::kFloat32;
}

std::string LogitsFileReader::label() const {
  return std::string(header_.label, strnlen(header_.label, sizeof header_.label));
}

void LogitsFileReader::CheckSameRun(const LogitsFileLayout& l,
                                    std::span<const int32_t> tokens) const {
  const LogitsFileLayout r = layout();
  const std::string where = Concat("reference logits ", path_, " ");
  if (l.vocab != r.vocab) {
    throw InvalidArgument(Concat(where, "has a vocabulary of ", r.vocab, "; this model has ",
                                 l.vocab, " (another model?)"));
  }
  if (l.n_ctx != r.n_ctx || l.first_scored != r.first_scored ||
      l.rows_per_chunk != r.rows_per_chunk) {
    throw InvalidArgument(
        Concat(where, "was written with --ctx ", r.n_ctx, "; this run uses ", l.n_ctx));
  }
  if (l.num_chunks != r.num_chunks) {
    throw InvalidArgument(Concat(where, "holds ", r.num_chunks, " chunks; this run has ",
                                 l.num_chunks, " (use --chunks ", r.num_chunks, ")"));
  }
  if (tokens.size() != tokens_.size()) {
    throw InvalidArgument(
        Concat(where, "holds ", tokens_.size(), " tokens; this run has ", tokens.size()));
  }
  const auto diff = std::mismatch(tokens.begin(), tokens.end(), tokens_.begin());
  if (diff.first != tokens.end()) {
    const size_t i = static_cast<size_t>(diff.first - tokens.begin());
    throw InvalidArgument(Concat(where, "was computed on other tokens: chunk ", i / r.n_ctx,
                                 " position ", i % r.n_ctx, " is ", *diff.second, " there and ",
                                 *diff.first, " here (another text or tokenizer?)"));
  }
}

void LogitsFileReader::ReadChunk(int32_t c, std::span<float> log_probs, std::span<int32_t> top1,
                                 std::span<float> nll) {
  const LogitsFileLayout l = layout();
  const size_t vocab = static_cast<size_t>(l.vocab);
  const size_t rows = static_cast<size_t>(l.rows_per_chunk);
  if (c < 0 || c >= l.num_chunks || log_probs.size() != rows * vocab || top1.size() != rows ||
      nll.size() != rows) {
    throw InvalidArgument(Concat(path_, ": cannot read chunk ", c, " of ", l.num_chunks, " into ",
                                 log_probs.size(), " values / ", top1.size(), " rows"));
  }
  const uint64_t offset = RowsOffset(l) + static_cast<uint64_t>(c) * rows * record_.size();
  if (fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0) {
    throw InvalidArgument(Concat("cannot seek in ", path_, ": ", Errno()));
  }
  for (size_t r = 0; r < rows; ++r) {
    if (std::fread(record_.data(), 1, record_.size(), file_) != record_.size()) {
      throw InvalidArgument(Concat("cannot read ", path_, " (chunk ", c, "): ", Errno()));
    }
    std::memcpy(&top1[r], record_.data(), 4);
    std::memcpy(&nll[r], record_.data() + 4, 4);
    Convert(value_type(), record_.data() + 8, DType::kFloat32, log_probs.data() + r * vocab, vocab);
  }
}

}  // namespace rpa::eval
