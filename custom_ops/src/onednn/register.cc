// libquantgraph_onednn's entry points: RegisterCustomOps (the four ops with oneDNN kernels,
// through the shared onnxruntime glue, and OneDnnPartition in com.quantgraph.onednn) and
// QuantgraphOnednnVersion. The library leaves every
// dnnl_* symbol undefined: the process must have loaded a libdnnl.so.3 with RTLD_GLOBAL first
// (quantgraph.backends.onednn does), and that one is what runs.
#include <cstring>
#include <string>

#include "common/ort_api.h"
#include "common/ort_ops.h"
#include "onednn/kernel.h"
#include "onednn/partition.h"
#include "onednn/partition_op.h"

namespace {

constexpr const char* kLibrary = "quantgraph onednn";
// Session config entry: which domains RegisterCustomOps adds. "all" (also when absent): the
// spec ops (com.quantgraph) and OneDnnPartition (com.quantgraph.onednn); "partition": only
// OneDnnPartition, for sessions whose spec ops another library (native, python) registers.
constexpr const char* kOpsKey = "quantgraph.onednn.ops";

bool PartitionOnly(const OrtApi& api, const OrtSessionOptions* options) {
  int has = 0;
  Ort::ThrowOnError(api.HasSessionConfigEntry(options, kOpsKey, &has));
  if (has == 0) return false;
  size_t size = 0;
  Ort::ThrowOnError(api.GetSessionConfigEntry(options, kOpsKey, nullptr, &size));
  std::string value(size + 1, '\0');
  size = value.size();
  Ort::ThrowOnError(api.GetSessionConfigEntry(options, kOpsKey, value.data(), &size));
  value.resize(strnlen(value.data(), value.size()));
  if (value == "all") return false;
  if (value == "partition") return true;
  throw Ort::Exception(std::string(kOpsKey) + " must be 'all' or 'partition', got '" + value + "'",
                       ORT_INVALID_ARGUMENT);
}

void RequireOnednn3() {
  // The C API used here is oneDNN 3.x's; another major may differ.
  const dnnl_version_t* v = dnnl_version();
  if (v->major != 3) {
    throw Ort::Exception(std::string(kLibrary) + ": needs oneDNN 3.x, the process loaded " +
                             qg::onednn::LoadedVersionDetails(),
                         ORT_FAIL);
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  bool partition_only = false;
  OrtStatus* status = qg::RegisterDomain(
      options, api_base, kLibrary,
      [&](const OrtApi& api, OrtSessionOptions* session) -> Ort::CustomOpDomain& {
        RequireOnednn3();
        partition_only = PartitionOnly(api, session);
        return qg::onednn::PartitionDomain();
      });
  if (status != nullptr || partition_only) return status;
  return qg::RegisterDomain(options, api_base, kLibrary,
                            [](const OrtApi&, OrtSessionOptions*) -> Ort::CustomOpDomain& {
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
