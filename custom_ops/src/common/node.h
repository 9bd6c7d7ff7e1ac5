// What a node fixes at session creation (attributes, element types) and the spec's rules over
// it, checked in the same order as quantgraph.reference so the first broken rule is the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ort_api.h"
#include "common/spec.h"

namespace qg {

struct NodeConfig {
  OpKind kind = OpKind::kQuantize;
  std::string node;  // node name, for messages
  std::string qtype = spec::kDefaultQtype;
  bool per_channel = false;
  bool per_group = false;
  int64_t axis = spec::kDefaultAxis;
  // per_group ops (DynamicDequantize): the group_shape attribute.
  bool has_group_shape = false;
  std::vector<int64_t> group_shape;
  int64_t output_dtype = spec::kDefaultOutputDtype;
  // Static ops: the scales / zps attributes.
  bool has_scales_attr = false;
  std::vector<float> scales_attr;
  bool has_zps_attr = false;
  std::vector<int64_t> zps_attr;
  // Element types (ONNX enums) of the node's inputs; 0 where an optional input is absent.
  int src = 0;
  int scales = 0;
  int zps = 0;
  int dst = 0;  // the spec's dst type of this node (ResolveDst)
  // Dynamic ops: scales / zps inputs that are constant initializers, read once here so that a
  // call fetches only src (a custom op's per-call cost is what onnxruntime's own
  // QuantizeLinear does not pay). data == nullptr: read per call.
  struct ConstantInput {
    const void* data = nullptr;
    std::vector<int64_t> shape;
    size_t count = 0;
  };
  ConstantInput const_scales;
  ConstantInput const_zps;
  bool const_scales_checked = false;  // quantize ops: check_scale_values passed on them
};

// The dst type the spec gives a node (quantgraph.spec.dst_type without a declared type), from
// the generated rule data: for dynamic dequantize ops the scales type if one of
// spec::kDstFromScales, else spec::kDequantizedDst (static dequantize ops always); for quantize
// ops output_dtype, or when it is 0 the zps type if one of spec::kDstFromZps (dynamic ops),
// else spec::kDefaultQuantizedDst.
int ResolveDst(OpKind kind, int64_t output_dtype, int zps_type, int scales_type);

// Reads attributes and input element types (throws SpecError / Ort::Exception).
NodeConfig ReadNodeConfig(OpKind kind, const OrtApi& api, const OrtKernelInfo* info);

// Every rule that the node alone decides (attributes, types, qtype; for static per_tensor
// nodes also counts and scale values), stopping at the first rule that needs run-time shapes.
void CheckNode(const NodeConfig& cfg);

struct Dims {
  const int64_t* data;
  size_t rank;
  int64_t operator[](size_t i) const { return data[i]; }
};

// check_shapes of the spec for one call; returns the resolved axis, or -1 for per_tensor and
// per_group. zps == nullptr: no zero points.
int64_t CheckShapes(const NodeConfig& cfg, Dims src, Dims scales, const Dims* zps);

// check_scale_values: quantize ops reject zero, infinite and NaN scales.
void CheckScaleValues(const NodeConfig& cfg, const float* scales, size_t count);

// One call's inputs, after every rule over them (shapes, then scale values): what both kernel
// libraries read from onnxruntime before computing.
struct CallInputs {
  std::vector<int64_t> dims;  // src's
  size_t elements = 0;
  const void* src = nullptr;
  int64_t axis = -1;  // resolved per_channel axis; -1 for per_tensor and per_group
  // Dynamic ops: the scales (of type cfg.scales) and zps inputs (zps nullptr when absent), with
  // their shapes. Static ops: the attributes' (scales f32; zps nullptr, the kernel keeps its own
  // copy of the s64 list), shapes {count}.
  const void* scales = nullptr;
  size_t scale_count = 0;
  std::vector<int64_t> scales_shape;
  const void* zps = nullptr;
  std::vector<int64_t> zps_shape;
};

// The parameters of a per_tensor node that never change between calls (a static op's
// attributes; a dynamic op's scales and zps that are constant initializers), when they pass
// every rule that does not need src: a call then reads src alone. Pointers live as
// long as ``cfg``; zps nullptr: none (a static op's zps attribute stays in cfg.zps_attr).
struct FixedParams {
  const void* scales = nullptr;
  const void* zps = nullptr;
};
bool FixedPerTensor(const NodeConfig& cfg, FixedParams& out);

// Reads and checks one call of the node into ``call`` (throws SpecError with the spec's
// message). Its vectors keep their capacity: a kernel reusing one per thread allocates nothing.
void ReadCall(const NodeConfig& cfg, Ort::KernelContext& ctx, CallInputs& call);
inline CallInputs ReadCall(const NodeConfig& cfg, Ort::KernelContext& ctx) {
  CallInputs call;
  ReadCall(cfg, ctx, call);
  return call;
}

}  // namespace qg
