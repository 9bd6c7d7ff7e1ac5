// libquantgraph_ops: the native kernel object of the four ops (validated by node.h, computed
// by compute.h's dispatch table) and the exported RegisterCustomOps, which registers them
// through the shared onnxruntime glue (ort_ops.h) in the arithmetic the session asks for.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compute.h"
#include "kernels/kernels.h"
#include "node.h"
#include "ort_api.h"
#include "ort_ops.h"
#include "spec.h"

namespace qg {
namespace {

constexpr const char* kLibrary = "quantgraph native";
// Session config entry choosing the arithmetic where the spec leaves rounding open.
constexpr const char* kArithmeticKey = "quantgraph.arithmetic";

class Kernel final : public OpKernel {
 public:
  Kernel(OpKind kind, Arithmetic arithmetic, const OrtApi& api, const OrtKernelInfo* info)
      : cfg_(ReadNodeConfig(kind, api, info)) {
    CheckNode(cfg_);
    int zps_key = cfg_.zps;
    if (IsStatic(kind)) {
      zps_key = cfg_.has_zps_attr ? spec::kS32 : 0;
      zps32_.assign(cfg_.zps_attr.begin(), cfg_.zps_attr.end());  // CheckNode bounded them
      scales_count_ = static_cast<int64_t>(cfg_.scales_attr.size());
      zps_count_ = static_cast<int64_t>(zps32_.size());
      // check_scale_values comes after the shape rules: a bad static scale is reported then.
      try {
        CheckScaleValues(cfg_, cfg_.scales_attr.data(), cfg_.scales_attr.size());
      } catch (const SpecError&) {
        static_scales_ok_ = false;
      }
    }
    compute_ = FindCompute(kind, cfg_.src, cfg_.dst, zps_key, arithmetic);
    if (compute_ == nullptr && arithmetic == Arithmetic::kOnednn) {
      std::string row = TypeName(cfg_.src) + " -> " + TypeName(cfg_.dst);
      if (zps_key != 0) row += " with " + TypeName(zps_key) + " zps";
      throw Ort::Exception(std::string(OpName(kind)) + " node '" + cfg_.node +
                               "': the onednn arithmetic has no kernel for " + row,
                           ORT_NOT_IMPLEMENTED);
    }
    if (compute_ == nullptr) {  // CheckNode accepted a row the dispatch table lacks
      throw std::logic_error(std::string("no kernel for ") + OpName(kind) + " " +
                             TypeName(cfg_.src) + " -> " + TypeName(cfg_.dst));
    }
    table_ = &kernels::GetKernelTable(kernels::SelectIsa());
    // The output buffer onnxruntime allocates has the node's output type: it must be the dst
    // the kernel writes (shape inference makes it so; a model can only contradict it by a
    // declared type, which onnxruntime's graph resolution rejects first: this is a safety net).
    const int output = OutputElementType(api, info);
    if (output != 0 && output != cfg_.dst) {
      ThrowRule(kind, cfg_.node, "output-type",
                {{"got", TypeName(output)}, {"dst", TypeName(cfg_.dst)}});
    }
  }

