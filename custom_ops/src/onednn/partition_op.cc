// OneDnnPartition as an OrtCustomOp: variadic inputs and outputs of any types, the output
// types (and what the description knows of their shapes) inferred from `description`.
#include "onednn/partition_op.h"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "onednn/description.h"
#include "onednn/fused.h"

namespace qg::onednn {
namespace {

constexpr const char* kLibrary = "quantgraph onednn";

// A dim name unique in the process: ONNX reads distinct names as unrelated unknown dims.
std::string FreshSymbol() {
  static std::atomic<uint64_t> counter{0};
  return "quantgraph_part__" + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

std::string ReadDescription(const OrtApi& api, OrtShapeInferContext* ctx) {
  const OrtOpAttr* attr = nullptr;
  Ort::ThrowOnError(api.ShapeInferContext_GetAttribute(ctx, "description", &attr));
  size_t size = 0;
  if (OrtStatus* s = api.ReadOpAttr(attr, ORT_OP_ATTR_STRING, nullptr, 0, &size)) {
    api.ReleaseStatus(s);  // expected: it says how large the string is
  }
  std::string text(size, '\0');
  Ort::ThrowOnError(api.ReadOpAttr(attr, ORT_OP_ATTR_STRING, text.data(), size, &size));
  text.resize(size);
  return text;
}

// Best effort, as the spec ops' inference: a bad description is reported by the kernel.
OrtStatusPtr InferOutputs(OrtShapeInferContext* ctx) {
  const OrtApi& api = GetOrtApi();
  try {
    const Description d = ParseDescription(ReadDescription(api, ctx));
    const std::vector<size_t> outputs = FusedPartition::Outputs(d);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const TensorSpec& t = d.Tensor(outputs[i]);
      Ort::TensorTypeAndShapeInfo info(nullptr);
      OrtTensorTypeAndShapeInfo* raw = nullptr;
      Ort::ThrowOnError(api.CreateTensorTypeAndShapeInfo(&raw));
      info = Ort::TensorTypeAndShapeInfo(raw);
      Ort::ThrowOnError(
          api.SetTensorElementType(raw, static_cast<ONNXTensorElementDataType>(t.type->onnx)));
      if (t.rank_known) {
        std::vector<std::string> fresh;
        fresh.reserve(t.dims.size());
        std::vector<const char*> symbols;
        for (int64_t dim : t.dims) {
          fresh.push_back(dim < 0 ? FreshSymbol() : "");
          symbols.push_back(fresh.back().c_str());
        }
        Ort::ThrowOnError(api.SetDimensions(raw, t.dims.data(), t.dims.size()));
        Ort::ThrowOnError(api.SetSymbolicDimensions(raw, symbols.data(), symbols.size()));
      }
      Ort::ThrowOnError(api.ShapeInferContext_SetOutputTypeShape(ctx, i, raw));
    }
    return nullptr;
  } catch (...) {
    return nullptr;
  }
}

struct PartitionOpDef : OrtCustomOp {
  PartitionOpDef() {
    std::memset(static_cast<OrtCustomOp*>(this), 0, sizeof(OrtCustomOp));
    version = ORT_API_VERSION;
    GetName = [](const OrtCustomOp*) { return kPartitionOp; };
    GetExecutionProviderType = [](const OrtCustomOp*) -> const char* {
      return "CPUExecutionProvider";
    };
    GetInputTypeCount = [](const OrtCustomOp*) -> size_t { return 1; };
    GetInputType = [](const OrtCustomOp*, size_t) {
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    };
    GetOutputTypeCount = [](const OrtCustomOp*) -> size_t { return 1; };
    GetOutputType = [](const OrtCustomOp*, size_t) {
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    };
    GetInputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_VARIADIC; };
    GetOutputCharacteristic = [](const OrtCustomOp*, size_t) { return INPUT_OUTPUT_VARIADIC; };
    GetInputMemoryType = [](const OrtCustomOp*, size_t) { return OrtMemTypeDefault; };
    GetVariadicInputMinArity = [](const OrtCustomOp*) { return 1; };
    GetVariadicInputHomogeneity = [](const OrtCustomOp*) { return 0; };
    GetVariadicOutputMinArity = [](const OrtCustomOp*) { return 1; };
    GetVariadicOutputHomogeneity = [](const OrtCustomOp*) { return 0; };
    CreateKernelV2 = [](const OrtCustomOp*, const OrtApi* api, const OrtKernelInfo* info,
                        void** kernel) -> OrtStatusPtr {
      try {
        *kernel = MakePartitionKernel(*api, info).release();
        return nullptr;
      } catch (...) {
        return ToStatus(*api, kLibrary);
      }
    };
    KernelComputeV2 = [](void* kernel, OrtKernelContext* context) -> OrtStatusPtr {
      try {
        static_cast<const OpKernel*>(kernel)->Compute(context);
        return nullptr;
      } catch (...) {
        return ToStatus(GetOrtApi(), kLibrary);
      }
    };
    KernelDestroy = [](void* kernel) { delete static_cast<OpKernel*>(kernel); };
    InferOutputShapeFn = [](const OrtCustomOp*, OrtShapeInferContext* ctx) -> OrtStatusPtr {
      return InferOutputs(ctx);
    };
  }
};

}  // namespace

Ort::CustomOpDomain& PartitionDomain() {
  static PartitionOpDef op;
  static Ort::CustomOpDomain domain = [] {
    Ort::CustomOpDomain d(kPartitionDomain);
    d.Add(&op);
    return d;
  }();
  return domain;
}

}  // namespace qg::onednn
