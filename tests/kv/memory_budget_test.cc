// Parsing KV cache memory budgets, resolving fractions, reading MemAvailable, formatting.
#include "kv/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace rpa {
namespace {

using ::testing::HasSubstr;

struct BytesCase {
  const char* text;
  uint64_t bytes;
};

TEST(MemoryBudgetTest, ParsesByteBudgets) {
  const BytesCase cases[] = {
      {"2GiB", 2ull << 30},
      {"512MiB", 512ull << 20},
      {"512 MiB", 512ull << 20},
      {"  2GiB \t", 2ull << 30},
      {"64kib", 64ull << 10},
      {"1TiB", 1ull << 40},
      {"1.5GiB", 3ull << 29},
      {"1.5GB", 1500000000ull},
      {"10KB", 10000ull},
      {"500mb", 500000000ull},
      {"1tb", 1000000000000ull},
      {"1073741824", 1073741824ull},
      {"4096B", 4096ull},
      {"1", 1ull},         // no decimal point: one byte, not "all of memory"
      {"0.001KiB", 1ull},  // 1.024 bytes, floored
      {"18446744073709551615", 18446744073709551615ull},  // UINT64_MAX
  };
  for (const BytesCase& c : cases) {
    SCOPED_TRACE(c.text);
    const MemoryBudget b = ParseMemoryBudget(c.text);
    EXPECT_EQ(b.kind, MemoryBudget::Kind::kBytes);
    EXPECT_EQ(b.bytes, c.bytes);
    EXPECT_EQ(ResolveMemoryBudget(b, 12345), c.bytes);  // available memory is irrelevant
  }
}

struct FractionCase {
  const char* text;
  double fraction;
};

TEST(MemoryBudgetTest, ParsesFractionsOfAvailableMemory) {
  const FractionCase cases[] = {
      {"0.5", 0.5}, {"50%", 0.5},  {"50 %", 0.5}, {"12.5%", 0.125},
      {"1.0", 1.0}, {"100%", 1.0}, {"0.9", 0.9},
  };
  for (const FractionCase& c : cases) {
    SCOPED_TRACE(c.text);
    const MemoryBudget b = ParseMemoryBudget(c.text);
    EXPECT_EQ(b.kind, MemoryBudget::Kind::kFractionOfAvailable);
    EXPECT_DOUBLE_EQ(b.fraction, c.fraction);
  }
}

TEST(MemoryBudgetTest, RejectsMalformedBudgets) {
  const char* bad[] = {
      "",
      " ",
      "abc",
      "GiB",
      "-1GiB",
      "+2GiB",
      "2XB",
      "2 G iB",
      "1e9",
      "inf",
      "nan",
      "0",
      "0GiB",
      "0.0",
      "0%",
      "1.5",
      "150%",
      "100.5%",
      "1.5B",
      "1.01",
      "2.GiB",
      ".5",
      "1.2.3",
      "2 GiB extra",
      "18446744073709551616",
      "20000000TiB",
      "0.0000001KiB",
  };
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    try {
      ParseMemoryBudget(text);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      // The message quotes the input and says what is accepted.
      EXPECT_THAT(e.what(), HasSubstr(std::string("\"") + text + "\""));
      EXPECT_THAT(e.what(), HasSubstr("\"2GiB\""));
    }
  }
}

TEST(MemoryBudgetTest, MessagesSayWhatIsWrong) {
  EXPECT_THROW(
      {
        try {
          ParseMemoryBudget("2XB");
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), HasSubstr("unknown unit \"XB\""));
          throw;
        }
      },
      InvalidArgument);
  try {
    ParseMemoryBudget("1.5");
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("must be in (0, 1]"));
  }
}

TEST(MemoryBudgetTest, TypedConstructorsValidate) {
  EXPECT_THROW(MemoryBudget::Bytes(0), InvalidArgument);
  EXPECT_THROW(MemoryBudget::FractionOfAvailable(0.0), InvalidArgument);
  EXPECT_THROW(MemoryBudget::FractionOfAvailable(1.01), InvalidArgument);
  EXPECT_THROW(MemoryBudget::FractionOfAvailable(-0.5), InvalidArgument);
  EXPECT_EQ(MemoryBudget::Bytes(7).bytes, 7u);
}

TEST(MemoryBudgetTest, ResolvesFractions) {
  EXPECT_EQ(ResolveMemoryBudget(MemoryBudget::FractionOfAvailable(0.5), 1000), 500u);
  EXPECT_EQ(ResolveMemoryBudget(MemoryBudget::FractionOfAvailable(1.0), 123456789), 123456789u);
  // Fractions of bytes are floored: 0.25 * 10 = 2.5 -> 2.
  EXPECT_EQ(ResolveMemoryBudget(MemoryBudget::FractionOfAvailable(0.25), 10), 2u);
  EXPECT_EQ(ResolveMemoryBudget(ParseMemoryBudget("50%"), 64ull << 30), 32ull << 30);
  EXPECT_EQ(ResolveMemoryBudget(MemoryBudget::FractionOfAvailable(0.5), 0), 0u);
}

TEST(MemoryBudgetTest, ToString) {
  EXPECT_EQ(ParseMemoryBudget("2GiB").ToString(), "2 GiB");
  EXPECT_EQ(ParseMemoryBudget("50%").ToString(), "50% of available memory");
}

TEST(MemoryBudgetTest, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       131072000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   65536000 kB\n"
      "Buffers:          123456 kB\n";
  EXPECT_EQ(ParseMemAvailable(meminfo), 65536000ull * 1024);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: 1 kB"), 1024u);  // last line, no newline
  EXPECT_THROW(ParseMemAvailable("MemTotal: 1 kB\nMemFree: 1 kB\n"), InvalidArgument);
  EXPECT_THROW(ParseMemAvailable("MemAvailable: lots kB\n"), InvalidArgument);
  EXPECT_THROW(ParseMemAvailable("MemAvailable: 12 MB\n"), InvalidArgument);
}

TEST(MemoryBudgetTest, ReadsThisMachinesMemAvailable) {
  // Linux only (the project's platform); any running machine has some memory available.
  EXPECT_GT(ReadMemAvailableBytes(), 0u);
}

TEST(MemoryBudgetTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1024), "1 KiB");
  EXPECT_EQ(FormatBytes(11520), "11.25 KiB");
  EXPECT_EQ(FormatBytes(18432), "18 KiB");
  EXPECT_EQ(FormatBytes(23040), "22.5 KiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.5 GiB");
  EXPECT_EQ(FormatBytes(2ull << 30), "2 GiB");
}

}  // namespace
}  // namespace rpa
