// The strict JSON reader: what it accepts, what it refuses, and where it says the error is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "tools/json_value.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text) {
  try {
    JsonValue::Parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonValue, ParsesEveryKind) {
  const JsonValue v = JsonValue::Parse(
      R"( {"a": [1, -2.5e3, 0.125, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00",
           "o": {}} )");
  ASSERT_TRUE(v.is_object());
  const auto& a = v.Find("a")->array();
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0].number(), 1.0);
  EXPECT_EQ(a[1].number(), -2500.0);
  EXPECT_EQ(a[1].number_text(), "-2.5e3");
  EXPECT_EQ(a[2].number(), 0.125);
  EXPECT_TRUE(a[3].boolean());
  EXPECT_FALSE(a[4].boolean());
  EXPECT_TRUE(a[5].is_null());
  // é is U+00E9 (C3 A9), 😀 is U+1F600 from a surrogate pair (F0 9F 98 80).
  EXPECT_EQ(v.Find("s")->string(), "x\"\\/\n\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_TRUE(v.Find("o")->object().empty());
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(JsonValue, RefusesWhatRfc8259Refuses) {
  EXPECT_THAT(ErrorOf("{\"a\": 1,}"), HasSubstr("expected a member name"));
  EXPECT_THAT(ErrorOf("[1, 2,]"), HasSubstr("expected a value"));
  EXPECT_THAT(ErrorOf("[01]"), HasSubstr("leading zeros"));
  EXPECT_THAT(ErrorOf("[+1]"), HasSubstr("expected a value"));
  EXPECT_THAT(ErrorOf("[1.]"), HasSubstr("after '.'"));
  EXPECT_THAT(ErrorOf("[1e]"), HasSubstr("exponent"));
  EXPECT_THAT(ErrorOf("[NaN]"), HasSubstr("expected a value"));
  EXPECT_THAT(ErrorOf("{'a': 1}"), HasSubstr("member name"));
  EXPECT_THAT(ErrorOf("{\"a\": 1} x"), HasSubstr("after the value"));
  EXPECT_THAT(ErrorOf("{\"a\": 1, \"a\": 2}"), HasSubstr("duplicate member \"a\""));
  EXPECT_THAT(ErrorOf("\"tab\there\""), HasSubstr("raw control character"));
  EXPECT_THAT(ErrorOf("\"\\ud83d\""), HasSubstr("high surrogate"));
  EXPECT_THAT(ErrorOf("\"\\x\""), HasSubstr("unknown escape"));
  EXPECT_THAT(ErrorOf("[1e999]"), HasSubstr("out of range"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("unexpected end"));
  EXPECT_THAT(ErrorOf("// c\n{}"), HasSubstr("expected a value"));
  EXPECT_THAT(ErrorOf(std::string(65, '[') + std::string(65, ']')), HasSubstr("deeper than 64"));
  EXPECT_EQ(ErrorOf(std::string(63, '[') + std::string(63, ']')), "(no error)");
}

TEST(JsonValue, ErrorsSayLineAndColumn) {
  EXPECT_THAT(ErrorOf("{\n  \"a\": 1,\n  \"b\": tru\n}"), HasSubstr("line 3, column 8"));
}

TEST(JsonValue, WrongKindAccessThrows) {
  const JsonValue v = JsonValue::Parse("[1]");
  EXPECT_THROW(v.string(), InvalidArgument);
  EXPECT_THROW(v.Find("a"), InvalidArgument);
}

TEST(JsonWriters, QuoteAndFloatRoundTrip) {
  const std::string s = std::string("a\"b\\c\n\x01") + "\xC3\xA9";
  EXPECT_EQ(JsonValue::Parse(JsonQuote(s)).string(), s);
  for (const float x :
       {0.0f, 1.0f, -0.1f, 3.0e-7f, 448.0f, 1.17549435e-38f, 3.4028235e38f, 0.0300781f}) {
    const std::string text = JsonFloat(x);
    EXPECT_EQ(static_cast<float>(JsonValue::Parse(text).number()), x) << text;
  }
  EXPECT_THROW(JsonFloat(std::numeric_limits<float>::infinity()), InvalidArgument);
}

}  // namespace
}  // namespace rpa::cli
