// libquantgraph_onednn's entry points: RegisterCustomOps (the four ops with oneDNN kernels,
// through the shared onnxruntime glue) and QuantgraphOnednnVersion. The library leaves every
// dnnl_* symbol undefined: the process must have loaded a libdnnl.so.3 with RTLD_GLOBAL first
// (quantgraph.backends.onednn does), and that one is what runs.
#include <string>

#include "common/ort_api.h"
#include "common/ort_ops.h"
#include "onednn/kernel.h"
#include "onednn/partition.h"

namespace {
constexpr const char* kLibrary = "quantgraph onednn";
}  // namespace

extern "C" {

__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  return qg::RegisterDomain(options, api_base, kLibrary,
                            [](const OrtApi&, OrtSessionOptions*) -> Ort::CustomOpDomain& {
                              // The C API used here is oneDNN 3.x's; another major may differ.
                              const dnnl_version_t* v = dnnl_version();
                              if (v->major != 3) {
                                throw Ort::Exception(std::string(kLibrary) +
                                                         ": needs oneDNN 3.x, the process loaded " +
                                                         qg::onednn::LoadedVersionDetails(),
                                                     ORT_FAIL);
                              }
                              static qg::Registry registry(qg::onednn::MakeKernel, kLibrary);
                              return registry.domain();
                            });
}

// The oneDNN this library runs on (the loaded one): "3.2.0 (40112196, cpu runtime OMP)".
__attribute__((visibility("default"))) const char* QuantgraphOnednnVersion(void) {
  static const std::string text = qg::onednn::LoadedVersionDetails();
  return text.c_str();
}

}  // extern "C"
