// OneDnnPartition as an OrtCustomOp: variadic inputs and outputs of any types, the output
// types (and what the description knows of their shapes) inferred from `description`.
#include "onednn/partition_op.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
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

// The input shapes when every rank is known (nullopt otherwise), unknown dims as -1.
std::optional<std::vector<std::vector<int64_t>>> InputShapes(const OrtApi& api,
                                                             OrtShapeInferContext* ctx,
                                                             const Description& d) {
  const std::vector<size_t> inputs = FusedPartition::Inputs(d);
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context
    Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(ctx, i, &info));
    size_t rank = 0;
    Ort::ThrowOnError(api.GetDimensionsCount(info, &rank));
    std::vector<int64_t> dims(rank);
    if (rank != 0) Ort::ThrowOnError(api.GetDimensions(info, dims.data(), rank));
    // Rank 0 is also how an unknown shape reads: trust it only if the description says so.
    const TensorSpec& t = d.Tensor(inputs[i]);
    if (rank == 0 && !(t.rank_known && t.dims.empty())) return std::nullopt;
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

// Best effort, as the spec ops' inference: a bad description is reported by the kernel. Output
// types come from the description, dims from it too (unknown ones as fresh symbols). An output
// of unknown rank gets the dims oneDNN infers when it compiles the partition for the input
// shapes (unknown dims taken as 1, then left unknown): onnxruntime has no unknown-rank shape,
// and a wrong (scalar) one is warned about at every call. Compiling executes nothing.
OrtStatusPtr InferOutputs(OrtShapeInferContext* ctx) {
  const OrtApi& api = GetOrtApi();
  try {
    const Description d = ParseDescription(ReadDescription(api, ctx));
    const std::vector<size_t> outputs = FusedPartition::Outputs(d);
    std::vector<std::vector<int64_t>> compiled;  // oneDNN's output dims, when needed
    for (size_t i = 0; i < outputs.size(); ++i) {
      const TensorSpec& t = d.Tensor(outputs[i]);
      std::vector<int64_t> dims = t.dims;
      if (!t.rank_known) {
        if (compiled.empty()) {
          auto shapes = InputShapes(api, ctx, d);
          if (!shapes) continue;  // leaves the type to the model's value_info
          bool exact = true;
          for (auto& dims_i : *shapes) {
            for (int64_t& x : dims_i) {
              exact = exact && x >= 0;
              if (x < 0) x = 1;
            }
          }
          compiled = FusedPartition::Compile(d, *shapes)->output_dims();
          if (!exact) {
            for (auto& dims_o : compiled) std::fill(dims_o.begin(), dims_o.end(), -1);
          }
        }
        dims = compiled.at(i);
      }
      OrtTensorTypeAndShapeInfo* raw = nullptr;
      Ort::ThrowOnError(api.CreateTensorTypeAndShapeInfo(&raw));
      const Ort::TensorTypeAndShapeInfo owner(raw);
      Ort::ThrowOnError(
          api.SetTensorElementType(raw, static_cast<ONNXTensorElementDataType>(t.type->onnx)));
      std::vector<std::string> fresh;
      fresh.reserve(dims.size());
      std::vector<const char*> symbols;
      for (int64_t dim : dims) {
        fresh.push_back(dim < 0 ? FreshSymbol() : "");
        symbols.push_back(fresh.back().c_str());
      }
      Ort::ThrowOnError(api.SetDimensions(raw, dims.data(), dims.size()));
      Ort::ThrowOnError(api.SetSymbolicDimensions(raw, symbols.data(), symbols.size()));
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
