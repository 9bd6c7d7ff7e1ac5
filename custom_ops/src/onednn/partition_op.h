// The OneDnnPartition op (partition contract, section 3): one node running a unit of ops that
// oneDNN Graph compiles as one partition, described by its `description` attribute. It lives
// in its own domain so that a session can register it next to another library's
// com.quantgraph ops (onnxruntime refuses one domain registered twice: "Domain already set
// in registry").
#pragma once

#include <memory>

#include "common/ort_api.h"
#include "common/ort_ops.h"

namespace qg::onednn {

inline constexpr const char* kPartitionDomain = "com.quantgraph.onednn";
inline constexpr const char* kPartitionOp = "OneDnnPartition";

// The domain with the op, alive as long as the library.
Ort::CustomOpDomain& PartitionDomain();

// The node's kernel (partition_kernel.cc): throws Ort::Exception naming the node when its
// description is bad, or does not compile for input shapes known now.
std::unique_ptr<OpKernel> MakePartitionKernel(const OrtApi& api, const OrtKernelInfo* info);

}  // namespace qg::onednn
