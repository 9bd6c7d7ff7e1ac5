// libquantgraph_ops: the native kernel object of the four ops (validated by node.h, computed
// by compute.h's dispatch table) and the exported RegisterCustomOps, which registers them
// through the shared onnxruntime glue (ort_ops.h) in the arithmetic the session asks for.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/node.h"
#include "common/ort_api.h"
#include "common/ort_ops.h"
#include "common/spec.h"
#include "native/compute.h"
#include "native/kernels/kernels.h"

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
    }
    const RowKernels found = FindKernels(kind, cfg_.src, cfg_.dst, zps_key, arithmetic);
    compute_ = found.compute;
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
    FixedParams fixed;
    if (found.prepare != nullptr && FixedPerTensor(cfg_, fixed)) {
      CallArgs params{};
      params.scales = fixed.scales;
      params.scales_type = IsStatic(kind) ? spec::kF32 : cfg_.scales;
      params.scale_count = 1;
      params.zps = IsStatic(kind) ? (cfg_.has_zps_attr ? zps32_.data() : nullptr) : fixed.zps;
      fixed_ = found.prepare(params, *table_);
    }
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
    if (fixed_ == nullptr || !ComputeFixed(raw)) ComputeCall(raw);
  }

 private:
  // Ranks up to this take the fixed path, their dims on the stack.
  static constexpr size_t kFixedMaxRank = 8;

  // The call of a node whose parameters never change: src alone is read, through the C API
  // directly, with no allocation, no thread_local and no inlined throw (a small model's ops
  // run with cold code: what a custom op costs over onnxruntime's own QuantizeLinear is
  // mostly cache lines of code). False (nothing done): a rank for ComputeCall.
  bool ComputeFixed(OrtKernelContext* raw) const {
    const OrtApi& api = GetOrtApi();
    const OrtValue* src = nullptr;
    OrtTensorTypeAndShapeInfo* info = nullptr;
    size_t rank = 0;
    int64_t dims[kFixedMaxRank];
    OrtStatus* s = api.KernelContext_GetInput(raw, 0, &src);
    if (s == nullptr) s = api.GetTensorTypeAndShape(src, &info);
    if (s == nullptr) s = api.GetDimensionsCount(info, &rank);
    if (s == nullptr && rank <= kFixedMaxRank) s = api.GetDimensions(info, dims, rank);
    if (info != nullptr) api.ReleaseTensorTypeAndShapeInfo(info);
    if (s != nullptr) ThrowStatus(s);
    if (rank > kFixedMaxRank) return false;
    size_t elements = 1;
    for (size_t d = 0; d < rank; ++d) elements *= static_cast<size_t>(dims[d]);
    OrtValue* dst = nullptr;
    void* x = nullptr;
    void* y = nullptr;
    s = api.KernelContext_GetOutput(raw, 0, dims, rank, &dst);
    if (s == nullptr) s = api.GetTensorMutableData(const_cast<OrtValue*>(src), &x);
    if (s == nullptr) s = api.GetTensorMutableData(dst, &y);
    if (s != nullptr) ThrowStatus(s);
    if (elements != 0) fixed_->Run(x, y, elements, ExecContext{table_, raw});
    return true;
  }

  __attribute__((noinline)) void ComputeCall(OrtKernelContext* raw) const {
    Ort::KernelContext ctx(raw);
    // One per thread, its vectors' capacity kept: a call allocates nothing of its own.
    thread_local CallInputs call;
    ReadCall(cfg_, ctx, call);
    CallArgs args{};
    args.scales = call.scales;
    args.scales_type = IsStatic(cfg_.kind) ? spec::kF32 : cfg_.scales;
    args.scale_count = call.scale_count;
    args.zps = IsStatic(cfg_.kind) ? (cfg_.has_zps_attr ? zps32_.data() : nullptr) : call.zps;
    if (cfg_.per_group) {
      args.group_shape = cfg_.group_shape.data();
      args.scales_dims = call.scales_shape.data();
    }
    Ort::UnownedValue dst = ctx.GetOutput(0, call.dims.data(), call.dims.size());  // cfg_.dst
    if (call.elements == 0) return;
    args.src = call.src;
    args.dst = dst.GetTensorMutableRawData();
    args.dims = call.dims.data();
    args.rank = call.dims.size();
    args.elements = call.elements;
    args.axis = call.axis;
    compute_(args, ExecContext{table_, raw});
  }

 private:
  NodeConfig cfg_;
  std::vector<int32_t> zps32_;  // static ops: the zps attribute as the kernels take it
  ComputeFn compute_ = nullptr;
  std::unique_ptr<FixedRun> fixed_;  // per_tensor nodes whose parameters never change
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
  return qg::RegisterDomain(options, api_base, qg::kLibrary,
                            [](const OrtApi& api, OrtSessionOptions* session) -> auto& {
                              return qg::RegistryFor(qg::ReadArithmetic(api, session)).domain();
                            });
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
