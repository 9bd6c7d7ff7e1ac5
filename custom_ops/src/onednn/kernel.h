// The kernel of libquantgraph_onednn: a node checked by the spec's rules (node.h, the same
// messages as the native library), then computed by oneDNN as a compiled single-op partition
// per (shapes), cached in the kernel. Whatever oneDNN refuses, or would compute differently from
// its own spec, is an error naming the node; nothing is computed any other way.
#pragma once

#include <memory>

#include "common/ort_api.h"
#include "common/ort_ops.h"
#include "common/spec.h"

namespace qg::onednn {

std::unique_ptr<OpKernel> MakeKernel(OpKind kind, const OrtApi& api, const OrtKernelInfo* info);

}  // namespace qg::onednn
