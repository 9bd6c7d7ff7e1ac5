// onnxruntime glue: the four ops of domain com.quantgraph as OrtCustomOps, their kernels, and
// the exported RegisterCustomOps.
//
// Each op name is registered once per dst type of its spec table, all with type-agnostic
// inputs: onnxruntime then accepts any input types, the kernel reports unsupported ones with
// the spec's wording, and the op's InferOutputShapeFn picks the output type (output_dtype,
// zps) that selects the matching registration. Errors become onnxruntime errors (statuses),
// never aborts: nothing throws across the C API.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compute.h"
#include "kernels/kernels.h"
#include "node.h"
#include "ort_api.h"
#include "spec.h"

namespace qg {
namespace {

const OrtApi* g_api = nullptr;

OrtStatus* ToStatus(const OrtApi& api) noexcept {
  try {
    throw;
  } catch (const SpecError& e) {
    return api.CreateStatus(ORT_INVALID_ARGUMENT, e.what());
  } catch (const Ort::Exception& e) {
    return api.CreateStatus(e.GetOrtErrorCode(), e.what());
  } catch (const std::exception& e) {
    return api.CreateStatus(ORT_FAIL, (std::string("quantgraph native: ") + e.what()).c_str());
  } catch (...) {
    return api.CreateStatus(ORT_FAIL, "quantgraph native: unknown error");
  }
}

int OutputElementType(const OrtApi& api, const OrtKernelInfo* info) {
  OrtTypeInfo* type_info = nullptr;
  if (OrtStatus* s = api.KernelInfo_GetOutputTypeInfo(info, 0, &type_info)) {
    api.ReleaseStatus(s);
    return 0;
  }
  std::unique_ptr<OrtTypeInfo, decltype(api.ReleaseTypeInfo)> owner(type_info, api.ReleaseTypeInfo);
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  if (OrtStatus* s = api.CastTypeInfoToTensorInfo(type_info, &tensor)) {
    api.ReleaseStatus(s);
    return 0;
  }
  if (tensor == nullptr) return 0;
  if (OrtStatus* s = api.GetTensorElementType(tensor, &type)) {
    api.ReleaseStatus(s);
    return 0;
  }
  return static_cast<int>(type);
}

class Kernel {
 public:
  Kernel(OpKind kind, const OrtApi& api, const OrtKernelInfo* info)
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
    compute_ = FindCompute(kind, cfg_.src, cfg_.dst, zps_key);
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

