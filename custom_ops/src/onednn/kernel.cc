#include "onednn/kernel.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/node.h"
#include "onednn/partition.h"

namespace qg::onednn {
namespace {

dnnl_graph_op_kind_t DnnlOp(OpKind kind) {
  switch (kind) {
    case OpKind::kQuantize:
      return dnnl_graph_op_quantize;
    case OpKind::kDequantize:
      return dnnl_graph_op_dequantize;
    case OpKind::kDynamicQuantize:
      return dnnl_graph_op_dynamic_quantize;
    case OpKind::kDynamicDequantize:
      return dnnl_graph_op_dynamic_dequantize;
  }
  throw std::logic_error("unknown op kind");
}

// ONNX element type -> oneDNN data type (the spec's types all have one; 4-bit types are packed
// alike, two per byte with the first element in the low nibble).
dnnl_data_type_t DnnlType(int onnx) {
  switch (onnx) {
    case spec::kF32:
      return dnnl_f32;
    case spec::kF16:
      return dnnl_f16;
    case spec::kBF16:
      return dnnl_bf16;
    case spec::kS8:
      return dnnl_s8;
    case spec::kU8:
      return dnnl_u8;
    case spec::kS32:
      return dnnl_s32;
    case spec::kF8E4M3:
      return kDnnlF8E4M3;
    case spec::kF8E5M2:
      return kDnnlF8E5M2;
    case spec::kS4:
      return kDnnlS4;
    case spec::kU4:
      return kDnnlU4;
  }
  throw std::logic_error("no oneDNN data type for " + TypeName(onnx));
}

// The shape onnxruntime knows for input `index` at session creation; nullopt unless every dim
// is known (rank 0 included: it is also how an unknown shape reads).
std::optional<std::vector<int64_t>> StaticShape(const OrtApi& api, const OrtKernelInfo* info,
                                                size_t index) {
  OrtTypeInfo* type_info = nullptr;
  if (OrtStatus* s = api.KernelInfo_GetInputTypeInfo(info, index, &type_info)) {
    api.ReleaseStatus(s);
    return std::nullopt;
  }
  if (type_info == nullptr) return std::nullopt;
  std::unique_ptr<OrtTypeInfo, decltype(api.ReleaseTypeInfo)> owner(type_info, api.ReleaseTypeInfo);
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;
  size_t rank = 0;
  if (OrtStatus* s = api.CastTypeInfoToTensorInfo(type_info, &tensor)) {
    api.ReleaseStatus(s);
    return std::nullopt;
  }
  if (tensor == nullptr) return std::nullopt;
  if (OrtStatus* s = api.GetDimensionsCount(tensor, &rank)) {
    api.ReleaseStatus(s);
    return std::nullopt;
  }
  if (rank == 0) return std::nullopt;
  std::vector<int64_t> dims(rank);
  if (OrtStatus* s = api.GetDimensions(tensor, dims.data(), rank)) {
    api.ReleaseStatus(s);
    return std::nullopt;
  }
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
  }
  return dims;
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Bytes of `count` elements of a spec type (4-bit types packed two to a byte).
size_t Bytes(int onnx, int64_t count) {
  const spec::DType* t = FindDType(onnx);
  const int64_t bits = t != nullptr ? t->bits : 32;
  return static_cast<size_t>((count * bits + 7) / 8);
}

bool AllZero(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// A dynamic op's zps input when onnxruntime holds it as a constant (an initializer): whether
// every zero point is 0. nullopt when the input is absent or not constant.
std::optional<bool> ConstantZpsAreZero(const OrtApi& api, const OrtKernelInfo* info, int type) {
  int is_constant = 0;
  const OrtValue* value = nullptr;
  if (OrtStatus* s = api.KernelInfoGetConstantInput_tensor(info, 2, &is_constant, &value)) {
    api.ReleaseStatus(s);
    return std::nullopt;
  }
  if (!is_constant || value == nullptr) return std::nullopt;
  const Ort::ConstValue zps(value);
  const size_t count = zps.GetTensorTypeAndShapeInfo().GetElementCount();
  return AllZero(zps.GetTensorRawData(), Bytes(type, static_cast<int64_t>(count)));
}

// Execution failures found at session creation cost one run on zeros: up to this many elements.
constexpr int64_t kTrialLimit = int64_t{1} << 24;

class Kernel final : public OpKernel {
 public:
  Kernel(OpKind kind, const OrtApi& api, const OrtKernelInfo* info)
      : cfg_(ReadNodeConfig(kind, api, info)) {
    CheckNode(cfg_);
    // As in the native library: the output buffer must have the dst type oneDNN writes.
    const int output = OutputElementType(api, info);
    if (output != 0 && output != cfg_.dst) {
      ThrowRule(kind, cfg_.node, "output-type",
                {{"got", TypeName(output)}, {"dst", TypeName(cfg_.dst)}});
    }
    // Zero points that are all 0 mean what absent ones mean (the spec's default), and oneDNN's
    // CPU engine refuses per_channel zero points even when they are 0 (every symmetric weight of
    // a QDQ model has them): they go to oneDNN as absent. Static ops know theirs now; a dynamic
    // op's constant ones are read now, the others at every call.
    static_zps_ = IsStatic(kind) && cfg_.has_zps_attr &&
                  !std::all_of(cfg_.zps_attr.begin(), cfg_.zps_attr.end(),
                               [](int64_t z) { return z == 0; });
    if (!IsStatic(kind) && cfg_.zps != 0) constant_zero_zps_ = ConstantZpsAreZero(api, info, cfg_.zps);
    // oneDNN before v3.4 requires the zps attribute of static ops; the spec's default (zeros)
    // is then given explicitly. (Not for float8, which takes no zps; v3.2 has no float8.)
    const bool float8 = FindDType(cfg_.src)->is_float8 || FindDType(cfg_.dst)->is_float8;
    zero_zps_ = IsStatic(kind) && !static_zps_ && !float8 && !LoadedAtLeast(3, 4);
    if (IsStatic(kind)) {
      scales_count_ = static_cast<int64_t>(cfg_.scales_attr.size());
      zps_count_ = static_cast<int64_t>(cfg_.zps_attr.size());
      try {  // as the native library: a bad static scale is reported after the shape rules
        CheckScaleValues(cfg_, cfg_.scales_attr.data(), cfg_.scales_attr.size());
      } catch (const SpecError&) {
        static_scales_ok_ = false;
      }
      RefuseCollapsingZps();
    }
    if (kind == OpKind::kDynamicDequantize && cfg_.qtype == spec::kPerTensor &&
        cfg_.scales != spec::kF32) {
      ProbePerTensorScale();
    }
    CompileIfStatic(api, info);
  }

  void Compute(OrtKernelContext* raw) const override {
    Ort::KernelContext ctx(raw);
    const CallInputs call = ReadCall(cfg_, ctx);
    std::vector<int64_t> zps_shape;
    bool with_zps = static_zps_;
    const void* inputs[3] = {call.src, nullptr, nullptr};
    if (!IsStatic(cfg_.kind)) {
      inputs[1] = call.scales;
      if (call.zps != nullptr) {
        const bool zero = constant_zero_zps_.has_value()
                              ? *constant_zero_zps_
                              : AllZero(call.zps, Bytes(cfg_.zps, Product(call.zps_shape)));
        if (!zero) {  // all-zero ones go as absent (see the constructor)
          inputs[2] = call.zps;
          zps_shape = call.zps_shape;
          with_zps = true;
        }
      }
    }
    Ort::UnownedValue dst = ctx.GetOutput(0, call.dims.data(), call.dims.size());  // cfg_.dst
    if (call.elements == 0) return;  // nothing for oneDNN to do
    const std::vector<int64_t> scales_shape =
        IsStatic(cfg_.kind) ? std::vector<int64_t>{static_cast<int64_t>(call.scale_count)}
                            : call.scales_shape;
    const auto op = Compiled(call.dims, scales_shape, zps_shape, with_zps);
    try {
      op->Execute(inputs, dst.GetTensorMutableRawData());
    } catch (const DnnlError& e) {
      Refuse(e, with_zps);
    }
  }

 private:
  // v3.2 computes a static per_channel op with the first zero point for every channel (its
  // runtime zero points are one value: measured, Dequantize u8 [10, 20, 30, 40] of shape
  // [1, 2, 2], axis 1, zps [5, 10] gives [5, 15, 25, 35]); v3.13 refuses non-zero ones. Zero
  // points that differ per channel would be silently wrong, so they are refused here.
  void RefuseCollapsingZps() const {
    if (!cfg_.per_channel || !cfg_.has_zps_attr) return;
    const auto& zps = cfg_.zps_attr;
    for (size_t i = 1; i < zps.size(); ++i) {
      if (zps[i] == zps[0]) continue;
      throw Ort::Exception(Prefix() + "refused " + Row(true) + " (zps[0] = " + PyInt(zps[0]) + ", zps[" +
                               PyInt(static_cast<int64_t>(i)) + "] = " + PyInt(zps[i]) +
                               "): oneDNN applies zps[0] to every channel of a per_channel " +
                               OpName(cfg_.kind) +
                               " (measured on v3.2: silently wrong), so zero points that differ "
                               "per channel cannot run on oneDNN",
                           ORT_NOT_IMPLEMENTED);
    }
  }

  // v3.13 reads a per_tensor f16/bf16 scale of DynamicDequantize as f32 (four bytes: the
  // scale and whatever follows it; measured, f16 1.0 followed by 0x3f80 scales by 1.00183),
  // silently wrong where per_channel and per_group are right. A probe on two elements finds it
  // in whichever oneDNN is loaded: scale 1.0 followed by other bytes must give src unchanged.
  void ProbePerTensorScale() const {
    OpDesc d = Describe({2}, {1}, {1}, cfg_.zps != 0);
    std::shared_ptr<const CompiledOp> op;
    try {
      op = CompiledOp::Compile(d);
    } catch (const DnnlError&) {
      return;  // refused anyway: the node's own compilation reports it
    }
    const uint16_t one = cfg_.scales == spec::kF16 ? 0x3C00 : 0x3F80;
    const uint16_t two = 0x4000;  // 2.0 in both f16 and bf16
    // Read as one f32, {1.0, 0x4080} is about 4: wrong by far more than f16/bf16 rounding.
    const uint16_t scales[4] = {one, 0x4080, 0x4080, 0x4080};
    const bool four_bit = FindDType(cfg_.src)->bits == 4;
    const uint8_t src[2] = {four_bit ? uint8_t{0x21} : uint8_t{1}, 2};  // [1, 2]
    const uint8_t zps[8] = {};
    uint16_t dst[2] = {};
    const void* inputs[3] = {src, scales, zps};
    try {
      op->Execute(inputs, dst);
    } catch (const DnnlError&) {
      return;
    }
    if (dst[0] == one && dst[1] == two) return;
    char got[32];
    std::snprintf(got, sizeof got, "0x%04x, 0x%04x", dst[0], dst[1]);
    throw Ort::Exception(Prefix() + "refused " + Row(cfg_.zps != 0) + ": oneDNN " +
                             LoadedVersion() +
                             " misreads a per_tensor " + TypeName(cfg_.scales) +
                             " scale (a probe at session creation: src [1, 2], scale 1.0 gave [" +
                             got + "], the spec [" + (one == 0x3C00 ? "0x3c00" : "0x3f80") +
                             ", 0x4000]), so its results would be silently wrong",
                         ORT_NOT_IMPLEMENTED);
  }

  // With every input shape known at session creation (and valid: otherwise the spec's rule is
  // reported at run time, as the native library does), compile now so that oneDNN's refusal
  // is a session-creation error.
  void CompileIfStatic(const OrtApi& api, const OrtKernelInfo* info) {
    const auto src = StaticShape(api, info, 0);
    if (!src || Product(*src) == 0 || !static_scales_ok_) return;
    std::vector<int64_t> scales{scales_count_};
    std::vector<int64_t> zps;
    bool with_zps = static_zps_;
    if (!IsStatic(cfg_.kind)) {
      const auto s = StaticShape(api, info, 1);
      if (!s) return;
      scales = *s;
      if (cfg_.zps != 0) {
        // Zero points fed at run time may be all 0 (then passed as absent): wait for them.
        if (!constant_zero_zps_.has_value()) return;
        const auto z = StaticShape(api, info, 2);
        if (!z) return;
        zps = *z;
        with_zps = !*constant_zero_zps_;
      }
    }
    try {
      const Dims zps_dims{IsStatic(cfg_.kind) ? &zps_count_ : zps.data(),
                          IsStatic(cfg_.kind) ? size_t{1} : zps.size()};
      const bool has_zps = IsStatic(cfg_.kind) ? cfg_.has_zps_attr : cfg_.zps != 0;
      CheckShapes(cfg_, Dims{src->data(), src->size()}, Dims{scales.data(), scales.size()},
                  has_zps ? &zps_dims : nullptr);
    } catch (const SpecError&) {
      return;
    }
    if (!with_zps) zps.clear();
    const auto op = Compiled(*src, scales, zps, with_zps);
    // Some refusals only come when oneDNN executes (v3.2's per_channel zero points: "could not
    // execute a primitive"): one run on zeros brings them to session creation too.
    if (Product(*src) > kTrialLimit) return;
    const int64_t count = Product(scales);
    std::vector<uint8_t> src_buf(Bytes(cfg_.src, Product(*src)));
    std::vector<uint8_t> dst_buf(Bytes(cfg_.dst, Product(*src)));
    std::vector<uint8_t> scales_buf(Bytes(cfg_.scales, count));
    std::vector<uint8_t> zps_buf(Bytes(cfg_.zps, Product(zps)));
    const void* inputs[3] = {src_buf.data(), scales_buf.data(), zps_buf.data()};
    try {
      op->Execute(inputs, dst_buf.data());
    } catch (const DnnlError& e) {
      Refuse(e, with_zps);
    }
  }

  OpDesc Describe(const std::vector<int64_t>& src, const std::vector<int64_t>& scales,
                  const std::vector<int64_t>& zps, bool with_zps) const {
    OpDesc d;
    d.kind = DnnlOp(cfg_.kind);
    d.qtype = cfg_.qtype;
    if (cfg_.per_channel) {
      const auto rank = static_cast<int64_t>(src.size());
      d.set_axis = true;
      d.axis = cfg_.axis < 0 ? cfg_.axis + rank : cfg_.axis;
    }
    if (cfg_.per_group) d.group_shape = cfg_.group_shape;
    d.inputs.push_back({DnnlType(cfg_.src), src});
    if (IsStatic(cfg_.kind)) {
      d.scales = cfg_.scales_attr;
      if (with_zps) {
        d.set_zps = true;
        d.zps = cfg_.zps_attr;
      } else if (zero_zps_) {
        d.set_zps = true;
        d.zps.assign(cfg_.scales_attr.size(), 0);
      }
    } else {
      d.inputs.push_back({DnnlType(cfg_.scales), scales});
      if (with_zps) d.inputs.push_back({DnnlType(cfg_.zps), zps});
    }
    d.dst = {DnnlType(cfg_.dst), src};
    return d;
  }

  // The compiled partition for these shapes, compiled on first use (throws the refusal).
  std::shared_ptr<const CompiledOp> Compiled(const std::vector<int64_t>& src,
                                             const std::vector<int64_t>& scales,
                                             const std::vector<int64_t>& zps,
                                             bool with_zps) const {
    std::vector<int64_t> key{with_zps ? 1 : 0};
    for (const auto* dims : {&src, &scales, &zps}) {
      key.push_back(static_cast<int64_t>(dims->size()));
      key.insert(key.end(), dims->begin(), dims->end());
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    std::shared_ptr<const CompiledOp> op;
    try {
      op = CompiledOp::Compile(Describe(src, scales, zps, with_zps));
    } catch (const DnnlError& e) {
      Refuse(e, with_zps);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // Shapes that keep changing would grow the cache without bound: start over past a limit.
    if (cache_.size() >= kCacheLimit) cache_.clear();
    return cache_.emplace(key, op).first->second;
  }

  std::string Prefix() const {
    return std::string(OpName(cfg_.kind)) + " node '" + cfg_.node + "': ";
  }

  // "per_channel DynamicQuantize f32 -> u8 with s8 zps", for messages.
  std::string Row(bool with_zps) const {
    std::string row = cfg_.qtype + " " + OpName(cfg_.kind) + " " + TypeName(cfg_.src) + " -> " +
                      TypeName(cfg_.dst);
    if (with_zps) row += IsStatic(cfg_.kind) ? " with zps" : " with " + TypeName(cfg_.zps) + " zps";
    return row;
  }

  [[noreturn]] void Refuse(const DnnlError& e, bool with_zps) const {
    throw Ort::Exception(
        Prefix() + "oneDNN " + LoadedVersion() + " refused " + Row(with_zps) + ": " + e.what(),
        ORT_NOT_IMPLEMENTED);
  }

  static constexpr size_t kCacheLimit = 64;

  NodeConfig cfg_;
  bool static_zps_ = false;  // a static op with zero points that are not all 0
  // A dynamic op's zps when constant: whether all are 0; nullopt: absent or fed at run time.
  std::optional<bool> constant_zero_zps_;
  bool zero_zps_ = false;  // static ops: pass zps of zeros (old oneDNN requires the attribute)
  int64_t scales_count_ = 0;  // static ops
  int64_t zps_count_ = 0;
  bool static_scales_ok_ = true;
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const CompiledOp>> cache_;
};

}  // namespace

std::unique_ptr<OpKernel> MakeKernel(OpKind kind, const OrtApi& api, const OrtKernelInfo* info) {
  return std::make_unique<Kernel>(kind, api, info);
}

}  // namespace qg::onednn
