#include "kv/memory_budget.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace rpa {
namespace {

constexpr std::string_view kAcceptedForms =
    "expected bytes with a unit (\"2GiB\", \"512MiB\", \"1.5GB\", \"4096B\"), a plain byte "
    "count (\"1073741824\"), or a fraction of available memory (\"0.5\" or \"50%\")";

[[noreturn]] void ThrowMalformed(std::string_view text, std::string_view why) {
  throw InvalidArgument(
      Concat("Invalid KV cache memory budget \"", text, "\": ", why, "; ", kAcceptedForms));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A decimal number "123" or "1.5": digits, then optionally a point and more digits.
// Returns false for anything else (".5" and "2." included, to keep the grammar obvious).
struct Decimal {
  std::string_view int_digits;
  std::string_view frac_digits;
  bool has_point = false;
};
bool SplitDecimal(std::string_view s, Decimal* out) {
  const size_t point = s.find('.');
  out->has_point = point != std::string_view::npos;
  out->int_digits = s.substr(0, point);
  out->frac_digits = out->has_point ? s.substr(point + 1) : std::string_view();
  if (out->int_digits.empty() || (out->has_point && out->frac_digits.empty())) return false;
  for (std::string_view part : {out->int_digits, out->frac_digits}) {
    for (char c : part) {
      if (c < '0' || c > '9') return false;
    }
  }
  return true;
}

double DecimalValue(std::string_view number) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  RPA_CHECK(ec == std::errc() && ptr == number.data() + number.size());
  return v;
}

// int_digits * unit + floor(0.frac_digits * unit), or nullopt-like false on overflow.
bool ScaledBytes(const Decimal& d, uint64_t unit, uint64_t* out) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t whole = 0;
  for (char c : d.int_digits) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (whole > (kMax - digit) / 10) return false;
    whole = whole * 10 + digit;
  }
  if (unit != 0 && whole > kMax / unit) return false;
  uint64_t bytes = whole * unit;
  if (!d.frac_digits.empty()) {
    // The fractional part in double: its error (< 2^-52 relative) is far below one byte for
    // every unit up to TiB, so floor() gives the exact byte count except at exact ties.
    const double frac = DecimalValue(Concat("0.", d.frac_digits));
    const uint64_t extra = static_cast<uint64_t>(std::floor(frac * static_cast<double>(unit)));
    if (bytes > kMax - extra) return false;
    bytes += extra;
  }
  *out = bytes;
  return true;
}

}  // namespace

MemoryBudget MemoryBudget::Bytes(uint64_t bytes) {
  if (bytes == 0) throw InvalidArgument("KV cache memory budget must be positive, got 0 bytes");
  MemoryBudget b;
  b.kind = Kind::kBytes;
  b.bytes = bytes;
  return b;
}

MemoryBudget MemoryBudget::FractionOfAvailable(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw InvalidArgument(Concat("KV cache memory fraction=", fraction,
                                 " must be in (0, 1] (a share of available memory)"));
  }
  MemoryBudget b;
  b.kind = Kind::kFractionOfAvailable;
  b.fraction = fraction;
  return b;
}

std::string MemoryBudget::ToString() const {
  if (kind == Kind::kBytes) return FormatBytes(bytes);
  std::ostringstream os;
  os << fraction * 100.0 << "% of available memory";
  return os.str();
}

MemoryBudget ParseMemoryBudget(std::string_view text) {
  const std::string_view s = Trim(text);
  if (s.empty()) ThrowMalformed(text, "empty");

  // Split the leading number from the unit.
  size_t n = 0;
  while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
  const std::string_view number = s.substr(0, n);
  const std::string unit = Lower(Trim(s.substr(n)));
  Decimal d;
  if (!SplitDecimal(number, &d)) ThrowMalformed(text, "no number at the start");

  if (unit == "%") {
    const double percent = DecimalValue(number);
    if (!(percent > 0.0 && percent <= 100.0)) {
      ThrowMalformed(text, "a percentage must be in (0, 100]");
    }
    return MemoryBudget::FractionOfAvailable(percent / 100.0);
  }
  if (unit.empty() && d.has_point) {
    const double fraction = DecimalValue(number);
    if (!(fraction > 0.0 && fraction <= 1.0)) {
      ThrowMalformed(text, "a fraction of available memory must be in (0, 1]");
    }
    return MemoryBudget::FractionOfAvailable(fraction);
  }

  struct Unit {
    std::string_view name;
    uint64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"kb", 1000ull},
      {"mb", 1000ull * 1000},
      {"gb", 1000ull * 1000 * 1000},
      {"tb", 1000ull * 1000 * 1000 * 1000},
      {"kib", 1ull << 10},
      {"mib", 1ull << 20},
      {"gib", 1ull << 30},
      {"tib", 1ull << 40},
  };
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (u.bytes == 1 && d.has_point) ThrowMalformed(text, "a byte count must be an integer");
    uint64_t bytes = 0;
    if (!ScaledBytes(d, u.bytes, &bytes)) ThrowMalformed(text, "too large");
    if (bytes == 0) ThrowMalformed(text, "the budget must be positive");
    return MemoryBudget::Bytes(bytes);
  }
  ThrowMalformed(text, Concat("unknown unit \"", Trim(s.substr(n)), "\""));
}

uint64_t ResolveMemoryBudget(const MemoryBudget& budget, uint64_t available_bytes) {
  if (budget.kind == MemoryBudget::Kind::kBytes) return budget.bytes;
  // long double keeps 64 bits of mantissa, so the product is exact to the byte below 2^63.
  const long double b = std::floor(static_cast<long double>(budget.fraction) *
                                   static_cast<long double>(available_bytes));
  return static_cast<uint64_t>(b);
}

uint64_t ParseMemAvailable(std::string_view meminfo_text) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t pos = 0;
  while (pos < meminfo_text.size()) {
    size_t eol = meminfo_text.find('\n', pos);
    if (eol == std::string_view::npos) eol = meminfo_text.size();
    const std::string_view line = meminfo_text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    const std::string_view rest = Trim(line.substr(kKey.size()));
    uint64_t kib = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (ec != std::errc() || Trim(std::string_view(ptr, rest.data() + rest.size() - ptr)) != "kB" ||
        kib > std::numeric_limits<uint64_t>::max() / 1024) {
      throw InvalidArgument(Concat("Malformed /proc/meminfo line \"", line, "\""));
    }
    return kib * 1024;  // /proc/meminfo's "kB" is KiB
  }
  throw InvalidArgument("/proc/meminfo has no MemAvailable line");
}

uint64_t ReadMemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) {
    throw InvalidArgument(
        "Cannot read /proc/meminfo to size the KV cache from a fraction of free memory; give "
        "the budget in bytes instead (e.g. \"2GiB\")");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s + " " + kUnits[u];
}

}  // namespace rpa
