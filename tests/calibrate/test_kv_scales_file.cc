// The KV scales file: scales from amax, the writer/reader round trip, every rejection with
// its message, and applying a file to a KvCacheConfig.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "layers/kv_cache_config.h"
#include "tools/kv_scales_file.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

using ::testing::HasSubstr;

KvScalesFile Sample() {
  KvScalesFile f;
  f.model = "tiny \"quoted\" model";
  f.kv_cache_dtype = "fp8_e4m3";
  for (int l = 0; l < 3; ++l) {
    KvScalesLayer x;
    x.k_amax = 13.5f + l;
    x.v_amax = 0.1f * (l + 1);
    x.k_amax_per_head = {x.k_amax, 2.0f / 3.0f};
    x.v_amax_per_head = {0.0f, x.v_amax};
    f.layers.push_back(x);
  }
  f.calibration_text = "/usr/share/common-licenses/GPL-3";
  f.calibration_tokens = 8192;
  f.calibration_ctx = 512;
  f.calibration_chunks = 16;
  ComputeKvScales(DType::kFloat8E4M3FN, f);
  return f;
}

std::string ParseError(const std::string& json) {
  try {
    ParseKvScalesFile(json, "s.json");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// A valid file with one layer whose k_scale text is `k_scale`.
std::string OneLayer(const std::string& k_scale, const std::string& extra = "") {
  return R"({"format": "rpa-kv-scales", "version": 1, "kv_cache_dtype": "fp8",)" + extra +
         R"( "layers": [{"k_scale": )" + k_scale + R"(, "v_scale": 0.5}]})";
}

TEST(KvScales, ScaleIsAmaxOverTheFormatsMax) {
  KvScalesFile f;
  f.layers.resize(3);
  f.layers[0].k_amax = 448.0f;  // -> 1
  f.layers[0].v_amax = 8.96f;   // -> 0.02
  f.layers[1].k_amax = 0.0f;    // never non-zero: 1
  f.layers[1].v_amax = 57344.0f;
  f.layers[2].kv_donor = 0;  // KV-shared: the donor's, whatever it saw itself
  f.layers[2].k_amax = 1000.0f;
  KvScalesFile e5 = f;
  ComputeKvScales(DType::kFloat8E4M3FN, f);
  EXPECT_EQ(f.layers[0].k_scale, 1.0f);
  EXPECT_EQ(f.layers[0].v_scale, 8.96f / 448.0f);
  EXPECT_EQ(f.layers[1].k_scale, 1.0f);
  EXPECT_EQ(f.layers[1].v_scale, 128.0f);
  EXPECT_EQ(f.layers[2].k_scale, f.layers[0].k_scale);
  EXPECT_EQ(f.layers[2].v_scale, f.layers[0].v_scale);
  ComputeKvScales(DType::kFloat8E5M2, e5);
  EXPECT_EQ(e5.layers[1].v_scale, 1.0f);
  EXPECT_EQ(e5.layers[0].k_scale, 448.0f / 57344.0f);
}

TEST(KvScales, ComputeRejectsBadInput) {
  KvScalesFile f;
  f.layers.resize(2);
  EXPECT_THROW(ComputeKvScales(DType::kBFloat16, f), InvalidArgument);
  f.layers[1].v_amax = std::numeric_limits<float>::infinity();
  try {
    ComputeKvScales(DType::kFloat8E4M3FN, f);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("v_amax=inf of layer 1"));
  }
  f.layers[1].v_amax = 1.0f;
  f.layers[1].kv_donor = 1;  // itself: not an earlier layer
  EXPECT_THROW(ComputeKvScales(DType::kFloat8E4M3FN, f), InvalidArgument);
}

TEST(KvScales, RoundTripIsExact) {
  KvScalesFile f = Sample();
  f.layers[2].kv_donor = 0;
  const KvScalesFile g = ParseKvScalesFile(FormatKvScalesFile(f), "mem");
  EXPECT_EQ(g.model, f.model);
  EXPECT_EQ(g.kv_cache_dtype, f.kv_cache_dtype);
  EXPECT_EQ(g.calibration_text, f.calibration_text);
  EXPECT_EQ(g.calibration_tokens, f.calibration_tokens);
  EXPECT_EQ(g.calibration_ctx, f.calibration_ctx);
  EXPECT_EQ(g.calibration_chunks, f.calibration_chunks);
  ASSERT_EQ(g.layers.size(), f.layers.size());
  for (size_t l = 0; l < f.layers.size(); ++l) {
    // Bit-exact: the writer prints the shortest text that reads back as the same float.
    EXPECT_EQ(g.layers[l].k_scale, f.layers[l].k_scale);
    EXPECT_EQ(g.layers[l].v_scale, f.layers[l].v_scale);
    EXPECT_EQ(g.layers[l].k_amax, f.layers[l].k_amax);
    EXPECT_EQ(g.layers[l].v_amax, f.layers[l].v_amax);
    EXPECT_EQ(g.layers[l].k_amax_per_head, f.layers[l].k_amax_per_head);
    EXPECT_EQ(g.layers[l].v_amax_per_head, f.layers[l].v_amax_per_head);
    EXPECT_EQ(g.layers[l].kv_donor, f.layers[l].kv_donor);
  }
}

TEST(KvScales, FileRoundTripAndApply) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "rpa_test_kv_scales.json").string();
  const KvScalesFile f = Sample();
  WriteKvScalesFile(path, f);
  KvCacheConfig config = KvCacheConfig::Parse("fp8_e4m3", DType::kFloat32, 3);
  ::testing::internal::CaptureStderr();
  ApplyKvScalesFile(path, config);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // same dtype: no warning
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(config.scales(l).k_scale, f.layers[l].k_scale);
    EXPECT_EQ(config.scales(l).v_scale, f.layers[l].v_scale);
  }
  std::filesystem::remove(path);
}