  void Compute(OrtKernelContext* raw) const {
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

// ---- output type and shape ---------------------------------------------------------------

struct OpDef;
OrtStatusPtr InferOutput(const OpDef& op, OrtShapeInferContext* ctx);

struct OpDef : OrtCustomOp {
  OpDef(OpKind kind_, int dst_, int default_dst_)
      : kind(kind_), dst(dst_), default_dst(default_dst_) {
    std::memset(static_cast<OrtCustomOp*>(this), 0, sizeof(OrtCustomOp));
    version = ORT_API_VERSION;
    GetName = [](const OrtCustomOp* op) { return OpName(Self(op).kind); };
    GetExecutionProviderType = [](const OrtCustomOp*) -> const char* {
      return "CPUExecutionProvider";
    };
    GetInputTypeCount = [](const OrtCustomOp* op) -> size_t {
      return static_cast<size_t>(Info(Self(op).kind).input_count);
    };
    GetInputType = [](const OrtCustomOp*, size_t) {
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    };
    GetOutputTypeCount = [](const OrtCustomOp*) -> size_t { return 1; };
    GetOutputType = [](const OrtCustomOp* op, size_t) {
      return static_cast<ONNXTensorElementDataType>(Self(op).dst);
    };
    // scales is optional to onnxruntime so that a node without it gets the spec's message.
    GetInputCharacteristic = [](const OrtCustomOp*, size_t i) {
      return i == 0 ? INPUT_OUTPUT_REQUIRED : INPUT_OUTPUT_OPTIONAL;
    };
    GetOutputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_REQUIRED; };
    GetInputMemoryType = [](const OrtCustomOp*, size_t) { return OrtMemTypeDefault; };
    GetVariadicInputMinArity = [](const OrtCustomOp*) { return 1; };
    GetVariadicInputHomogeneity = [](const OrtCustomOp*) { return 0; };
    GetVariadicOutputMinArity = [](const OrtCustomOp*) { return 1; };
    GetVariadicOutputHomogeneity = [](const OrtCustomOp*) { return 0; };
    CreateKernelV2 = [](const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                        void** kernel) -> OrtStatusPtr {
      try {
        *kernel = new Kernel(Self(op).kind, *api, info);
        return nullptr;
      } catch (...) {
        return ToStatus(*api);
      }
    };
    KernelComputeV2 = [](void* kernel, OrtKernelContext* context) -> OrtStatusPtr {
      try {
        static_cast<const Kernel*>(kernel)->Compute(context);
        return nullptr;
      } catch (...) {
        return ToStatus(*g_api);
      }
    };
    KernelDestroy = [](void* kernel) { delete static_cast<Kernel*>(kernel); };
    InferOutputShapeFn = [](const OrtCustomOp* op, OrtShapeInferContext* ctx) -> OrtStatusPtr {
      return InferOutput(Self(op), ctx);
    };
    GetStartVersion = [](const OrtCustomOp*) { return spec::kOpsetVersion; };
    GetEndVersion = [](const OrtCustomOp*) { return spec::kOpsetVersion; };
  }

  static const OpDef& Self(const OrtCustomOp* op) { return *static_cast<const OpDef*>(op); }

  OpKind kind;
  int dst;          // the output type of this registration
  int default_dst;  // the op's first registration: what onnxruntime infers before us
};

bool IsNumericOnnxType(int type) {
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
      type == ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING) {
    return false;
  }
  for (const auto& t : spec::kOnnxTypeNames) {
    if (t.onnx == type) return true;
  }
  return false;
}

// Best effort: errors here are reported by the kernel (with the spec's wording) instead, as
// onnxruntime does not surface a status returned from shape inference.
OrtStatusPtr InferOutput(const OpDef& op, OrtShapeInferContext* ctx) {
  const OrtApi& api = *g_api;
  try {
    size_t inputs = 0;
    Ort::ThrowOnError(api.ShapeInferContext_GetInputCount(ctx, &inputs));
    if (inputs == 0) return nullptr;
    auto input_type = [&](size_t i) -> int {
      OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context
      OrtStatus* s = api.ShapeInferContext_GetInputTypeShape(ctx, i, &info);
      if (s != nullptr) {
        api.ReleaseStatus(s);
        return 0;
      }
      ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
      Ort::ThrowOnError(api.GetTensorElementType(info, &t));
      return static_cast<int>(t);
    };

    int dst = op.default_dst;
    if (IsQuantize(op.kind)) {
      int64_t output_dtype = 0;
      const OrtOpAttr* attr = nullptr;
      OrtStatus* s = api.ShapeInferContext_GetAttribute(ctx, "output_dtype", &attr);
      if (s == nullptr) {
        size_t size = 0;
        OrtStatus* r =
            api.ReadOpAttr(attr, ORT_OP_ATTR_INT, &output_dtype, sizeof output_dtype, &size);
        if (r != nullptr) {
          api.ReleaseStatus(r);
          output_dtype = 0;
        }
      } else {
        api.ReleaseStatus(s);
      }
      const int zps = !IsStatic(op.kind) && inputs > 2 ? input_type(2) : 0;
      // Any numeric ONNX type, even one the spec rejects: it must agree with a declared output
      // type, and then the catch-all registration's kernel reports it with the spec's rule.
      const int wanted = ResolveDst(op.kind, output_dtype, zps, 0);
      if (IsNumericOnnxType(wanted)) dst = wanted;
    } else if (!IsStatic(op.kind)) {
      // The scales type (f32, f16, bf16) is the dst type; any other is the dst of the default
      // registration, and the kernel reports it with the scales-type rule.
      dst = ResolveDst(op.kind, 0, 0, inputs > 1 ? input_type(1) : 0);
    }

    OrtTensorTypeAndShapeInfo* src_info = nullptr;
    Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(ctx, 0, &src_info));
    size_t rank = 0;
    Ort::ThrowOnError(api.GetDimensionsCount(src_info, &rank));
    // Rank 0 is also what an unknown shape looks like here: then only set a needed type.
    if (rank == 0 && dst == op.default_dst) return nullptr;
    std::vector<int64_t> dims(rank);
    std::vector<const char*> symbols(rank, "");
    if (rank != 0) {
      Ort::ThrowOnError(api.GetDimensions(src_info, dims.data(), rank));
      Ort::ThrowOnError(api.GetSymbolicDimensions(src_info, symbols.data(), rank));
    }
    OrtTensorTypeAndShapeInfo* out = nullptr;
    Ort::ThrowOnError(api.CreateTensorTypeAndShapeInfo(&out));
    std::unique_ptr<OrtTensorTypeAndShapeInfo, decltype(api.ReleaseTensorTypeAndShapeInfo)> owner(
        out, api.ReleaseTensorTypeAndShapeInfo);
    Ort::ThrowOnError(api.SetTensorElementType(out, static_cast<ONNXTensorElementDataType>(dst)));
    Ort::ThrowOnError(api.SetDimensions(out, dims.data(), rank));
    Ort::ThrowOnError(api.SetSymbolicDimensions(out, symbols.data(), rank));
    return api.ShapeInferContext_SetOutputTypeShape(ctx, 0, out);
  } catch (...) {
    return nullptr;
  }
}

// One registration per (op, dst) of the spec's table; the default dst (u8 for quantize ops,
// as the spec's output_dtype default) first, since onnxruntime infers the first one's type.
struct Registry {
  std::vector<std::unique_ptr<OpDef>> ops;
  Ort::CustomOpDomain domain{spec::kDomain};

  Registry() {
    for (int k = 0; k < spec::kOpCount; ++k) {
      const auto kind = static_cast<OpKind>(k);
      std::vector<int> dsts;
      for (int src : SrcTypes(kind)) {
        for (int d : DstTypes(kind, src)) {
          bool seen = false;
          for (int x : dsts) seen = seen || x == d;
          if (!seen) dsts.push_back(d);
        }
      }
      const int fallback = ResolveDst(kind, 0, 0, 0);
      int default_dst = dsts.front();
      for (int d : dsts) {
        if (d == fallback) default_dst = d;
      }
      ops.push_back(std::make_unique<OpDef>(kind, default_dst, default_dst));
      for (int d : dsts) {
        if (d != default_dst) ops.push_back(std::make_unique<OpDef>(kind, d, default_dst));
      }
      // Quantize ops also take any other output type (registered last, so never the default)
      // for their kernel to reject with the spec's dst-type rule.
      if (IsQuantize(kind)) {
        ops.push_back(
            std::make_unique<OpDef>(kind, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, default_dst));
      }
    }
    for (auto& op : ops) domain.Add(op.get());
  }
};

}  // namespace
}  // namespace qg

extern "C" {

__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // cannot even report: runtime older than our headers
  try {
    if (qg::g_api == nullptr) {
      qg::g_api = api;
      Ort::InitApi(api);
    }
    static qg::Registry registry;  // ops and domain live as long as the library
    Ort::UnownedSessionOptions(options).Add(registry.domain);
    return nullptr;
  } catch (...) {
    return qg::ToStatus(*api);
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
