// KvCacheSpec arithmetic for the real models' shapes (../shared/docs/MODELS.md) and its
// validation. Expected byte counts are written out by hand from the shapes, not computed
// with the code under test.
#include "kv/kv_cache_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/error.h"

namespace rpa {
namespace {

using ::testing::HasSubstr;

KvCacheSpec SmolLM2(DType dtype) {
  // SmolLM2-135M: 30 layers, 3 kv heads, head_dim 64.
  return KvCacheSpec{.num_layers = 30,
                     .num_kv_heads = 3,
                     .head_dim = 64,
                     .page_size = 16,
                     .dtype = dtype,
                     .kv_donor = {}};
}

KvCacheSpec Gemma3(DType dtype) {
  // Gemma 3 270M: 18 layers, 1 kv head, head_dim 256.
  return KvCacheSpec{.num_layers = 18,
                     .num_kv_heads = 1,
                     .head_dim = 256,
                     .page_size = 16,
                     .dtype = dtype,
                     .kv_donor = {}};
}

TEST(KvCacheSpecTest, SmolLM2BytesPerToken) {
  // Per layer and token: K and V of 3 heads x 64 = 384 elements; 30 layers = 11520 elements.
  EXPECT_EQ(SmolLM2(DType::kFloat8E4M3FN).BytesPerTokenPerLayer(), 384u);
  EXPECT_EQ(SmolLM2(DType::kFloat8E4M3FN).BytesPerToken(), 11520u);
  EXPECT_EQ(SmolLM2(DType::kFloat8E5M2).BytesPerToken(), 11520u);
  EXPECT_EQ(SmolLM2(DType::kBFloat16).BytesPerToken(), 23040u);
  EXPECT_EQ(SmolLM2(DType::kFloat32).BytesPerToken(), 46080u);
  EXPECT_EQ(SmolLM2(DType::kBFloat16).BytesPerPage(), 23040u * 16);
  EXPECT_EQ(SmolLM2(DType::kBFloat16).BytesPerPagePerLayer(), 768u * 16);
}

TEST(KvCacheSpecTest, Gemma3BytesPerToken) {
  // Per layer and token: K and V of 1 head x 256 = 512 elements; 18 layers = 9216 elements.
  EXPECT_EQ(Gemma3(DType::kFloat8E4M3FN).BytesPerToken(), 9216u);
  EXPECT_EQ(Gemma3(DType::kBFloat16).BytesPerToken(), 18432u);  // 18 KiB
  EXPECT_EQ(Gemma3(DType::kFloat32).BytesPerToken(), 36864u);
  EXPECT_EQ(Gemma3(DType::kFloat8E4M3FN).BytesPerPage(), 9216u * 16);
}

TEST(KvCacheSpecTest, SharedLayersCostNothing) {
  KvCacheSpec spec = Gemma3(DType::kBFloat16);
  // Layers 10..17 read layers 8 and 9 (the pattern of cross-layer KV sharing).
  spec.kv_donor.assign(18, KvCacheSpec::kOwnsStorage);
  for (int l = 10; l < 18; ++l) spec.kv_donor[l] = 8 + (l % 2);
  EXPECT_NO_THROW(spec.Validate());
  EXPECT_EQ(spec.NumStorageLayers(), 10);
  EXPECT_EQ(spec.BytesPerToken(), 10u * 1024);
  EXPECT_TRUE(spec.OwnsStorage(9));
  EXPECT_FALSE(spec.OwnsStorage(11));
  EXPECT_EQ(spec.StorageLayer(11), 9);
  EXPECT_EQ(spec.StorageLayer(12), 8);
  EXPECT_EQ(spec.StorageLayer(3), 3);
}

TEST(KvCacheSpecTest, WithDTypeChangesOnlyTheDType) {
  const KvCacheSpec s = SmolLM2(DType::kBFloat16).WithDType(DType::kFloat8E4M3FN);
  EXPECT_EQ(s.dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(s.num_layers, 30);
  EXPECT_EQ(s.BytesPerToken() * 2, SmolLM2(DType::kBFloat16).BytesPerToken());
}

void ExpectInvalid(const KvCacheSpec& spec, const std::string& fragment) {
  try {
    spec.Validate();
    ADD_FAILURE() << "expected InvalidArgument containing \"" << fragment << "\"";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(KvCacheSpecTest, ValidateRejectsBadSpecs) {
  KvCacheSpec s = SmolLM2(DType::kBFloat16);
  s.num_layers = 0;
  ExpectInvalid(s, "num_layers=0");
  s = SmolLM2(DType::kBFloat16);
  s.head_dim = -64;
  ExpectInvalid(s, "head_dim=-64");
  s = SmolLM2(DType::kBFloat16);
  s.page_size = 0;
  ExpectInvalid(s, "page_size=0");
  s = SmolLM2(DType::kFloat16);
  ExpectInvalid(s, "dtype=float16");

  s = SmolLM2(DType::kBFloat16);
  s.kv_donor.assign(29, KvCacheSpec::kOwnsStorage);
  ExpectInvalid(s, "kv_donor has 29 entries, expected num_layers=30");
  s.kv_donor.assign(30, KvCacheSpec::kOwnsStorage);
  s.kv_donor[4] = 4;  // itself
  ExpectInvalid(s, "kv_donor[4]=4");
  s.kv_donor[4] = 7;  // a later layer
  ExpectInvalid(s, "kv_donor[4]=7");
  s.kv_donor[4] = -2;
  ExpectInvalid(s, "kv_donor[4]=-2");
  s.kv_donor[4] = 2;
  s.kv_donor[6] = 4;  // a chain: 6 -> 4 -> 2
  ExpectInvalid(s, "kv_donor[6]=4 names layer 4, which itself reads layer 2");
}

}  // namespace
}  // namespace rpa