TEST(KvScales, WarnsOnAnotherDtypeOrANonFp8Cache) {
  const KvScalesFile f = Sample();  // fp8_e4m3
  KvCacheConfig e5 = KvCacheConfig::Parse("fp8_e5m2", DType::kFloat32, 3);
  ::testing::internal::CaptureStderr();
  ApplyKvScales(f, "s.json", e5);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("'s.json' was calibrated for float8_e4m3fn"));
  EXPECT_EQ(e5.scales(1).k_scale, f.layers[1].k_scale);  // applied all the same
  KvCacheConfig bf16 = KvCacheConfig::Parse("bfloat16", DType::kFloat32, 3);
  ::testing::internal::CaptureStderr();
  ApplyKvScales(f, "s.json", bf16);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("has no effect"));
  // "fp8" and "fp8_e4m3" are the same format: no warning.
  KvCacheConfig fp8 = KvCacheConfig::Parse("fp8", DType::kFloat32, 3);
  ::testing::internal::CaptureStderr();
  ApplyKvScales(f, "s.json", fp8);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(KvScales, RejectsALayerCountMismatch) {
  KvCacheConfig config = KvCacheConfig::Parse("fp8", DType::kFloat32, 30);
  try {
    ApplyKvScales(Sample(), "s.json", config);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "kv scales file 's.json': has 3 layers; the model has 30");
  }
}

TEST(KvScales, RejectsAMissingFile) {
  KvCacheConfig config = KvCacheConfig::Parse("fp8", DType::kFloat32, 1);
  try {
    ApplyKvScalesFile("/nonexistent/scales.json", config);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "kv scales file '/nonexistent/scales.json': cannot be opened (missing or "
                 "unreadable)");
  }
}

TEST(KvScales, RejectsBadContent) {
  EXPECT_EQ(ParseError(OneLayer("0.25")), "(no error)");
  EXPECT_THAT(ParseError("{\"format\": "),
              HasSubstr("kv scales file 's.json': bad JSON at line 1, column 12"));
  EXPECT_THAT(ParseError("[1]"), HasSubstr("the top level is not a JSON object"));
  EXPECT_THAT(ParseError(R"({"version": 1})"), HasSubstr("has no \"format\""));
  EXPECT_THAT(ParseError(R"({"format": "rpa-scales", "version": 1})"),
              HasSubstr("\"format\" is \"rpa-scales\"; expected \"rpa-kv-scales\""));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": 2})"),
              HasSubstr("\"version\" is 2; this rpa reads version 1"));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": "1"})"),
              HasSubstr("\"version\" is a string; expected a number"));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": 1, "kv_cache_dtype": "fp4",
                            "layers": []})"),
              HasSubstr("Unknown kv_cache_dtype=\"fp4\""));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": 1, "kv_cache_dtype": "fp8",
                            "layers": []})"),
              HasSubstr("\"layers\" is empty"));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": 1, "kv_cache_dtype": "fp8",
                            "layers": [{"v_scale": 1}]})"),
              HasSubstr("layers[0] has no \"k_scale\""));
  EXPECT_THAT(ParseError(OneLayer("\"0.5\"")), HasSubstr("layers[0] \"k_scale\" is a string"));
  EXPECT_THAT(ParseError(OneLayer("0")), HasSubstr("k_scale=0 of layer 0 must be finite and > 0."));
  EXPECT_THAT(ParseError(OneLayer("-0.5")),
              HasSubstr("k_scale=-0.5 of layer 0 must be finite and > 0."));
  // Beyond float's range: not finite as a float (JSON itself has no inf/NaN to write).
  EXPECT_THAT(ParseError(OneLayer("1e39")),
              HasSubstr("layers[0] k_scale=1e39 is not a finite float"));
  EXPECT_THAT(ParseError(OneLayer("1e-50")), HasSubstr("is not a finite float"));
  // Integers are range-checked before any cast (a donor must be an earlier layer).
  EXPECT_THAT(ParseError(OneLayer("0.5", R"( "calibration": {"tokens": 1e300},)")),
              HasSubstr("calibration \"tokens\" must be an integer in [0, "));
  EXPECT_THAT(ParseError(R"({"format": "rpa-kv-scales", "version": 1, "kv_cache_dtype": "fp8",
                            "layers": [{"k_scale": 1, "v_scale": 1, "kv_donor": 0}]})"),
              HasSubstr("layers[0] \"kv_donor\" must be an integer in [-1, -1]"));
}

}  // namespace
}  // namespace rpa::cli
