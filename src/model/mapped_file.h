// A whole file mapped read-only into memory (POSIX mmap), unmapped on destruction.
//
// Model weights are read where they lie: the page cache backs the mapping, so opening a
// model costs no copy and several processes share one copy of the weights.
// Thread safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rpa {

class MappedFile {
 public:
  // Maps `path` read-only. Throws rpa::InvalidArgument naming the path and the OS error
  // when it cannot be opened, stat'ed or mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::string& path);
  ~MappedFile();

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rpa
