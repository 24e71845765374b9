#include "kv/kv_cache_spec.h"

#include "util/error.h"

namespace rpa {

bool IsKvCacheDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return true;
    case DType::kFloat16:
      return false;
  }
  return false;
}

void KvCacheSpec::Validate() const {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0 || page_size <= 0) {
    throw InvalidArgument(Concat("KvCacheSpec sizes must be positive: num_layers=", num_layers,
                                 ", num_kv_heads=", num_kv_heads, ", head_dim=", head_dim,
                                 ", page_size=", page_size));
  }
  if (!IsKvCacheDType(dtype)) {
    throw InvalidArgument(Concat("KV cache dtype=", DTypeName(dtype),
                                 " is not supported; expected one of float32, bfloat16, "
                                 "float8_e4m3fn, float8_e5m2"));
  }
  if (kv_donor.empty()) return;
  if (static_cast<int64_t>(kv_donor.size()) != num_layers) {
    throw InvalidArgument(Concat("KvCacheSpec kv_donor has ", kv_donor.size(),
                                 " entries, expected num_layers=", num_layers));
  }
  for (int32_t l = 0; l < num_layers; ++l) {
    const int32_t d = kv_donor[l];
    if (d == kOwnsStorage) continue;
    if (d < 0 || d >= l) {
      throw InvalidArgument(Concat("KvCacheSpec kv_donor[", l, "]=", d,
                                   " must be -1 (owns storage) or an earlier layer in [0, ", l,
                                   ")"));
    }
    if (kv_donor[d] != kOwnsStorage) {
      throw InvalidArgument(Concat("KvCacheSpec kv_donor[", l, "]=", d, " names layer ", d,
                                   ", which itself reads layer ", kv_donor[d],
                                   "; a donor must own its storage"));
    }
  }
}

bool KvCacheSpec::OwnsStorage(int32_t layer) const {
  return kv_donor.empty() || kv_donor[layer] == kOwnsStorage;
}

int32_t KvCacheSpec::StorageLayer(int32_t layer) const {
  return OwnsStorage(layer) ? layer : kv_donor[layer];
}

int32_t KvCacheSpec::NumStorageLayers() const {
  int32_t n = 0;
  for (int32_t l = 0; l < num_layers; ++l) n += OwnsStorage(l) ? 1 : 0;
  return n;
}

uint64_t KvCacheSpec::BytesPerTokenPerLayer() const {
  return 2 * static_cast<uint64_t>(num_kv_heads) * static_cast<uint64_t>(head_dim) *
         DTypeSize(dtype);
}

uint64_t KvCacheSpec::BytesPerToken() const {
  return BytesPerTokenPerLayer() * static_cast<uint64_t>(NumStorageLayers());
}

uint64_t KvCacheSpec::BytesPerPage() const {
  return BytesPerToken() * static_cast<uint64_t>(page_size);
}

uint64_t KvCacheSpec::BytesPerPagePerLayer() const {
  return BytesPerTokenPerLayer() * static_cast<uint64_t>(page_size);
}

KvCacheSpec KvCacheSpec::WithDType(DType other) const {
  KvCacheSpec s = *this;
  s.dtype = other;
  return s;
}

}  // namespace rpa
