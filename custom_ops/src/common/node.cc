#include "common/node.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

namespace qg {
namespace {

// ---- reading the kernel info -------------------------------------------------------------

struct StatusGuard {
  const OrtApi& api;
  OrtStatus* status;
  ~StatusGuard() {
    if (status != nullptr) api.ReleaseStatus(status);
  }
  bool ok() const { return status == nullptr; }
};

std::optional<int64_t> GetInt(const OrtApi& api, const OrtKernelInfo* info, const char* name) {
  int64_t value = 0;
  StatusGuard s{api, api.KernelInfoGetAttribute_int64(info, name, &value)};
  if (!s.ok()) return std::nullopt;
  return value;
}

std::optional<std::string> GetString(const OrtApi& api, const OrtKernelInfo* info,
                                     const char* name) {
  size_t size = 0;
  {
    StatusGuard s{api, api.KernelInfoGetAttribute_string(info, name, nullptr, &size)};
    if (!s.ok()) return std::nullopt;
  }
  std::string buffer(size + 1, '\0');
  size_t capacity = buffer.size();
  StatusGuard s{api, api.KernelInfoGetAttribute_string(info, name, buffer.data(), &capacity)};
  if (!s.ok()) return std::nullopt;
  // The reported size may or may not count a NUL: trim at the first one.
  buffer.resize(strnlen(buffer.data(), buffer.size()));
  return buffer;
}

std::optional<std::vector<float>> GetFloats(const OrtApi& api, const OrtKernelInfo* info,
                                            const char* name) {
  size_t size = 0;
  {
    StatusGuard s{api, api.KernelInfoGetAttributeArray_float(info, name, nullptr, &size)};
    if (!s.ok()) return std::nullopt;
  }
  std::vector<float> values(size);
  if (size == 0) return values;
  StatusGuard s{api, api.KernelInfoGetAttributeArray_float(info, name, values.data(), &size)};
  if (!s.ok()) return std::nullopt;
  values.resize(size);
  return values;
}

std::optional<std::vector<int64_t>> GetInts(const OrtApi& api, const OrtKernelInfo* info,
                                            const char* name) {
  size_t size = 0;
  {
    StatusGuard s{api, api.KernelInfoGetAttributeArray_int64(info, name, nullptr, &size)};
    if (!s.ok()) return std::nullopt;
  }
  std::vector<int64_t> values(size);
  if (size == 0) return values;
  StatusGuard s{api, api.KernelInfoGetAttributeArray_int64(info, name, values.data(), &size)};
  if (!s.ok()) return std::nullopt;
  values.resize(size);
  return values;
}

// True when the node has the attribute as a float, an int or a string.
bool HasScalar(const OrtApi& api, const OrtKernelInfo* info, const char* name) {
  float f = 0;
  StatusGuard s{api, api.KernelInfoGetAttribute_float(info, name, &f)};
  return s.ok() || GetInt(api, info, name) || GetString(api, info, name);
}

// True when the node has the attribute under any of the kinds these ops use.
bool HasAttribute(const OrtApi& api, const OrtKernelInfo* info, const char* name) {
  return HasScalar(api, info, name) || GetFloats(api, info, name) || GetInts(api, info, name);
}

[[noreturn]] void ThrowWrongKind(OpKind kind, const std::string& node, const char* name) {
  ThrowRule(kind, node, "attribute-kind", {{"name", name}, {"kind", AttributeKind(name)}});
}

// A list attribute of kind floats (T = float) or ints (T = int64_t): nullopt when the node does
// not have it; the attribute-kind rule when it has it under another kind. onnxruntime's array
// getters do not check the kind (any attribute reads as an empty list of either), so an empty
// list is of another kind when the attribute reads as a scalar or as a non-empty list of the
// other list kind. (Other lists, strings or empty ones, cannot be told apart through the C API:
// they read as an empty list.)
template <typename T>
std::optional<std::vector<T>> ReadList(const OrtApi& api, const OrtKernelInfo* info, OpKind kind,
                                       const std::string& node, const char* name) {
  constexpr bool kFloats = std::is_same_v<T, float>;
  std::optional<std::vector<T>> values;
  if constexpr (kFloats) {
    values = GetFloats(api, info, name);
  } else {
    values = GetInts(api, info, name);
  }
  if (!values) {
    if (HasAttribute(api, info, name)) ThrowWrongKind(kind, node, name);
    return values;
  }
  if (values->empty()) {
    bool other = HasScalar(api, info, name);
    if constexpr (kFloats) {
      const auto ints = GetInts(api, info, name);
      other = other || (ints && !ints->empty());
    } else {
      const auto floats = GetFloats(api, info, name);
      other = other || (floats && !floats->empty());
    }
    if (other) ThrowWrongKind(kind, node, name);
  }
  return values;
}

int InputElementType(const OrtApi& api, const OrtKernelInfo* info, size_t index) {
  OrtTypeInfo* type_info = nullptr;
  StatusGuard s{api, api.KernelInfo_GetInputTypeInfo(info, index, &type_info)};
  if (!s.ok() || type_info == nullptr) return 0;  // an omitted optional input has no type
  std::unique_ptr<OrtTypeInfo, decltype(api.ReleaseTypeInfo)> owner(type_info, api.ReleaseTypeInfo);
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;
  StatusGuard c{api, api.CastTypeInfoToTensorInfo(type_info, &tensor)};
  if (!c.ok() || tensor == nullptr) return 0;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  StatusGuard t{api, api.GetTensorElementType(tensor, &type)};
  return t.ok() ? static_cast<int>(type) : 0;
}

std::string NodeName(const OrtApi& api, const OrtKernelInfo* info) {
  size_t size = 0;
  {
    StatusGuard s{api, api.KernelInfo_GetNodeName(info, nullptr, &size)};
    if (!s.ok()) return "";
  }
  std::string name(size + 1, '\0');
  size_t capacity = name.size();
  StatusGuard s{api, api.KernelInfo_GetNodeName(info, name.data(), &capacity)};
  if (!s.ok()) return "";
  name.resize(strnlen(name.data(), name.size()));
  return name;
}

// ---- rules -------------------------------------------------------------------------------

bool Contains(const std::vector<int>& v, int t) {
  for (int x : v) {
    if (x == t) return true;
  }
  return false;
}

bool IsFloat8(int type) {
  const auto* d = FindDType(type);
  return d != nullptr && d->is_float8;
}

void CheckOneType(const NodeConfig& cfg, const char* rule, int type,
                  const std::vector<int>& allowed) {
  if (!Contains(allowed, type)) {
    ThrowRule(cfg.kind, cfg.node, rule,
              {{"got", TypeName(type)}, {"allowed", JoinTypeNames(allowed)}});
  }
}

// check_static_attributes of the spec.
void CheckStaticAttributes(const NodeConfig& cfg) {
  if (!cfg.has_scales_attr)
    ThrowRule(cfg.kind, cfg.node, "missing-attribute", {{"name", "scales"}});
  if (!cfg.has_zps_attr) return;
  // Quantize checks its dst; Dequantize its src (a type outside the spec counts as s8).
  const int checked = IsQuantize(cfg.kind) ? cfg.dst : (FindDType(cfg.src) ? cfg.src : spec::kS8);
  if (IsFloat8(checked)) ThrowRule(cfg.kind, cfg.node, "f8-zps", {{"dtype", TypeName(checked)}});
  const auto* s32 = FindDType(spec::kS32);
  for (size_t i = 0; i < cfg.zps_attr.size(); ++i) {
    const int64_t v = cfg.zps_attr[i];
    if (v < s32->qmin || v > s32->qmax) {
      ThrowRule(cfg.kind, cfg.node, "zps-value",
                {{"index", PyInt(static_cast<int64_t>(i))}, {"value", PyInt(v)}});
    }
  }
}

// check_types of the spec.
void CheckTypes(const NodeConfig& cfg) {
  CheckOneType(cfg, "src-type", cfg.src, SrcTypes(cfg.kind));
  CheckOneType(cfg, "dst-type", cfg.dst, DstTypes(cfg.kind, cfg.src));
  if (IsStatic(cfg.kind)) return;
  if (cfg.scales == 0) ThrowRule(cfg.kind, cfg.node, "missing-input", {{"name", "scales"}});
  CheckOneType(cfg, "scales-type", cfg.scales, ScalesTypes(cfg.kind, cfg.src, cfg.dst));
  if (cfg.zps != 0) CheckOneType(cfg, "zps-type", cfg.zps, ZpsTypes(cfg.kind, cfg.src, cfg.dst));
}

bool HasZps(const NodeConfig& cfg) { return IsStatic(cfg.kind) ? cfg.has_zps_attr : cfg.zps != 0; }

// _check_groups of the spec: group_shape (given: CheckNode) has one positive entry per src
// dim, scales src's rank, src.dims[d] == scales.dims[d] * group_shape[d], zps scales' shape.
void CheckGroups(const NodeConfig& cfg, Dims src, Dims scales, const Dims* zps) {
  const auto rank = static_cast<int64_t>(src.rank);
  const auto& groups = cfg.group_shape;
  if (groups.size() != src.rank) {
    ThrowRule(cfg.kind, cfg.node, "group-shape-rank",
              {{"rank", PyInt(rank)}, {"count", PyInt(static_cast<int64_t>(groups.size()))}});
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] < 1) {
      ThrowRule(cfg.kind, cfg.node, "group-shape-value",
                {{"index", PyInt(static_cast<int64_t>(i))}, {"value", PyInt(groups[i])}});
    }
  }
  if (scales.rank != src.rank) {
    ThrowRule(cfg.kind, cfg.node, "group-scales-rank",
              {{"rank", PyInt(rank)}, {"got", PyInt(static_cast<int64_t>(scales.rank))}});
  }
  for (size_t d = 0; d < src.rank; ++d) {
    int64_t product = 0;
    const bool overflow = __builtin_mul_overflow(scales[d], groups[d], &product);
    if (overflow || product != src[d]) {
      ThrowRule(cfg.kind, cfg.node, "group-divides",
                {{"dim", PyInt(static_cast<int64_t>(d))},
                 {"src", PyInt(src[d])},
                 {"scales", PyInt(scales[d])},
                 {"group", PyInt(groups[d])}});
    }
  }
  if (zps != nullptr) {
    bool same = zps->rank == scales.rank;
    for (size_t d = 0; same && d < scales.rank; ++d) same = (*zps)[d] == scales[d];
    if (!same) {
      ThrowRule(cfg.kind, cfg.node, "group-zps-shape",
                {{"expected", PyIntList(scales.data, scales.rank)},
                 {"got", PyIntList(zps->data, zps->rank)}});
    }
  }
}

