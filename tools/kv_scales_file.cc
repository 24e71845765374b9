#include "tools/kv_scales_file.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tools/json_value.h"
#include "util/error.h"

namespace rpa::cli {
namespace {

// Every message names the file first, so a CLI user knows which one is wrong.
[[noreturn]] void Fail(std::string_view origin, std::string_view why) {
  throw InvalidArgument(Concat("kv scales file '", origin, "': ", why));
}

const JsonValue& Member(const JsonValue& object, std::string_view key, JsonValue::Kind kind,
                        std::string_view where, std::string_view origin) {
  const JsonValue* v = object.Find(key);
  if (v == nullptr) Fail(origin, Concat(where, "has no \"", key, "\""));
  if (v->kind() != kind) {
    Fail(origin, Concat(where, "\"", key, "\" is a ", JsonValue::KindName(v->kind()),
                        "; expected a ", JsonValue::KindName(kind)));
  }
  return *v;
}

// The number's text read straight to float (no double rounding through double).
float ToFloat(const JsonValue& v, std::string_view what, std::string_view origin) {
  const std::string& s = v.number_text();
  float x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) {
    Fail(origin, Concat(what, "=", s, " is not a finite float"));
  }
  return x;
}

// An optional integer member in [lo, hi]; `fallback` when absent. (A double outside the
// target type's range must not reach a cast: that is undefined behaviour.)
int64_t Integer(const JsonValue& object, std::string_view key, int64_t lo, int64_t hi,
                int64_t fallback, std::string_view where, std::string_view origin) {
  const JsonValue* v = object.Find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->number() >= static_cast<double>(lo)) ||
      !(v->number() <= static_cast<double>(hi)) || v->number() != std::floor(v->number())) {
    Fail(origin, Concat(where, "\"", key, "\" must be an integer in [", lo, ", ", hi, "]"));
  }
  return static_cast<int64_t>(v->number());
}

std::vector<float> FloatArray(const JsonValue& layer, std::string_view key, std::string_view where,
                              std::string_view origin) {
  std::vector<float> out;
  const JsonValue* v = layer.Find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) Fail(origin, Concat(where, "\"", key, "\" is not an array"));
  for (const JsonValue& e : v->array()) {
    if (!e.is_number()) Fail(origin, Concat(where, "\"", key, "\" holds a non-number"));
    out.push_back(ToFloat(e, key, origin));
  }
  return out;
}

std::string FloatList(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + JsonFloat(v[i]);
  return s + "]";
}

}  // namespace

void ComputeKvScales(DType cache_dtype, KvScalesFile& file) {
  if (!IsFp8(cache_dtype)) {
    throw InvalidArgument(Concat("KV scales are for an fp8 cache; got ", DTypeName(cache_dtype)));
  }
  const float max = static_cast<float>(GetFInfo(cache_dtype).max);
  const int n = static_cast<int>(file.layers.size());
  auto scale_of = [&](float amax, const char* name, int layer) {
    if (!std::isfinite(amax) || amax < 0) {
      throw InvalidArgument(Concat(name, "=", amax, " of layer ", layer,
                                   " must be finite and >= 0 (non-finite activations?)"));
    }
    // A layer that only ever produced zeros can use any scale; 1 is the uncalibrated one.
    return amax > 0 ? amax / max : 1.0f;
  };
  for (int l = 0; l < n; ++l) {
    KvScalesLayer& layer = file.layers[l];
    layer.k_scale = scale_of(layer.k_amax, "k_amax", l);
    layer.v_scale = scale_of(layer.v_amax, "v_amax", l);
    // amax / max underflows to 0 only for amax below ~1e-43: caught here, not at load.
    ValidateKvScales({layer.k_scale, layer.v_scale}, l);
  }
  for (int l = 0; l < n; ++l) {
    KvScalesLayer& layer = file.layers[l];
    if (layer.kv_donor < 0) continue;
    if (layer.kv_donor >= l || file.layers[layer.kv_donor].kv_donor >= 0) {
      throw InvalidArgument(Concat("layer ", l, " has kv_donor=", layer.kv_donor,
                                   "; a donor must be an earlier layer that owns its cache"));
    }
    layer.k_scale = file.layers[layer.kv_donor].k_scale;
    layer.v_scale = file.layers[layer.kv_donor].v_scale;
  }
}

