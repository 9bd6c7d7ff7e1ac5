// The onnxruntime side of a quantgraph kernel library, shared by libquantgraph_ops (native
// kernels) and libquantgraph_onednn (oneDNN Graph): the four ops of domain com.quantgraph as
// OrtCustomOps, their output type and shape inference, and the conversion of exceptions into
// onnxruntime statuses. A library supplies only the kernel object, through a factory.
//
// Each op name is registered once per dst type of its spec table, all with type-agnostic
// inputs: onnxruntime then accepts any input types, the kernel reports unsupported ones with
// the spec's wording, and the op's InferOutputShapeFn picks the output type (output_dtype,
// zps) that selects the matching registration. Errors become onnxruntime errors (statuses),
// never aborts: nothing throws across the C API.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/ort_api.h"
#include "common/spec.h"

namespace qg {

// One node's kernel; onnxruntime may call Compute from several threads at once.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void Compute(OrtKernelContext* context) const = 0;
};

// Creates the kernel of a node at session creation (throws SpecError, Ort::Exception or any
// std::exception to refuse the node).
using KernelFactory =
    std::function<std::unique_ptr<OpKernel>(OpKind, const OrtApi&, const OrtKernelInfo*)>;

// The OrtApi handed to RegisterCustomOps; the first call sets it (and Ort::InitApi).
void InitOrtApi(const OrtApi* api);
const OrtApi& GetOrtApi();

// The status for the exception in flight (call only inside a catch block): SpecError ->
// ORT_INVALID_ARGUMENT with its text, Ort::Exception -> its code and text, anything else ->
// ORT_FAIL prefixed with `library` ("quantgraph native: ...").
OrtStatus* ToStatus(const OrtApi& api, const char* library) noexcept;

// The body of a library's exported RegisterCustomOps: the OrtApi set up (InitOrtApi), then the
// domain `domain_for` returns added to the session's options; any exception becomes the status.
using DomainFor = std::function<Ort::CustomOpDomain&(const OrtApi&, OrtSessionOptions*)>;
OrtStatus* RegisterDomain(OrtSessionOptions* options, const OrtApiBase* api_base,
                          const char* library, const DomainFor& domain_for) noexcept;

// Throws `status` (not null) as an Ort::Exception. Out of line and cold, so that a hot path
// that checks a chain of C API statuses carries one call instead of an inlined throw a check.
[[noreturn]] void ThrowStatus(OrtStatus* status);

// The element type onnxruntime gave the node's output 0 (0 when unknown).
int OutputElementType(const OrtApi& api, const OrtKernelInfo* info);

struct OpDef;

// Every registration of the four ops (one per op and dst type; the default dst first, since
// onnxruntime infers the first one's type), with kernels from `factory`, in one domain object
// that lives as long as the registry.
class Registry {
 public:
  Registry(KernelFactory factory, const char* library);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Ort::CustomOpDomain& domain() { return domain_; }

 private:
  KernelFactory factory_;
  const char* library_;
  std::vector<std::unique_ptr<OpDef>> ops_;
  Ort::CustomOpDomain domain_{spec::kDomain};
};

}  // namespace qg