// An input that is a constant initializer (onnxruntime keeps it for the session's life), or an
// empty ConstantInput.
NodeConfig::ConstantInput ReadConstantInput(const OrtApi& api, const OrtKernelInfo* info,
                                            size_t index) {
  NodeConfig::ConstantInput found;
  int is_constant = 0;
  const OrtValue* value = nullptr;
  StatusGuard s{api, api.KernelInfoGetConstantInput_tensor(info, index, &is_constant, &value)};
  if (!s.ok() || is_constant == 0 || value == nullptr) return found;
  const Ort::ConstValue tensor{value};
  const auto shape = tensor.GetTensorTypeAndShapeInfo();
  found.shape = shape.GetShape();
  found.count = shape.GetElementCount();
  found.data = tensor.GetTensorRawData();
  return found;
}

}  // namespace

int ResolveDst(OpKind kind, int64_t output_dtype, int zps_type, int scales_type) {
  if (!IsQuantize(kind)) {
    if (!IsStatic(kind)) {
      for (int t : spec::kDstFromScales) {
        if (scales_type == t) return scales_type;
      }
    }
    return spec::kDequantizedDst;
  }
  if (output_dtype != 0) return static_cast<int>(output_dtype);
  if (!IsStatic(kind)) {
    for (int t : spec::kDstFromZps) {
      if (zps_type == t) return zps_type;
    }
  }
  return spec::kDefaultQuantizedDst;
}

