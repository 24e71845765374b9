// KvCacheStorage: one aligned allocation per storage layer in the contract's
// [NP, PS, 2*Hkv, D] layout, shared layers aliasing their donor, zero and NaN fills.
#include "kv/kv_cache_storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "numerics/convert.h"
#include "util/error.h"

namespace rpa {
namespace {

using ::testing::HasSubstr;

KvCacheSpec Spec(int32_t layers, int32_t kv_heads, int32_t head_dim, int32_t page_size,
                 DType dtype) {
  return KvCacheSpec{.num_layers = layers,
                     .num_kv_heads = kv_heads,
                     .head_dim = head_dim,
                     .page_size = page_size,
                     .dtype = dtype,
                     .kv_donor = {}};
}

TEST(KvCacheStorageTest, LayoutShapeStridesAndAlignment) {
  // NP 3, PS 4, Hkv 2, D 8: a token row is 2*2*8 = 32 elements, a page 4 rows = 128.
  const KvCacheStorage cache(Spec(5, 2, 8, 4, DType::kBFloat16), 3);
  EXPECT_EQ(cache.layer_bytes(), 3u * 128 * 2);
  EXPECT_EQ(cache.total_bytes(), 5u * 3 * 128 * 2);
  std::vector<const void*> bases;
  for (int32_t l = 0; l < 5; ++l) {
    const TensorView v = cache.Layer(l);
    EXPECT_EQ(v.dtype, DType::kBFloat16);
    ASSERT_EQ(v.rank, 4);
    EXPECT_EQ(v.shape_str(), "(3, 4, 4, 8)");
    EXPECT_EQ(v.strides[0], 128);
    EXPECT_EQ(v.strides[1], 32);
    EXPECT_EQ(v.strides[2], 8);
    EXPECT_EQ(v.strides[3], 1);
    EXPECT_TRUE(v.is_contiguous());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 4096, 0u) << "layer " << l;
    bases.push_back(v.data);
  }
  // Distinct, non-overlapping allocations: each base lies outside every other layer.
  for (size_t a = 0; a < bases.size(); ++a) {
    for (size_t b = 0; b < bases.size(); ++b) {
      if (a == b) continue;
      const auto* pa = static_cast<const std::byte*>(bases[a]);
      const auto* pb = static_cast<const std::byte*>(bases[b]);
      EXPECT_FALSE(pb >= pa && pb < pa + cache.layer_bytes()) << a << " overlaps " << b;
    }
  }
}

TEST(KvCacheStorageTest, ElementAddressesFollowTheContract) {
  // Element (page p, slot s, kv-slot c, d) of a layer is at ((p*PS + s)*2Hkv + c)*D + d;
  // K of head h is c = 2h, V is c = 2h + 1. Write a distinct f32 value at each through that
  // formula, read back through the view's strides.
  const int32_t np = 2, ps = 3, hkv = 2, d = 5;
  KvCacheStorage cache(Spec(1, hkv, d, ps, DType::kFloat32), np);
  const TensorView v = cache.Layer(0);
  float* base = v.as<float>();
  for (int p = 0; p < np; ++p)
    for (int s = 0; s < ps; ++s)
      for (int c = 0; c < 2 * hkv; ++c)
        for (int e = 0; e < d; ++e)
          base[((p * ps + s) * 2 * hkv + c) * d + e] =
              static_cast<float>(1000 * p + 100 * s + 10 * c + e);
  for (int p = 0; p < np; ++p)
    for (int s = 0; s < ps; ++s)
      for (int c = 0; c < 2 * hkv; ++c)
        for (int e = 0; e < d; ++e) {
          const int64_t off =
              p * v.strides[0] + s * v.strides[1] + c * v.strides[2] + e * v.strides[3];
          ASSERT_EQ(base[off], static_cast<float>(1000 * p + 100 * s + 10 * c + e));
        }
  // The last element is the last of the layer's bytes.
  EXPECT_EQ(static_cast<size_t>(v.numel()) * sizeof(float), cache.layer_bytes());
}

TEST(KvCacheStorageTest, SharedLayersAliasTheirDonor) {
  KvCacheSpec spec = Spec(6, 1, 16, 4, DType::kFloat8E4M3FN);
  spec.kv_donor = {-1, -1, -1, -1, 2, 3};
  KvCacheStorage cache(spec, 10);
  EXPECT_EQ(cache.total_bytes(), 4 * cache.layer_bytes());
  EXPECT_EQ(cache.Layer(4).data, cache.Layer(2).data);
  EXPECT_EQ(cache.Layer(5).data, cache.Layer(3).data);
  EXPECT_NE(cache.Layer(2).data, cache.Layer(3).data);
  EXPECT_EQ(cache.Layer(4).shape_str(), cache.Layer(2).shape_str());
  // A write through the donor is seen by the sharer.
  cache.Layer(2).as<uint8_t>()[7] = 0x38;
  EXPECT_EQ(cache.Layer(4).as<uint8_t>()[7], 0x38);
}

TEST(KvCacheStorageTest, ZeroFillByDefault) {
  const KvCacheStorage cache(Spec(2, 3, 8, 5, DType::kFloat8E5M2), 7);
  for (int32_t l = 0; l < 2; ++l) {
    const auto* bytes = cache.Layer(l).as<const uint8_t>();
    for (size_t i = 0; i < cache.layer_bytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  }
}

TEST(KvCacheStorageTest, NaNFillForEveryCacheDType) {
  for (DType dtype :
       {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    SCOPED_TRACE(DTypeName(dtype));
    // Odd sizes so the doubling fill ends on a partial copy.
    const KvCacheStorage cache(Spec(2, 3, 7, 5, dtype), 3,
                               {.fill = KvCacheStorageOptions::Fill::kNaN});
    for (int32_t l = 0; l < 2; ++l) {
      const TensorView v = cache.Layer(l);
      const auto* bytes = static_cast<const std::byte*>(v.data);
      for (int64_t i = 0; i < v.numel(); ++i) {
        ASSERT_TRUE(std::isnan(LoadAsF32(dtype, bytes + i * DTypeSize(dtype)))) << i;
      }
    }
  }
}

TEST(KvCacheStorageTest, Errors) {
  const KvCacheStorage cache(Spec(2, 1, 8, 4, DType::kBFloat16), 2);
  try {
    cache.Layer(2);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer=2 is outside [0, 2)"));
  }
  EXPECT_THROW(cache.Layer(-1), InvalidArgument);
  EXPECT_THROW(KvCacheStorage(Spec(2, 1, 8, 4, DType::kBFloat16), 0), InvalidArgument);
  EXPECT_THROW(KvCacheStorage(Spec(2, 1, 8, 4, DType::kFloat16), 4), InvalidArgument);
}

TEST(KvCacheStorageTest, RefusesImpossibleSizesWithAClearError) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator aborts on requests above 2^40 bytes instead of failing.
  GTEST_SKIP() << "huge allocations abort under AddressSanitizer";
#endif
  // More bytes than the address space holds: a clear error rather than a crash. 2^32 bytes
  // per page (2 * 64 heads * 4096 * 4 B * 2048 tokens) x 2^18 pages = 2^50 bytes, above the
  // 2^47-byte user address space, so even an overcommitting kernel refuses.
  try {
    KvCacheStorage huge(Spec(1, 64, 4096, 2048, DType::kFloat32), 1 << 18);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Cannot allocate the KV cache of layer 0"));
  }
  // 2^43 bytes per page x 2^31 - 1 pages does not even fit in size_t.
  try {
    KvCacheStorage huge(Spec(1, 1 << 10, 1 << 20, 1 << 10, DType::kFloat32), 2147483647);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("overflows size_t"));
  }
}

TEST(KvCacheStorageTest, MovesKeepTheBytes) {
  KvCacheStorage a(Spec(1, 1, 4, 2, DType::kFloat32), 2);
  void* data = a.Layer(0).data;
  KvCacheStorage b(std::move(a));
  EXPECT_EQ(b.Layer(0).data, data);
  EXPECT_EQ(b.num_pages(), 2);
}

}  // namespace
}  // namespace rpa