std::string FormatKvScalesFile(const KvScalesFile& f) {
  std::ostringstream os;
  os << "{\n  \"format\": " << JsonQuote(kKvScalesFormat)
     << ",\n  \"version\": " << kKvScalesVersion << ",\n  \"model\": " << JsonQuote(f.model)
     << ",\n  \"kv_cache_dtype\": " << JsonQuote(f.kv_cache_dtype) << ",\n  \"layers\": [";
  for (size_t l = 0; l < f.layers.size(); ++l) {
    const KvScalesLayer& x = f.layers[l];
    os << (l ? ",\n" : "\n") << "    {\"layer\": " << l << ", \"k_scale\": " << JsonFloat(x.k_scale)
       << ", \"v_scale\": " << JsonFloat(x.v_scale) << ", \"k_amax\": " << JsonFloat(x.k_amax)
       << ", \"v_amax\": " << JsonFloat(x.v_amax);
    if (x.kv_donor >= 0) os << ", \"kv_donor\": " << x.kv_donor;
    if (!x.k_amax_per_head.empty()) os << ", \"k_amax_per_head\": " << FloatList(x.k_amax_per_head);
    if (!x.v_amax_per_head.empty()) os << ", \"v_amax_per_head\": " << FloatList(x.v_amax_per_head);
    os << "}";
  }
  os << "\n  ],\n  \"calibration\": {\"text\": " << JsonQuote(f.calibration_text)
     << ", \"tokens\": " << f.calibration_tokens << ", \"ctx\": " << f.calibration_ctx
     << ", \"chunks\": " << f.calibration_chunks << "}\n}\n";
  return os.str();
}