NodeConfig ReadNodeConfig(OpKind kind, const OrtApi& api, const OrtKernelInfo* info) {
  NodeConfig cfg;
  cfg.kind = kind;
  cfg.node = NodeName(api, info);

  if (auto qtype = GetString(api, info, "qtype")) {
    cfg.qtype = *qtype;
  } else if (HasAttribute(api, info, "qtype")) {
    ThrowWrongKind(kind, cfg.node, "qtype");
  }
  cfg.per_channel = cfg.qtype == spec::kPerChannel;
  cfg.per_group = cfg.qtype == spec::kPerGroup;
  if (auto axis = GetInt(api, info, "axis")) {
    cfg.axis = *axis;
  } else if (HasAttribute(api, info, "axis")) {
    ThrowWrongKind(kind, cfg.node, "axis");
  }
  if (OpHasAttribute(kind, "group_shape")) {
    if (auto groups = ReadList<int64_t>(api, info, kind, cfg.node, "group_shape")) {
      cfg.has_group_shape = true;
      cfg.group_shape = std::move(*groups);
    }
  }
  if (IsQuantize(kind)) {
    if (auto od = GetInt(api, info, "output_dtype")) {
      cfg.output_dtype = *od;
    } else if (HasAttribute(api, info, "output_dtype")) {
      ThrowWrongKind(kind, cfg.node, "output_dtype");
    }
  }
  if (IsStatic(kind)) {
    if (auto scales = ReadList<float>(api, info, kind, cfg.node, "scales")) {
      cfg.has_scales_attr = true;
      cfg.scales_attr = std::move(*scales);
    }
    if (auto zps = ReadList<int64_t>(api, info, kind, cfg.node, "zps")) {
      cfg.has_zps_attr = true;
      cfg.zps_attr = std::move(*zps);
    }
  }

  size_t inputs = 0;
  Ort::ThrowOnError(api.KernelInfo_GetInputCount(info, &inputs));
  cfg.src = inputs > 0 ? InputElementType(api, info, 0) : 0;
  if (!IsStatic(kind)) {
    cfg.scales = inputs > 1 ? InputElementType(api, info, 1) : 0;
    cfg.zps = inputs > 2 ? InputElementType(api, info, 2) : 0;
  }
  cfg.dst = ResolveDst(kind, cfg.output_dtype, cfg.zps, cfg.scales);
  if (!IsStatic(kind)) {
    if (inputs > 1) cfg.const_scales = ReadConstantInput(api, info, 1);
    if (inputs > 2) cfg.const_zps = ReadConstantInput(api, info, 2);
    if (cfg.const_scales.data != nullptr && IsQuantize(kind) && cfg.scales == spec::kF32) {
      try {  // a bad scale is still reported by the call, after the shape rules
        CheckScaleValues(cfg, static_cast<const float*>(cfg.const_scales.data),
                         cfg.const_scales.count);
        cfg.const_scales_checked = true;
      } catch (...) {
      }
    }
  }
  return cfg;
}

