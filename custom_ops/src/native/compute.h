// The typed front of the kernels: one template per op family over (src, dst, zps) types,
// reached through a dispatch table keyed like the spec's supported-types table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ort_api.h"
#include "common/spec.h"
#include "native/kernels/kernels.h"

namespace qg {

// One validated call. Sizes agree with the spec (scales count == channels, zps count too).
struct CallArgs {
  const void* src;
  void* dst;
  const int64_t* dims;
  size_t rank;
  size_t elements;
  int64_t axis;  // resolved per_channel axis, -1 for per_tensor and per_group
  const void* scales;  // of scales_type (f32 for quantize ops and static ops)
  int scales_type;
  size_t scale_count;
  const void* zps;  // nullptr: no zero points; else of the dispatch key's zps type (4-bit: packed)
  // per_group: group_shape and the scales' (and zps') shape, `rank` entries each; else nullptr.
  const int64_t* group_shape;
  const int64_t* scales_dims;
};

struct ExecContext {
  const kernels::KernelTable* table;  // kernels of the selected ISA
  OrtKernelContext* ort;              // for the intra-op thread pool; nullptr: this thread only
};

using ComputeFn = void (*)(const CallArgs&, const ExecContext&);

// Where the spec leaves rounding to the implementation: kOnnx (the default) is ONNX's
// QuantizeLinear, bit-exact with onnxruntime: saturate(rne(x / s) + zp). kOnednn is what oneDNN's
// CPU engine computes: saturate(rne(x * fl(1/s) + zp)) in float32, and float8 through f16 without
// saturation. Dequantize is the same in both.
enum class Arithmetic { kOnnx, kOnednn };

// The kernel for an (op, src, dst, zps) row of the spec in one arithmetic, zps 0 when absent
// (static ops: s32 when the zps attribute is set); nullptr when the spec has no such row.
ComputeFn FindCompute(OpKind op, int src, int dst, int zps,
                      Arithmetic arithmetic = Arithmetic::kOnnx);

}  // namespace qg
