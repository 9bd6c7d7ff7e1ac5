#include "common/ort_ops.h"

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/node.h"

namespace qg {
namespace {

const OrtApi* g_api = nullptr;

}  // namespace

void InitOrtApi(const OrtApi* api) {
  if (g_api == nullptr) {
    g_api = api;
    Ort::InitApi(api);
  }
}

const OrtApi& GetOrtApi() { return *g_api; }

OrtStatus* RegisterDomain(OrtSessionOptions* options, const OrtApiBase* api_base,
                          const char* library, const DomainFor& domain_for) noexcept {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // cannot even report: runtime older than our headers
  try {
    InitOrtApi(api);
    Ort::UnownedSessionOptions(options).Add(domain_for(*api, options));
    return nullptr;
  } catch (...) {
    return ToStatus(*api, library);
  }
}

OrtStatus* ToStatus(const OrtApi& api, const char* library) noexcept {
  try {
    throw;
  } catch (const SpecError& e) {
    return api.CreateStatus(ORT_INVALID_ARGUMENT, e.what());
  } catch (const Ort::Exception& e) {
    return api.CreateStatus(e.GetOrtErrorCode(), e.what());
  } catch (const std::exception& e) {
    return api.CreateStatus(ORT_FAIL, (std::string(library) + ": " + e.what()).c_str());
  } catch (...) {
    return api.CreateStatus(ORT_FAIL, (std::string(library) + ": unknown error").c_str());
  }
}

__attribute__((noinline, cold)) void ThrowStatus(OrtStatus* status) {
  Ort::ThrowOnError(status);
  throw std::logic_error("ThrowStatus without a status");
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

// ---- the OrtCustomOp of one (op, dst) registration ----------------------------------------

OrtStatusPtr InferOutput(const OpDef& op, OrtShapeInferContext* ctx);

struct OpDef : OrtCustomOp {
  OpDef(OpKind kind_, int dst_, int default_dst_, const KernelFactory* factory_,
        const char* library_)
      : kind(kind_), dst(dst_), default_dst(default_dst_), factory(factory_), library(library_) {
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
      const OpDef& self = Self(op);
      try {
        *kernel = new Instance{(*self.factory)(self.kind, *api, info), self.library};
        return nullptr;
      } catch (...) {
        return ToStatus(*api, self.library);
      }
    };
    KernelComputeV2 = [](void* kernel, OrtKernelContext* context) -> OrtStatusPtr {
      const auto* instance = static_cast<const Instance*>(kernel);
      try {
        instance->kernel->Compute(context);
        return nullptr;
      } catch (...) {
        return ToStatus(*g_api, instance->library);
      }
    };
    KernelDestroy = [](void* kernel) { delete static_cast<Instance*>(kernel); };
    InferOutputShapeFn = [](const OrtCustomOp* op, OrtShapeInferContext* ctx) -> OrtStatusPtr {
      return InferOutput(Self(op), ctx);
    };
    GetStartVersion = [](const OrtCustomOp*) { return spec::kOpsetVersion; };
    GetEndVersion = [](const OrtCustomOp*) { return spec::kOpsetVersion; };
  }

  static const OpDef& Self(const OrtCustomOp* op) { return *static_cast<const OpDef*>(op); }

  // What onnxruntime holds as the kernel: the library's kernel and the library's name for
  // messages of errors that are not the spec's.
  struct Instance {
    std::unique_ptr<OpKernel> kernel;
    const char* library;
  };

  OpKind kind;
  int dst;          // the output type of this registration
  int default_dst;  // the op's first registration: what onnxruntime infers before us
  const KernelFactory* factory;
  const char* library;
};

namespace {

// A dim name unique in the process: ONNX reads distinct names as unrelated unknown dims.
std::string FreshSymbol() {
  static std::atomic<uint64_t> counter{0};
  return "quantgraph_unk__" + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

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

}  // namespace

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
    // onnxruntime reads a dim without value or symbol as -1, and writes a dim without symbol as
    // that value: -1 would become a dim_value that fails merging with declared shapes or aborts
    // downstream inference (Slice's std::clamp). A fresh symbol keeps the dim unknown.
    std::vector<std::string> fresh;
    fresh.reserve(rank);
    for (size_t d = 0; d < rank; ++d) {
      if (dims[d] < 0 && (symbols[d] == nullptr || symbols[d][0] == '\0')) {
        fresh.push_back(FreshSymbol());
        symbols[d] = fresh.back().c_str();
      }
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

// ---- the registry ------------------------------------------------------------------------

// One registration per (op, dst) of the spec's table; the default dst (u8 for quantize ops,
// as the spec's output_dtype default) first, since onnxruntime infers the first one's type.
Registry::Registry(KernelFactory factory, const char* library)
    : factory_(std::move(factory)), library_(library) {
  auto add = [&](OpKind kind, int dst, int default_dst) {
    ops_.push_back(std::make_unique<OpDef>(kind, dst, default_dst, &factory_, library_));
  };
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
    add(kind, default_dst, default_dst);
    for (int d : dsts) {
      if (d != default_dst) add(kind, d, default_dst);
    }
    // Quantize ops also take any other output type (registered last, so never the default)
    // for their kernel to reject with the spec's dst-type rule.
    if (IsQuantize(kind)) add(kind, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, default_dst);
  }
  for (auto& op : ops_) domain_.Add(op.get());
}

Registry::~Registry() = default;

}  // namespace qg