void CheckNode(const NodeConfig& cfg) {
  if (IsStatic(cfg.kind)) CheckStaticAttributes(cfg);
  CheckTypes(cfg);
  if (HasZps(cfg)) {
    const int float8 = IsFloat8(cfg.dst) ? cfg.dst : cfg.src;
    if (IsFloat8(float8)) ThrowRule(cfg.kind, cfg.node, "f8-zps", {{"dtype", TypeName(float8)}});
  }
  // check_shapes starts with qtype, which needs nothing else, and per_group's first rule
  // (group_shape given) needs nothing else either.
  if (!HasQtype(cfg.kind, cfg.qtype)) {
    ThrowRule(cfg.kind, cfg.node, "qtype",
              {{"allowed", JoinQtypes(cfg.kind)}, {"qtype", cfg.qtype}});
  }
  if (cfg.per_group && !cfg.has_group_shape) {
    ThrowRule(cfg.kind, cfg.node, "missing-attribute", {{"name", "group_shape"}});
  }
  // A static per_tensor node has every remaining input of check_shapes and check_scale_values.
  if (IsStatic(cfg.kind) && !cfg.per_channel) {
    const int64_t count = static_cast<int64_t>(cfg.scales_attr.size());
    const int64_t zcount = static_cast<int64_t>(cfg.zps_attr.size());
    const Dims scales{&count, 1};
    const Dims zps{&zcount, 1};
    CheckShapes(cfg, Dims{nullptr, 0}, scales, cfg.has_zps_attr ? &zps : nullptr);
    CheckScaleValues(cfg, cfg.scales_attr.data(), cfg.scales_attr.size());
  }
}

