// The drivers of the per-tensor and per-channel calls: one Compute template over (op family,
// quantized type, zps type) that picks the kernel table and the kernels' parameters, and Drive,
// which walks the call's [outer, channels, inner] layout with them (long runs, a repeating
// pattern of parameters blocked over rows, or "flat" rows of a short pattern).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/spec.h"
#include "native/compute.h"
#include "native/geometry.h"
#include "native/kernels/kernels.h"
#include "native/parallel.h"
#include "native/params.h"

namespace qg::native {

using kernels::DequantizeRow;
using kernels::QuantizeRow;
using spec::kF8E4M3;
using spec::kF8E5M2;
using spec::kS8;
using spec::kU8;

// Rows per call of a vec kernel (K::RowBlock), which loads each column's parameters once for
// all of them. Blocking rows saves parameter loads but multiplies the streams read at once:
// * data in cache (no streaming stores): quantize blocks 8 rows: [1024, 1024] axis 1 at 1.3x of
//   the per-tensor time instead of 1.45x-1.6x one row at a time, [256, 256] 1.05x instead of 1.45x;
// * data streamed from memory: one row at a time while a row's parameters (scale and zero
//   point: 4 + 0, 2 or 4 bytes a column) fit in kRowParamBytesInL1 beside the stream
//   ([4096, 4096] with int16 zero points: 1.2x-1.3x, 8 rows: 1.45x), else 8 rows.
// Dequantize is so cheap that the parameter loads dominate: it blocks 4 rows always.
// (Measured on Zen 5, one thread.)
constexpr size_t kRowParamBytesInL1 = size_t{24} << 10;
// Patterns shorter than this repeat up to it, so that a kernel call has enough elements.
constexpr size_t kMinPeriod = 256;
// Patterns whose least common multiple with kernels::kPatternPad is at most this many elements,
// on s8/u8, go flat: each task's rows are one call that converts them as one run, the
// parameters repeating with that period (kernels::ChannelParams::padded; zero points as int16
// when all fit, else int32), with the per-tensor run's loop and prefetch. int16 zero points
// load fewer bytes beside each vector: [n / 384, 384] on one thread, quantize at 16M 1.12x of
// the per-tensor time instead of 1.21x; dequantize at 1M 1.27x instead of 1.40x (an earlier
// build, without the aligned head; 1.13x now).
// Measured on Zen 5 with benchmarks/compare_libraries.py (12 samples over 2 processes).
// [n / 16, 16], [n / 64, 64] and [n / 384, 384] on axis 1 (issue #16): 1.3x-2.2x of the
// per-tensor time at 16M elements with row blocks, ~1.0x-1.2x flat; docs/benchmarks.md,
// "Narrow innermost per-channel".
constexpr size_t kFlatMaxPeriod = 512;

// The kernel-table index of a quantized ONNX element type.
template <int kOnnx>
constexpr kernels::QType QTypeIndex() {
  static_assert(kOnnx == kS8 || kOnnx == kU8 || kOnnx == kF8E4M3 || kOnnx == kF8E5M2);
  return kOnnx == kS8       ? kernels::kS8
         : kOnnx == kU8     ? kernels::kU8
         : kOnnx == kF8E4M3 ? kernels::kF8E4M3
                            : kernels::kF8E5M2;
}

// An op family (K of Drive and Compute) in one arithmetic (kernels.h): its element types,
// parameter structs, kernels, and what the arithmetic asks of the call:
// * Scales: what the kernels take in place of the scales (oneDNN's quantize: reciprocals);
// * SimdTakes: whether the selected SIMD table is exact for these zero points, else the scalar
//   table runs the call.
template <Arithmetic kArithmetic>
struct QuantizeFamily {
  static size_t RowBlock(bool stream, bool params_in_l1) { return stream && params_in_l1 ? 1 : 8; }
  using Src = float;
  using Dst = uint8_t;
  using Row = QuantizeRow;
  template <typename Zp>
  using Vec = kernels::QuantizeVecOf<Zp>;
  using Kernels = kernels::QuantizeKernels;
  static const Kernels& Select(const kernels::KernelTable& t, kernels::QType q) {
    return kArithmetic == Arithmetic::kOnnx ? t.quantize[q] : t.quantize_onednn[q];
  }
  static const float* Scales(const CallArgs& a, ScaleBuffer& buffer) {
    if constexpr (kArithmetic == Arithmetic::kOnnx) return static_cast<const float*>(a.scales);
    return Reciprocals(a, buffer);
  }
  static bool SimdTakes(const kernels::ZeroPointRange& range) {
    return kArithmetic == Arithmetic::kOnednn || range.FitsSimd();  // oneDNN's: every zp
  }
};

template <Arithmetic kArithmetic>
struct DequantizeFamily {
  static size_t RowBlock(bool, bool) { return 4; }
  using Src = uint8_t;
  using Dst = float;
  using Row = DequantizeRow;
  template <typename Zp>
  using Vec = kernels::DequantizeVecOf<Zp>;
  using Kernels = kernels::DequantizeKernels;
  static const Kernels& Select(const kernels::KernelTable& t, kernels::QType q) {
    return kArithmetic == Arithmetic::kOnnx ? t.dequantize[q] : t.dequantize_onednn[q];
  }
  static const float* Scales(const CallArgs& a, ScaleBuffer&) {
    return static_cast<const float*>(a.scales);
  }
  // oneDNN subtracts float(zp): the SIMD tables' int32 difference is the same while float(zp)
  // is exact.
  static bool SimdTakes(const kernels::ZeroPointRange& range) {
    return kArithmetic == Arithmetic::kOnnx ? range.FitsSimd() : range.FitsFloat();
  }
};

// The call as a [rows, period] matrix plus a last partial row, with per-column parameters p,
// cut into tasks of about a chunk (blocks of rows, and of columns when a row alone is larger);
// the kernel converts row_block rows per call, loading each column's parameters once for all
// of them. Padded (flat) patterns: one call per task with all its rows, which the kernel
// converts as one run.
template <class K, typename Zp, typename VecFn>
void DriveVec(const CallArgs& a, const ExecContext& ex, size_t period,
              const typename K::template Vec<Zp>& p, VecFn vec, bool stream, void (*fence)()) {
  const auto* x = static_cast<const typename K::Src*>(a.src);
  auto* y = static_cast<typename K::Dst*>(a.dst);
  const size_t rows = a.elements / period;
  const size_t rest = a.elements % period;
  const size_t chunk = ChunkFor(a.elements);
  const size_t param_bytes = sizeof(float) + (p.zp != nullptr ? sizeof(Zp) : 0);
  const size_t row_block =
      p.padded ? rows : K::RowBlock(stream, period * param_bytes <= kRowParamBytesInL1);
  const size_t cols_per_task = period < chunk ? period : chunk;
  const size_t col_tasks = (period + cols_per_task - 1) / cols_per_task;
  const size_t rows_per_task = chunk / cols_per_task > 0 ? chunk / cols_per_task : 1;
  const size_t row_tasks = (rows + rows_per_task - 1) / rows_per_task;
  ParallelTasks(ex, row_tasks * col_tasks, a.elements, fence, [&](size_t task) {
    const size_t r0 = task / col_tasks * rows_per_task;
    const size_t r1 = r0 + rows_per_task < rows ? r0 + rows_per_task : rows;
    const size_t c0 = task % col_tasks * cols_per_task;
    const size_t c1 = c0 + cols_per_task < period ? c0 + cols_per_task : period;
    const typename K::template Vec<Zp> params{p.scale + c0, p.zp != nullptr ? p.zp + c0 : nullptr,
                                              p.zp_nonnegative,
                                              p.padded && c0 == 0 && c1 == period};
    for (size_t r = r0; r < r1; r += row_block) {
      const size_t block = r + row_block < r1 ? row_block : r1 - r;
      const size_t offset = r * period + c0;
      vec(x + offset, y + offset, c1 - c0, params, block, period);
    }
  });
  if (rest != 0) {
    const size_t offset = rows * period;
    vec(x + offset, y + offset, rest, p, 1, period);
    if (fence != nullptr) fence();
  }
}

// One scale and zero point for all `n` elements: the run kernel over ranges of them.
template <class K, typename RunFn>
void RunWhole(const ExecContext& ex, const void* src, void* dst, size_t n, RunFn run,
              const typename K::Row& row, void (*fence)()) {
  const auto* x = static_cast<const typename K::Src*>(src);
  auto* y = static_cast<typename K::Dst*>(dst);
  ParallelRanges(ex, n, fence, [&](size_t b, size_t e) { run(x + b, y + b, e - b, row); });
}

// Runs one call over [outer, channels, inner] with the chosen kernels: per-tensor as one run;
// long runs (inner >= kMinRun) one kernel call per run with the channel's scalars, the range
// cut into equal chunks for the thread pool (a chunk starts anywhere in a run); the innermost
// axis and other short runs with per-element parameters vectorized across channels (the
// caller's arrays themselves when inner == 1, else a pattern of channels * inner), blocked
// over rows so that the parameters are loaded once per block of rows.
template <class K>
void Drive(const CallArgs& a, const ExecContext& ex, const float* scale, const int32_t* zp,
           const kernels::ZeroPointRange& range, const typename K::Kernels& k, bool stream,
           void (*fence)(), bool flat_kernels) {
  const Geometry g = MakeGeometry(a);
  const auto* x = static_cast<const typename K::Src*>(a.src);
  auto* y = static_cast<typename K::Dst*>(a.dst);
  const auto run = k.run[zp != nullptr][stream];
  if (g.channels == 1) {
    RunWhole<K>(ex, a.src, a.dst, a.elements, run,
                typename K::Row{scale[0], zp != nullptr ? zp[0] : 0}, fence);
    return;
  }
  if (!UsePattern(g)) {
    ParallelRanges(ex, a.elements, fence, [&](size_t b, size_t e) {
      WalkRuns(g, b, e, [&](size_t p, size_t len, size_t c) {
        run(x + p, y + p, len, typename K::Row{scale[c], zp != nullptr ? zp[c] : 0});
      });
    });
    return;
  }
  // One period of parameters covers channels * inner elements; short periods repeat so that a
  // kernel call has at least kMinPeriod elements.
  const size_t base = g.channels * g.inner;
  const size_t period = base < kMinPeriod ? base * ((kMinPeriod + base - 1) / base) : base;
  std::vector<float> scale_buffer;
  // The flat period: the least common multiple of the pattern and kPatternPad (64 for 16 or
  // 64 columns: one block of 4 AVX-512 vectors, whose parameters the kernel keeps in registers).
  const size_t flat = base / std::gcd(base, kernels::kPatternPad) * kernels::kPatternPad;
  if (flat_kernels && flat <= kFlatMaxPeriod) {
    const size_t pad = kernels::kPatternPad;
    // Every task starts at a multiple of the period (of 64 elements), so at the same alignment.
    const size_t misaligned = reinterpret_cast<uintptr_t>(a.dst) % 64;
    const size_t head = (misaligned == 0 ? 0 : 64 - misaligned) / sizeof(typename K::Dst);
    const float* scales = Periodic(scale, g, flat, scale_buffer, pad, head);
    if (zp != nullptr && range.FitsInt16()) {
      std::vector<int16_t> zp16;
      const int16_t* zps = Periodic(zp, g, flat, zp16, pad, head);
      DriveVec<K>(a, ex, flat,
                  typename K::template Vec<int16_t>{scales, zps, range.lo >= 0, true},
                  k.vec16[stream], stream, fence);
      return;
    }
    std::vector<int32_t> zp_buffer;
    const int32_t* zps = zp != nullptr ? Periodic(zp, g, flat, zp_buffer, pad, head) : nullptr;
    DriveVec<K>(a, ex, flat,
                typename K::template Vec<int32_t>{scales, zps, range.lo >= 0, true},
                k.vec[zp != nullptr][stream], stream, fence);
    return;
  }
  const float* scales = Periodic(scale, g, period, scale_buffer);
  if (zp != nullptr && range.FitsInt16()) {
    std::vector<int16_t> zp_buffer;
    const int16_t* zps = Periodic(zp, g, period, zp_buffer);
    DriveVec<K>(a, ex, period, typename K::template Vec<int16_t>{scales, zps, range.lo >= 0},
                k.vec16[stream], stream, fence);
  } else {
    std::vector<int32_t> zp_buffer;
    const int32_t* zps = zp != nullptr ? Periodic(zp, g, period, zp_buffer) : nullptr;
    DriveVec<K>(a, ex, period, typename K::template Vec<int32_t>{scales, zps, range.lo >= 0},
                k.vec[zp != nullptr][stream], stream, fence);
  }
}

// ---- one call ---------------------------------------------------------------------------

// What a call's parameters decide (family K, zero points of type Zp, void: none): the zero
// points as int32 (nullptr when none or all zero), the table exact for them (SIMD unless they
// are too large) and the scales as the kernels take them.
template <class K, typename Zp>
struct ParamChoice {
  ZpBuffer zp_buffer;
  ScaleBuffer scale_buffer;
  const int32_t* zp;
  kernels::ZeroPointRange range;
  const kernels::KernelTable* table;
  const float* scale;

