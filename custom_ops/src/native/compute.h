// The typed front of the kernels: one template per op family over (src, dst, zps) types,
// reached through a dispatch table keyed like the spec's supported-types table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

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

// A per_tensor call's kernel and parameters chosen once, for a node whose scale and zero point
// never change: each call is then src, dst and a count. (A node's call through onnxruntime's
// custom-op API costs more than its built-in QuantizeLinear; the choices ComputeFn makes per
// call were most of the difference.)
class FixedRun {
 public:
  virtual ~FixedRun() = default;
  virtual void Run(const void* src, void* dst, size_t elements, const ExecContext& ex) const = 0;
};

// The FixedRun of a per_tensor row for `params` (scales, scales_type, scale_count 1 and zps
// of CallArgs; the rest unused) on the given SIMD table; nullptr for rows without one.
using PrepareFn = std::unique_ptr<FixedRun> (*)(const CallArgs& params,
                                                const kernels::KernelTable& simd);

struct RowKernels {
  ComputeFn compute = nullptr;  // nullptr: the spec has no such row
  PrepareFn prepare = nullptr;
};

// Where the spec leaves rounding to the implementation: kOnnx (the default) is ONNX's
// QuantizeLinear, bit-exact with onnxruntime: saturate(rne(x / s) + zp). kOnednn is what oneDNN's
// CPU engine computes: saturate(rne(x * fl(1/s) + zp)) in float32, and float8 through f16 without
// saturation. Dequantize is the same in both.
enum class Arithmetic { kOnnx, kOnednn };

// The kernels for an (op, src, dst, zps) row of the spec in one arithmetic, zps 0 when absent
// (static ops: s32 when the zps attribute is set); compute nullptr when the spec has no such row.
RowKernels FindKernels(OpKind op, int src, int dst, int zps,
                       Arithmetic arithmetic = Arithmetic::kOnnx);

}  // namespace qg