int64_t CheckShapes(const NodeConfig& cfg, Dims src, Dims scales, const Dims* zps) {
  // qtype was checked by CheckNode (the node cannot change it).
  if (cfg.per_group) {
    CheckGroups(cfg, src, scales, zps);
    return -1;
  }
  if (scales.rank != 1) {
    ThrowRule(cfg.kind, cfg.node, "scales-rank",
              {{"rank", PyInt(static_cast<int64_t>(scales.rank))}});
  }
  if (zps != nullptr && zps->rank != 1) {
    ThrowRule(cfg.kind, cfg.node, "zps-rank", {{"rank", PyInt(static_cast<int64_t>(zps->rank))}});
  }
  const int64_t count = scales[0];
  int64_t resolved = -1;
  if (!cfg.per_channel) {
    if (count != 1)
      ThrowRule(cfg.kind, cfg.node, "per-tensor-scale-count", {{"count", PyInt(count)}});
  } else {
    const auto rank = static_cast<int64_t>(src.rank);
    if (cfg.axis < -rank || cfg.axis >= rank) {
      ThrowRule(cfg.kind, cfg.node, "axis-range",
                {{"axis", PyInt(cfg.axis)},
                 {"low", PyInt(-rank)},
                 {"high", PyInt(rank - 1)},
                 {"rank", PyInt(rank)}});
    }
    resolved = cfg.axis < 0 ? cfg.axis + rank : cfg.axis;
    const int64_t expected = src[static_cast<size_t>(resolved)];
    if (count != expected) {
      ThrowRule(
          cfg.kind, cfg.node, "per-channel-scale-count",
          {{"axis", PyInt(cfg.axis)}, {"expected", PyInt(expected)}, {"count", PyInt(count)}});
    }
  }
  if (zps != nullptr && (*zps)[0] != count) {
    ThrowRule(cfg.kind, cfg.node, "zps-count",
              {{"expected", PyInt(count)}, {"count", PyInt((*zps)[0])}});
  }
  return resolved;
}

void CheckScaleValues(const NodeConfig& cfg, const float* scales, size_t count) {
  if (!IsQuantize(cfg.kind)) return;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(scales[i]) || scales[i] == 0.0f) {
      ThrowRule(cfg.kind, cfg.node, "scale-value",
                {{"index", PyInt(static_cast<int64_t>(i))}, {"value", PyFloat(scales[i])}});
    }
  }
}

namespace {

// A tensor's shape into ``shape`` (its capacity reused) and its element count. The count is
// the product of the dims rather than one more API call: a lone spec op's call is mostly this
// glue, and each call into onnxruntime touches code its own QuantizeLinear does not.
size_t ReadShape(const Ort::ConstValue& value, std::vector<int64_t>& shape) {
  const auto info = value.GetTensorTypeAndShapeInfo();
  shape.resize(info.GetDimensionsCount());
  info.GetDimensions(shape.data(), shape.size());
  size_t count = 1;
  for (const int64_t d : shape) count *= static_cast<size_t>(d);
  return count;
}

// A call's src: its data, its dims into ``dims`` and its element count. Its element type is
// the node's (cfg.src): onnxruntime fixes a node's input types when it creates the kernel, so
// a call does not read it again.
size_t ReadSrc(Ort::KernelContext& ctx, std::vector<int64_t>& dims, const void*& data) {
  const Ort::ConstValue src = ctx.GetInput(0);
  data = src.GetTensorRawData();
  return ReadShape(src, dims);
}

}  // namespace