  void Compute(OrtKernelContext* raw) const override {
    Ort::KernelContext ctx(raw);
    const Ort::ConstValue src = ctx.GetInput(0);
    const auto src_info = src.GetTensorTypeAndShapeInfo();
    if (static_cast<int>(src_info.GetElementType()) != cfg_.src) {
      throw std::logic_error("src element type differs from the node's");
    }
    const std::vector<int64_t> dims = src_info.GetShape();
    const size_t elements = src_info.GetElementCount();
    const Dims src_dims{dims.data(), dims.size()};

    CallArgs args{};
    args.scales_type = spec::kF32;
    std::vector<int64_t> group_dims;  // per_group: the scales' shape
    int64_t axis = -1;
    if (IsStatic(cfg_.kind)) {
      const Dims scales{&scales_count_, 1};
      const Dims zps{&zps_count_, 1};
      axis = CheckShapes(cfg_, src_dims, scales, cfg_.has_zps_attr ? &zps : nullptr);
      if (!static_scales_ok_) {
        CheckScaleValues(cfg_, cfg_.scales_attr.data(), cfg_.scales_attr.size());
      }
      args.scales = cfg_.scales_attr.data();
      args.scale_count = cfg_.scales_attr.size();
      args.zps = cfg_.has_zps_attr ? zps32_.data() : nullptr;
    } else {
      const Ort::ConstValue scales = ctx.GetInput(1);
      const Ort::ConstValue zps =
          ctx.GetInputCount() > 2 ? ctx.GetInput(2) : Ort::ConstValue{nullptr};
      if (scales == nullptr) ThrowRule(cfg_.kind, cfg_.node, "missing-input", {{"name", "scales"}});
      const auto scales_info = scales.GetTensorTypeAndShapeInfo();
      const std::vector<int64_t> scales_shape = scales_info.GetShape();
      std::vector<int64_t> zps_shape;
      if (zps != nullptr) zps_shape = zps.GetTensorTypeAndShapeInfo().GetShape();
      const Dims zps_dims{zps_shape.data(), zps_shape.size()};
      axis = CheckShapes(cfg_, src_dims, Dims{scales_shape.data(), scales_shape.size()},
                         zps != nullptr ? &zps_dims : nullptr);
      args.scales = scales.GetTensorRawData();  // of type cfg_.scales (checked by CheckNode)
      args.scales_type = cfg_.scales;
      args.scale_count = scales_info.GetElementCount();
      if (IsQuantize(cfg_.kind)) {
        CheckScaleValues(cfg_, static_cast<const float*>(args.scales), args.scale_count);
      }
      args.zps = zps != nullptr ? zps.GetTensorRawData() : nullptr;
      if (cfg_.per_group) {
        group_dims.assign(scales_shape.begin(), scales_shape.end());
        args.group_shape = cfg_.group_shape.data();
        args.scales_dims = group_dims.data();
      }
    }

    Ort::UnownedValue dst = ctx.GetOutput(0, dims.data(), dims.size());  // type: cfg_.dst
    if (elements == 0) return;
    args.src = src.GetTensorRawData();
    args.dst = dst.GetTensorMutableRawData();
    args.dims = dims.data();
    args.rank = dims.size();
    args.elements = elements;
    args.axis = axis;
    compute_(args, ExecContext{table_, raw});
  }

 private:
  NodeConfig cfg_;
  std::vector<int32_t> zps32_;
  int64_t scales_count_ = 0;
  int64_t zps_count_ = 0;
  bool static_scales_ok_ = true;
  ComputeFn compute_ = nullptr;
  const kernels::KernelTable* table_ = nullptr;
};

// "quantgraph.arithmetic" of the session: "onnx" (also when absent) or "onednn".
Arithmetic ReadArithmetic(const OrtApi& api, const OrtSessionOptions* options) {
  int has = 0;
  Ort::ThrowOnError(api.HasSessionConfigEntry(options, kArithmeticKey, &has));
  if (has == 0) return Arithmetic::kOnnx;
  size_t size = 0;
  Ort::ThrowOnError(api.GetSessionConfigEntry(options, kArithmeticKey, nullptr, &size));
  std::string value(size + 1, '\0');
  size = value.size();
  Ort::ThrowOnError(api.GetSessionConfigEntry(options, kArithmeticKey, value.data(), &size));
  value.resize(strnlen(value.data(), value.size()));
  if (value == "onnx") return Arithmetic::kOnnx;
  if (value == "onednn") return Arithmetic::kOnednn;
  throw Ort::Exception(
      std::string(kArithmeticKey) + " must be 'onnx' or 'onednn', got '" + value + "'",
      ORT_INVALID_ARGUMENT);
}

// One registry (ops and domain, alive as long as the library) per arithmetic.
Registry& RegistryFor(Arithmetic arithmetic) {
  auto factory = [](Arithmetic a) {
    return [a](OpKind kind, const OrtApi& api, const OrtKernelInfo* info) {
      return std::unique_ptr<OpKernel>(new Kernel(kind, a, api, info));
    };
  };
  if (arithmetic == Arithmetic::kOnednn) {
    static Registry onednn(factory(Arithmetic::kOnednn), kLibrary);
    return onednn;
  }
  static Registry onnx(factory(Arithmetic::kOnnx), kLibrary);
  return onnx;
}

}  // namespace
}  // namespace qg

extern "C" {

__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // cannot even report: runtime older than our headers
  try {
    qg::InitOrtApi(api);
    const qg::Arithmetic arithmetic = qg::ReadArithmetic(*api, options);
    Ort::UnownedSessionOptions(options).Add(qg::RegistryFor(arithmetic).domain());
    return nullptr;
  } catch (...) {
    return qg::ToStatus(*api, qg::kLibrary);
  }
}

// The kernel instruction set new sessions use (after QUANTGRAPH_NATIVE_ISA), and the best one
// this CPU supports: "avx512 (best avx512)".
__attribute__((visibility("default"))) const char* QuantgraphNativeIsa(void) {
  static thread_local std::string text;
  text = std::string(qg::kernels::IsaName(qg::kernels::SelectIsa())) + " (best " +
         qg::kernels::IsaName(qg::kernels::DetectIsa()) + ")";
  return text.c_str();
}

}  // extern "C"
