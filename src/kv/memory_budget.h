// The KV cache memory budget: parsed once at the edge (a CLI flag such as
// `--kv-cache-memory 2GiB`), passed down as a typed value, resolved against the memory
// available on the machine by the caller that knows it.
//
// Accepted spellings (surrounding spaces ignored, units case-insensitive, an optional space
// between number and unit):
//   "2GiB", "512 MiB", "64KiB", "1TiB"     binary units (1024^k)
//   "1.5GB", "500MB", "10kB", "1TB"        decimal units (1000^k)
//   "1073741824", "4096B"                  bytes (an integer)
//   "0.5", "1.0"                           a fraction of available memory, in (0, 1]
//   "50%", "12.5%"                         the same as a percentage, in (0, 100]
// A plain number is a byte count iff it has no decimal point; "1" is one byte, "1.0" is all
// available memory. Exponents, signs, "inf" and "nan" are rejected.
//
// Plain functions and values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rpa {

struct MemoryBudget {
  enum class Kind : uint8_t { kBytes, kFractionOfAvailable };

  Kind kind = Kind::kBytes;
  uint64_t bytes = 0;   // kBytes: > 0
  double fraction = 0;  // kFractionOfAvailable: in (0, 1]

  static MemoryBudget Bytes(uint64_t bytes);
  static MemoryBudget FractionOfAvailable(double fraction);

  // "2 GiB" / "2147483649 B" / "50% of available memory", for logs and error messages.
  std::string ToString() const;
};

// Parses a budget string as above. Throws rpa::InvalidArgument quoting the text and naming
// the accepted forms for anything else, a zero budget, or a fraction outside (0, 1].
MemoryBudget ParseMemoryBudget(std::string_view text);

// The budget in bytes: `budget.bytes`, or floor(fraction * available_bytes).
uint64_t ResolveMemoryBudget(const MemoryBudget& budget, uint64_t available_bytes);

// MemAvailable from the text of /proc/meminfo ("MemAvailable:  1234 kB"), in bytes. Throws
// rpa::InvalidArgument when the line is missing or malformed.
uint64_t ParseMemAvailable(std::string_view meminfo_text);
// Reads /proc/meminfo and returns MemAvailable in bytes. Throws rpa::InvalidArgument when the
// file cannot be read (e.g. not Linux). For the edge (CLI / server start-up) only.
uint64_t ReadMemAvailableBytes();

// "18 KiB", "11.25 KiB", "2 GiB", "512 B": binary units, at most two decimals, trailing zeros
// dropped.
std::string FormatBytes(uint64_t bytes);

}  // namespace rpa
