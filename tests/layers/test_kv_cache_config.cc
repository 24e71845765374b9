#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "layers/kv_cache_config.h"
#include "util/error.h"

namespace rpa {
namespace {

TEST(KvCacheConfigTest, ParsesVllmStrings) {
  for (DType act : {DType::kFloat32, DType::kBFloat16}) {
    EXPECT_EQ(ParseKvCacheDtype("auto", act), act);
    EXPECT_EQ(ParseKvCacheDtype("bfloat16", act), DType::kBFloat16);
    EXPECT_EQ(ParseKvCacheDtype("fp8", act), DType::kFloat8E4M3FN);
    EXPECT_EQ(ParseKvCacheDtype("fp8_e4m3", act), DType::kFloat8E4M3FN);
    EXPECT_EQ(ParseKvCacheDtype("fp8_e5m2", act), DType::kFloat8E5M2);
  }
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(KvCacheConfigTest, UnknownStringNamesTheAcceptedValues) {
  for (const char* bad : {"fp16", "float8_e4m3fn", "FP8", "", "fp8_e4m3fn"}) {
    EXPECT_EQ(ErrorOf([&] { ParseKvCacheDtype(bad, DType::kFloat32); }),
              std::string("Unknown kv_cache_dtype=\"") + bad +
                  "\"; expected one of: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2.");
  }
}

TEST(KvCacheConfigTest, ActivationDtypeMustBeAQueryDtype) {
  EXPECT_EQ(ErrorOf([] { ParseKvCacheDtype("auto", DType::kFloat8E4M3FN); }),
            "activation dtype=float8_e4m3fn must be float32 or bfloat16.");
}

TEST(KvCacheConfigTest, ScalesDefaultToOneAndAreValidated) {
  KvCacheConfig kv = KvCacheConfig::Parse("fp8", DType::kBFloat16, 2);
  EXPECT_TRUE(kv.quantized());
  EXPECT_EQ(kv.num_layers(), 2);
  EXPECT_EQ(kv.scales(0).k_scale, 1.0f);
  EXPECT_EQ(kv.scales(1).v_scale, 1.0f);
  kv.SetScales(1, KvScales{0.25f, 3.0f});
  EXPECT_EQ(kv.scales(1).k_scale, 0.25f);
  EXPECT_EQ(kv.scales(1).v_scale, 3.0f);
  EXPECT_EQ(kv.scales(0).k_scale, 1.0f);

  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {0.0f, -1.0f, inf, -inf, nan}) {
    EXPECT_THROW(kv.SetScales(0, KvScales{bad, 1.0f}), InvalidArgument) << bad;
    EXPECT_THROW(kv.SetScales(0, KvScales{1.0f, bad}), InvalidArgument) << bad;
  }
  EXPECT_EQ(ErrorOf([&] {
              kv.SetScales(1, KvScales{1.0f, -2.0f});
            }),
            "v_scale=-2 of layer 1 must be finite and > 0.");
  EXPECT_EQ(kv.scales(1).v_scale, 3.0f);  // a refused update leaves the old scales
  EXPECT_EQ(ErrorOf([&] { kv.scales(2); }), "layer=2 is out of range [0, 2).");
}

TEST(KvCacheConfigTest, NonFp8CachesAreNotQuantized) {
  EXPECT_FALSE(KvCacheConfig::Parse("auto", DType::kFloat32, 1).quantized());
  EXPECT_FALSE(KvCacheConfig::Parse("bfloat16", DType::kFloat32, 1).quantized());
  EXPECT_TRUE(KvCacheConfig::Parse("fp8_e5m2", DType::kFloat32, 1).quantized());
}

}  // namespace
}  // namespace rpa