  ParamChoice(const CallArgs& a, const kernels::KernelTable& simd)
      : zp(ZeroPoints<Zp>(a, zp_buffer)),
        range(zp, zp != nullptr ? a.scale_count : 0),
        table(K::SimdTakes(range) ? &simd : kernels::ScalarTable()),
        scale(K::Scales(a, scale_buffer)) {
    if (range.AllZero()) zp = nullptr;
  }
  ParamChoice(const ParamChoice&) = delete;  // zp and scale may point into the buffers
  ParamChoice& operator=(const ParamChoice&) = delete;
};

// A call of either family (K) on quantized type kQuantized with zero points of type Zp.
template <class K, int kQuantized, typename Zp>
void Compute(const CallArgs& a, const ExecContext& ex) {
  const ParamChoice<K, Zp> c(a, *ex.table);
  const bool stream = a.elements * sizeof(typename K::Dst) >= kStreamMinBytes;
  constexpr bool kFlat = kQuantized == kS8 || kQuantized == kU8;  // kernels with a flat path
  Drive<K>(a, ex, c.scale, c.zp, c.range, K::Select(*c.table, QTypeIndex<kQuantized>()), stream,
           stream ? c.table->fence : nullptr, kFlat);
}

// Compute's per_tensor path with its choices made once.
template <class K, int kQuantized, typename Zp>
class PerTensorRun final : public FixedRun {
 public:
  PerTensorRun(const CallArgs& params, const kernels::KernelTable& simd) {
    const ParamChoice<K, Zp> c(params, simd);
    const auto& k = K::Select(*c.table, QTypeIndex<kQuantized>());
    row_ = typename K::Row{c.scale[0], c.zp != nullptr ? c.zp[0] : 0};
    run_[0] = k.run[c.zp != nullptr][0];
    run_[1] = k.run[c.zp != nullptr][1];
    fence_ = c.table->fence;
  }

  void Run(const void* src, void* dst, size_t elements, const ExecContext& ex) const override {
    // Below kParallelMin RunWhole runs on this thread without streaming stores (no fence).
    static_assert((kParallelMin - 1) * sizeof(typename K::Dst) < kStreamMinBytes);
    if (elements < kParallelMin) {  // RunWhole's path for it, without its code
      run_[0](static_cast<const typename K::Src*>(src), static_cast<typename K::Dst*>(dst),
              elements, row_);
      return;
    }
    const bool stream = elements * sizeof(typename K::Dst) >= kStreamMinBytes;
    RunWhole<K>(ex, src, dst, elements, run_[stream], row_, stream ? fence_ : nullptr);
  }

 private:
  typename K::Row row_{};
  using RunFn = std::decay_t<decltype(std::declval<typename K::Kernels>().run[0][0])>;
  RunFn run_[2] = {};  // [stream]
  void (*fence_)() = nullptr;
};

template <class K, int kQuantized, typename Zp>
std::unique_ptr<FixedRun> PreparePerTensor(const CallArgs& params,
                                           const kernels::KernelTable& simd) {
  return std::make_unique<PerTensorRun<K, kQuantized, Zp>>(params, simd);
}

}  // namespace qg::native
