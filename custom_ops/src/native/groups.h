// The driver of DynamicDequantize's rows other than 8-bit -> f32 per tensor / channel: 4-bit
// sources, f16/bf16 dst (and scales), per_group (every qtype as a grouping, geometry.h).
#pragma once

#include "native/compute.h"

namespace qg::native {

// One call of the per-group kernels; src, dst and zps_type are the call's ONNX element types
// (zps_type 0: no zero points).
void ComputeGroups(const CallArgs& a, const ExecContext& ex, int src, int dst, int zps_type);

}  // namespace qg::native