KvScalesFile ParseKvScalesFile(std::string_view json, std::string_view origin) {
  JsonValue root;
  try {
    root = JsonValue::Parse(json);
  } catch (const InvalidArgument& e) {
    Fail(origin, e.what());
  }
  if (!root.is_object()) Fail(origin, "the top level is not a JSON object");
  using Kind = JsonValue::Kind;
  const std::string& format = Member(root, "format", Kind::kString, "", origin).string();
  if (format != kKvScalesFormat) {
    Fail(origin, Concat("\"format\" is \"", format, "\"; expected \"", kKvScalesFormat, "\""));
  }
  const JsonValue& version = Member(root, "version", Kind::kNumber, "", origin);
  if (version.number_text() != std::to_string(kKvScalesVersion)) {
    Fail(origin, Concat("\"version\" is ", version.number_text(), "; this rpa reads version ",
                        kKvScalesVersion));
  }
  KvScalesFile f;
  if (const JsonValue* model = root.Find("model"); model && model->is_string()) {
    f.model = model->string();
  }
  f.kv_cache_dtype = Member(root, "kv_cache_dtype", Kind::kString, "", origin).string();
  try {
    ParseKvCacheDtype(f.kv_cache_dtype, DType::kFloat32);
  } catch (const InvalidArgument& e) {
    Fail(origin, e.what());
  }
  const JsonValue& layers = Member(root, "layers", Kind::kArray, "", origin);
  if (layers.array().empty()) Fail(origin, "\"layers\" is empty");
  for (size_t l = 0; l < layers.array().size(); ++l) {
    const JsonValue& entry = layers.array()[l];
    const std::string where = Concat("layers[", l, "] ");
    if (!entry.is_object()) Fail(origin, Concat(where, "is not an object"));
    KvScalesLayer x;
    x.k_scale = ToFloat(Member(entry, "k_scale", Kind::kNumber, where, origin),
                        Concat(where, "k_scale"), origin);
    x.v_scale = ToFloat(Member(entry, "v_scale", Kind::kNumber, where, origin),
                        Concat(where, "v_scale"), origin);
    try {
      ValidateKvScales({x.k_scale, x.v_scale}, static_cast<int>(l));
    } catch (const InvalidArgument& e) {
      Fail(origin, e.what());
    }
    if (const JsonValue* a = entry.Find("k_amax"); a && a->is_number()) {
      x.k_amax = ToFloat(*a, "k_amax", origin);
    }
    if (const JsonValue* a = entry.Find("v_amax"); a && a->is_number()) {
      x.v_amax = ToFloat(*a, "v_amax", origin);
    }
    x.kv_donor = static_cast<int32_t>(
        Integer(entry, "kv_donor", -1, static_cast<int64_t>(l) - 1, -1, where, origin));
    x.k_amax_per_head = FloatArray(entry, "k_amax_per_head", where, origin);
    x.v_amax_per_head = FloatArray(entry, "v_amax_per_head", where, origin);
    f.layers.push_back(std::move(x));
  }
  if (const JsonValue* c = root.Find("calibration"); c && c->is_object()) {
    if (const JsonValue* t = c->Find("text"); t && t->is_string()) f.calibration_text = t->string();
    constexpr int64_t kInt32Max = 2147483647;
    f.calibration_tokens = Integer(*c, "tokens", 0, int64_t{1} << 53, 0, "calibration ", origin);
    f.calibration_ctx =
        static_cast<int32_t>(Integer(*c, "ctx", 0, kInt32Max, 0, "calibration ", origin));
    f.calibration_chunks =
        static_cast<int32_t>(Integer(*c, "chunks", 0, kInt32Max, 0, "calibration ", origin));
  }
  return f;
}

KvScalesFile ReadKvScalesFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, "cannot be opened (missing or unreadable)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) Fail(path, "read error");
  return ParseKvScalesFile(text.str(), path);
}

void WriteKvScalesFile(const std::string& path, const KvScalesFile& file) {
  const std::string text = FormatKvScalesFile(file);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) Fail(path, "cannot be opened for writing");
  out << text;
  out.close();
  if (!out) Fail(path, "write error");
}

void ApplyKvScales(const KvScalesFile& file, std::string_view origin, KvCacheConfig& config) {
  const int n = static_cast<int>(file.layers.size());
  if (n != config.num_layers()) {
    Fail(origin, Concat("has ", n, " layers; the model has ", config.num_layers()));
  }
  const DType file_dtype = ParseKvCacheDtype(file.kv_cache_dtype, DType::kFloat32);
  if (!config.quantized()) {
    std::fprintf(stderr,
                 "warning: kv scales file '%.*s' has no effect: the KV cache is %s, not fp8\n",
                 static_cast<int>(origin.size()), origin.data(),
                 std::string(DTypeName(config.dtype())).c_str());
  } else if (file_dtype != config.dtype()) {
    std::fprintf(stderr,
                 "warning: kv scales file '%.*s' was calibrated for %s (kv_cache_dtype %s); "
                 "this run's cache is %s: the scales map amax to the other format's max\n",
                 static_cast<int>(origin.size()), origin.data(),
                 std::string(DTypeName(file_dtype)).c_str(), file.kv_cache_dtype.c_str(),
                 std::string(DTypeName(config.dtype())).c_str());
  }
  for (int l = 0; l < n; ++l) {
    try {
      config.SetScales(l, {file.layers[l].k_scale, file.layers[l].v_scale});
    } catch (const InvalidArgument& e) {
      Fail(origin, e.what());
    }
  }
}

void ApplyKvScalesFile(const std::string& path, KvCacheConfig& config) {
  ApplyKvScales(ReadKvScalesFile(path), path, config);
}

}  // namespace rpa::cli