bool FixedPerTensor(const NodeConfig& cfg, FixedParams& out) {
  if (cfg.per_channel || cfg.per_group) return false;
  if (IsStatic(cfg.kind)) {  // CheckNode has checked a static per_tensor node whole
    out = FixedParams{cfg.scales_attr.data(), nullptr};
    return true;
  }
  const bool zps_fixed = cfg.zps == 0 || cfg.const_zps.data != nullptr;
  if (cfg.const_scales.data == nullptr || !zps_fixed) return false;
  if (IsQuantize(cfg.kind) && !cfg.const_scales_checked) return false;
  const auto& scales = cfg.const_scales.shape;
  const auto& zps = cfg.const_zps.shape;
  const Dims zps_dims{zps.data(), zps.size()};
  try {  // per_tensor's shape rules do not read src
    CheckShapes(cfg, Dims{nullptr, 0}, Dims{scales.data(), scales.size()},
                cfg.zps != 0 ? &zps_dims : nullptr);
  } catch (const SpecError&) {
    return false;  // each call reports it
  }
  out = FixedParams{cfg.const_scales.data, cfg.zps != 0 ? cfg.const_zps.data : nullptr};
  return true;
}

void ReadCall(const NodeConfig& cfg, Ort::KernelContext& ctx, CallInputs& call) {
  call.elements = ReadSrc(ctx, call.dims, call.src);
  call.scales = call.zps = nullptr;
  call.scale_count = 0;
  const Dims src_dims{call.dims.data(), call.dims.size()};
  if (IsStatic(cfg.kind)) {
    call.scales_shape.assign(1, static_cast<int64_t>(cfg.scales_attr.size()));
    call.zps_shape.assign(1, static_cast<int64_t>(cfg.zps_attr.size()));
    const Dims zps{call.zps_shape.data(), 1};
    call.axis = CheckShapes(cfg, src_dims, Dims{call.scales_shape.data(), 1},
                            cfg.has_zps_attr ? &zps : nullptr);
    if (!cfg.has_zps_attr) call.zps_shape.clear();
    // A bad static scale is reported after the shape rules, as the reference does.
    CheckScaleValues(cfg, cfg.scales_attr.data(), cfg.scales_attr.size());
    call.scales = cfg.scales_attr.data();
    call.scale_count = cfg.scales_attr.size();
    return;
  }
  if (cfg.const_scales.data != nullptr) {
    call.scales = cfg.const_scales.data;
    call.scales_shape = cfg.const_scales.shape;
    call.scale_count = cfg.const_scales.count;
  } else {
    const Ort::ConstValue scales = ctx.GetInput(1);
    if (scales == nullptr) ThrowRule(cfg.kind, cfg.node, "missing-input", {{"name", "scales"}});
    call.scale_count = ReadShape(scales, call.scales_shape);
    call.scales = scales.GetTensorRawData();  // of type cfg.scales (checked by CheckNode)
  }
  bool has_zps = false;
  if (cfg.const_zps.data != nullptr) {
    has_zps = true;
    call.zps = cfg.const_zps.data;
    call.zps_shape = cfg.const_zps.shape;
  } else if (ctx.GetInputCount() > 2) {
    const Ort::ConstValue zps = ctx.GetInput(2);
    if (zps != nullptr) {
      has_zps = true;
      ReadShape(zps, call.zps_shape);
      call.zps = zps.GetTensorRawData();
    }
  }
  if (!has_zps) call.zps_shape.clear();
  const Dims zps_dims{call.zps_shape.data(), call.zps_shape.size()};
  call.axis = CheckShapes(cfg, src_dims, Dims{call.scales_shape.data(), call.scales_shape.size()},
                          has_zps ? &zps_dims : nullptr);
  if (IsQuantize(cfg.kind) && !cfg.const_scales_checked) {
    CheckScaleValues(cfg, static_cast<const float*>(call.scales), call.scale_count);
  }
}

}  // namespace qg
