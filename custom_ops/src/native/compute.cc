#include "native/compute.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "native/kernels/convert.h"

namespace qg {
namespace {

using kernels::DequantizeRow;
using kernels::DequantizeVec;
using kernels::QuantizeRow;
using kernels::QuantizeVec;

// The spec's element types (generated/op_spec.h).
using spec::kBF16;
using spec::kF16;
using spec::kF32;
using spec::kF8E4M3;
using spec::kF8E5M2;
using spec::kS32;
using spec::kS4;
using spec::kS8;
using spec::kU4;
using spec::kU8;

// Work below kParallelMin elements runs on the calling thread; above it in tasks of
// ChunkFor(n) elements on the session's intra-op pool: at least kMinChunk (so a task is worth
// its scheduling), else about n / kTargetTasks (enough tasks to balance the pool's threads).
constexpr size_t kParallelMin = size_t{1} << 15;
constexpr size_t kMinChunk = size_t{1} << 14;
constexpr size_t kTargetTasks = 64;

size_t ChunkFor(size_t n) {
  const size_t chunk = (n / kTargetTasks + 63) & ~size_t{63};
  return chunk < kMinChunk ? kMinChunk : chunk;
}
// Runs shorter than this use the per-element-parameter kernels over a repeating pattern of
// channel parameters (channels * inner elements, at most kMaxPattern unless inner == 1)
// instead of one call per run.
constexpr size_t kMinRun = 16;
constexpr size_t kMaxPattern = size_t{1} << 16;
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

// ---- geometry and threading --------------------------------------------------------------

// The call as [outer, channels, inner]: channel c's parameters hold for each run of `inner`
// consecutive elements, runs cycling through the channels. Per-tensor is channels == 1.
struct Geometry {
  size_t channels = 1;
  size_t inner = 1;
};

Geometry MakeGeometry(const CallArgs& a) {
  Geometry g;
  if (a.axis < 0) {
    g.inner = a.elements;
    return g;
  }
  g.channels = static_cast<size_t>(a.dims[a.axis]);
  for (size_t d = static_cast<size_t>(a.axis) + 1; d < a.rank; ++d) {
    g.inner *= static_cast<size_t>(a.dims[d]);
  }
  if (g.channels == 1) g.inner = a.elements;
  return g;
}

// body(task) for task in [0, tasks): on the calling thread when the call is small (elements <
// kParallelMin), else on the session's intra-op pool. fence (when set) runs after each task's
// streaming stores.
template <class Body>
void ParallelTasks(const ExecContext& ex, size_t tasks, size_t elements, void (*fence)(),
                   const Body& body) {
  if (ex.ort == nullptr || elements < kParallelMin || tasks < 2) {
    for (size_t t = 0; t < tasks; ++t) body(t);
    if (fence != nullptr) fence();
    return;
  }
  struct Shared {
    const Body* body;
    void (*fence)();
  } shared{&body, fence};
  Ort::KernelContext(ex.ort).ParallelFor(
      [](void* data, size_t task) {
        const auto* s = static_cast<const Shared*>(data);
        (*s->body)(task);
        if (s->fence != nullptr) s->fence();
      },
      tasks, 0, &shared);
}

// body(begin, end) over [0, n) in chunks of ChunkFor(n) elements.
template <class Body>
void ParallelRanges(const ExecContext& ex, size_t n, void (*fence)(), const Body& body) {
  if (ex.ort == nullptr || n < kParallelMin) {
    body(0, n);
    if (fence != nullptr) fence();
    return;
  }
  const size_t chunk = ChunkFor(n);
  ParallelTasks(ex, (n + chunk - 1) / chunk, n, fence, [&](size_t task) {
    const size_t begin = task * chunk;
    body(begin, begin + chunk < n ? begin + chunk : n);
  });
}

// Walks [begin, end) of a channel-cycled layout: run(offset, length, channel) per run.
template <class RunFn>
void WalkRuns(const Geometry& g, size_t begin, size_t end, const RunFn& run) {
  size_t c = (begin / g.inner) % g.channels;
  size_t i = begin % g.inner;
  for (size_t p = begin; p < end;) {
    const size_t len = g.inner - i < end - p ? g.inner - i : end - p;
    run(p, len, c);
    p += len;
    i = 0;
    if (++c == g.channels) c = 0;
  }
}

// One period of per-element parameters from per-channel `values`: channel c's repeated `inner`
// times, channels in order, cycling; `values` itself when it is one already. `pad` more
// elements continue the pattern (kernels::ChannelParams::padded).
// `head`: with pad, the pattern starts in the buffer so that element `head` (where a flat
// kernel's aligned loop starts, kernels::HeadElements of the output) is 64-byte aligned: the
// kernel's parameter loads then never straddle cache lines ([n / 384, 384] dequantize at 1M on
// one thread: 1.26x of the per-tensor time with the stores misaligned instead, 1.42x with the
// parameter loads misaligned).
template <typename T, typename U>
const T* Periodic(const U* values, const Geometry& g, size_t period, std::vector<T>& buffer,
                  size_t pad = 0, size_t head = 0) {
  if constexpr (std::is_same_v<T, U>) {
    if (period == g.channels && pad == 0) return values;
  }
  constexpr size_t kAlign = 64;
  buffer.resize(period + pad + (pad != 0 ? kAlign / sizeof(T) : 0));
  T* out = buffer.data();
  if (pad != 0) {
    while (reinterpret_cast<uintptr_t>(out + head) % kAlign != 0) ++out;
  }
  if (g.inner == 1) {  // the innermost axis: a plain loop that vectorizes
    for (size_t q = 0; q < period; q += g.channels) {
      for (size_t c = 0; c < g.channels; ++c) out[q + c] = static_cast<T>(values[c]);
    }
  } else {
    for (size_t q = 0; q < period;) {
      for (size_t c = 0; c < g.channels; ++c) {
        const T v = static_cast<T>(values[c]);
        for (size_t j = 0; j < g.inner; ++j) out[q++] = v;
      }
    }
  }
  for (size_t q = 0; q < pad; ++q) out[period + q] = out[q % period];
  return out;
}

// The innermost axis (inner == 1) always; other short runs while the pattern stays small.
bool UsePattern(const Geometry& g) {
  return g.channels > 1 &&
         (g.inner == 1 || (g.inner < kMinRun && g.channels * g.inner <= kMaxPattern));
}

// ---- element types -----------------------------------------------------------------------

// The kernel-table index of a quantized ONNX element type.
template <int kOnnx>
constexpr kernels::QType QTypeIndex() {
  static_assert(kOnnx == kS8 || kOnnx == kU8 || kOnnx == kF8E4M3 || kOnnx == kF8E5M2);
  return kOnnx == kS8       ? kernels::kS8
         : kOnnx == kU8     ? kernels::kU8
         : kOnnx == kF8E4M3 ? kernels::kF8E4M3
                            : kernels::kF8E5M2;
}

// Zero points as int32: s32 ones (the static ops' attribute too) are used in place; s8/u8
// ones are widened (into `small` up to its size, so per-tensor calls allocate nothing). nullptr
// when the call has none.
struct ZpBuffer {
  int32_t small[16];
  std::vector<int32_t> large;
};

template <typename Zp>
const int32_t* ZeroPoints(const CallArgs& a, ZpBuffer& buffer) {
  if constexpr (std::is_void_v<Zp>) {
    return nullptr;
  } else if constexpr (std::is_same_v<Zp, int32_t>) {
    return static_cast<const int32_t*>(a.zps);
  } else {
    const Zp* z = static_cast<const Zp*>(a.zps);
    int32_t* out = buffer.small;
    if (a.scale_count > sizeof buffer.small / sizeof buffer.small[0]) {
      buffer.large.resize(a.scale_count);
      out = buffer.large.data();
    }
    for (size_t i = 0; i < a.scale_count; ++i) out[i] = z[i];
    return out;
  }
}


// Output size from which stores bypass the cache (non-temporal): the result will not be read
// back from cache before it is evicted anyway, and skipping the read-for-ownership saves
// memory traffic.
constexpr size_t kStreamMinBytes = size_t{8} << 20;

// Per-call scale values: the call's own, or (oneDNN's quantize) their reciprocals, computed once
// here so that the kernels multiply (in `small` up to its size: per-tensor calls allocate
// nothing).
struct ScaleBuffer {
  float small[16];
  std::vector<float> large;
};

// fl(1 / s) for each scale, as oneDNN computes it (float32 division, correctly rounded: the
// static op's `1.f / s` in graph/backend/dnnl/passes/lower.cpp, the dynamic op's eltwise pow
// with beta -1, a vdivps).
const float* Reciprocals(const CallArgs& a, ScaleBuffer& buffer) {
  const auto* s = static_cast<const float*>(a.scales);
  float* out = buffer.small;
  if (a.scale_count > sizeof buffer.small / sizeof buffer.small[0]) {
    buffer.large.resize(a.scale_count);
    out = buffer.large.data();
  }
  for (size_t i = 0; i < a.scale_count; ++i) out[i] = 1.0f / s[i];
  return out;
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
    const typename K::Row row{scale[0], zp != nullptr ? zp[0] : 0};
    ParallelRanges(ex, a.elements, fence,
                   [&](size_t b, size_t e) { run(x + b, y + b, e - b, row); });
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

// A call of either family (K) on quantized type kQuantized with zero points of type Zp (void:
// none): one pass over the zero points picks the table (SIMD unless they are too large), drops
// all-zero ones and tells Drive what the vec kernels may take.
template <class K, int kQuantized, typename Zp>
void Compute(const CallArgs& a, const ExecContext& ex) {
  ZpBuffer buffer;
  const int32_t* zp = ZeroPoints<Zp>(a, buffer);
  const kernels::ZeroPointRange range(zp, zp != nullptr ? a.scale_count : 0);
  const kernels::KernelTable& table = K::SimdTakes(range) ? *ex.table : *kernels::ScalarTable();
  const bool stream = a.elements * sizeof(typename K::Dst) >= kStreamMinBytes;
  constexpr bool kFlat = kQuantized == kS8 || kQuantized == kU8;  // kernels with a flat path
  ScaleBuffer scales;
  Drive<K>(a, ex, K::Scales(a, scales), range.AllZero() ? nullptr : zp, range,
           K::Select(table, QTypeIndex<kQuantized>()), stream, stream ? table.fence : nullptr,
           kFlat);
}

// ---- dequantize with a parameter per group ----------------------------------------------
//
// DynamicDequantize's rows other than 8-bit -> f32 per tensor / channel: 4-bit sources,
// f16/bf16 dst (and scales), per_group. Every qtype is a grouping: element (i_0, ..., i_r-1)
// uses parameter (i_0 / g_0, ..., i_r-1 / g_r-1) of the scales' row-major layout, with
// g = group_shape for per_group, g_d = dims[d] except g_axis = 1 for per_channel, g = dims for
// per_tensor.

// The call's dims and groups simplified: dims of 1 dropped, and neighbours merged where the
// parameter index stays one row-major index (a group that spans its whole dim, or a group of 1
// before the next dim). [K, N] by [1, 32] becomes [K * N] by [32]; per_channel becomes
// [outer, channels * inner] by [outer, inner]; per_tensor [n] by [n].
struct Grouping {
  std::vector<size_t> dims;
  std::vector<size_t> groups;
};

Grouping MakeGrouping(const CallArgs& a) {
  Grouping g;
  for (size_t d = 0; d < a.rank; ++d) {
    const auto dim = static_cast<size_t>(a.dims[d]);
    size_t group = dim;
    if (a.group_shape != nullptr) {
      group = static_cast<size_t>(a.group_shape[d]);
    } else if (a.axis >= 0 && d == static_cast<size_t>(a.axis)) {
      group = 1;
    }
    if (dim == 1) continue;
    if (!g.dims.empty()) {
      size_t& last_dim = g.dims.back();
      size_t& last_group = g.groups.back();
      if (group == dim) {  // the parameter does not change along this dim
        last_group *= dim;
        last_dim *= dim;
        continue;
      }
      if (last_group == 1) {  // one parameter per index of the previous dim
        last_group = group;
        last_dim *= dim;
        continue;
      }
    }
    g.dims.push_back(dim);
    g.groups.push_back(group);
  }
  if (g.dims.empty()) {
    g.dims.push_back(1);
    g.groups.push_back(1);
  }
  return g;
}

constexpr int GroupSrcIndex(int src) {
  return src == kS8 ? kernels::kGroupS8
         : src == kU8 ? kernels::kGroupU8
         : src == kS4 ? kernels::kGroupS4
                      : kernels::kGroupU4;
}

constexpr int GroupDstIndex(int dst) {
  return dst == kF32 ? kernels::kGroupF32 : dst == kF16 ? kernels::kGroupF16 : kernels::kGroupBF16;
}

constexpr size_t DstSize(int dst) { return dst == kF32 ? 4 : 2; }

// count scales from index first, as float32 (f16/bf16 exactly converted).
void ScalesAsFloat(const void* scales, int type, size_t first, size_t count, float* out) {
  if (type == kF16) {
    const auto* h = static_cast<const uint16_t*>(scales) + first;
    for (size_t i = 0; i < count; ++i) out[i] = kernels::HalfToFloat(h[i]);
  } else {
    const auto* b = static_cast<const uint16_t*>(scales) + first;
    for (size_t i = 0; i < count; ++i) out[i] = kernels::BFloat16ToFloat(b[i]);
  }
}

// count zero points from index first, as int32 (4-bit ones unpacked).
void ZpsAsInt32(const void* zps, int type, size_t first, size_t count, int32_t* out) {
  switch (type) {
    case kS8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<const int8_t*>(zps)[first + i];
      break;
    case kU8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<const uint8_t*>(zps)[first + i];
      break;
    case kS4:
    case kU4:
      for (size_t i = 0; i < count; ++i) out[i] = kernels::Nibble(zps, first + i, type == kS4);
      break;
    default:
      std::copy_n(static_cast<const int32_t*>(zps) + first, count, out);
  }
}

// Parameters converted for one kernel call at most (f32 scales and s32 zero points are used in
// place).
constexpr size_t kParamBlock = 1024;

void ComputeGroups(const CallArgs& a, const ExecContext& ex, int src, int dst, int zps_type) {
  const Grouping grouping = MakeGrouping(a);
  const size_t m = grouping.dims.size();
  const size_t length = grouping.dims[m - 1];  // a row
  const size_t group = grouping.groups[m - 1];
  const size_t params_per_row = length / group;
  const size_t rows = a.elements / length;
  // Rows in aligned blocks of `share` use the same parameter row.
  const size_t share = m >= 2 ? grouping.groups[m - 2] : 1;
  // The parameter row of a row: its leading indices divided by their groups, row-major.
  std::vector<size_t> param_stride(m, 1);
  for (size_t k = m - 1; k-- > 0;) {
    param_stride[k] =
        k + 2 < m ? param_stride[k + 1] * (grouping.dims[k + 1] / grouping.groups[k + 1]) : 1;
  }
  auto param_row = [&](size_t row) {
    size_t index = 0;
    for (size_t k = m - 1; k-- > 0;) {
      const size_t i = row % grouping.dims[k];
      row /= grouping.dims[k];
      index += i / grouping.groups[k] * param_stride[k];
    }
    return index;
  };

  // Large s32 zero points need the scalar table (one pass over them, s32 only: the others fit).
  bool fits = true;
  if (zps_type == kS32) {
    fits = kernels::ZeroPointRange(static_cast<const int32_t*>(a.zps), a.scale_count).FitsFloat();
  }
  const kernels::KernelTable& table = fits ? *ex.table : *kernels::ScalarTable();
  const bool stream = a.elements * DstSize(dst) >= kStreamMinBytes;
  const kernels::DequantizeGroupFn kernel =
      table.dequantize_group[GroupSrcIndex(src)][GroupDstIndex(dst)][stream];

  const size_t chunk = ChunkFor(a.elements);
  const size_t cols_per_task = length <= chunk ? length : chunk;
  const size_t col_tasks = (length + cols_per_task - 1) / cols_per_task;
  size_t rows_per_task = chunk / cols_per_task > 0 ? chunk / cols_per_task : 1;
  if (rows_per_task > share) rows_per_task -= rows_per_task % share;  // whole blocks
  const size_t row_tasks = (rows + rows_per_task - 1) / rows_per_task;
  const bool direct_scales = a.scales_type == kF32;
  const bool direct_zps = zps_type == kS32 || a.zps == nullptr;
  auto* y = static_cast<char*>(a.dst);
  ParallelTasks(ex, row_tasks * col_tasks, a.elements, stream ? table.fence : nullptr,
                [&](size_t task) {
                  alignas(64) float scale_buffer[kParamBlock];
                  alignas(64) int32_t zp_buffer[kParamBlock];
                  const size_t r0 = task / col_tasks * rows_per_task;
                  const size_t r1 = std::min(r0 + rows_per_task, rows);
                  const size_t c0 = task % col_tasks * cols_per_task;
                  const size_t c1 = std::min(c0 + cols_per_task, length);
                  for (size_t c = c0; c < c1;) {
                    const size_t first = c / group;  // parameter of element c in its row
                    const size_t c_end = std::min(c1, (first + kParamBlock) * group);
                    const size_t count = (c_end - 1) / group - first + 1;
                    for (size_t r = r0; r < r1;) {
                      const size_t r_end = std::min(r1, (r / share + 1) * share);
                      const size_t at = param_row(r) * params_per_row + first;
                      const float* scale = static_cast<const float*>(a.scales) + at;
                      if (!direct_scales) {
                        ScalesAsFloat(a.scales, a.scales_type, at, count, scale_buffer);
                        scale = scale_buffer;
                      }
                      const int32_t* zp = nullptr;
                      if (a.zps != nullptr) {
                        zp = static_cast<const int32_t*>(a.zps) + at;
                        if (!direct_zps) {
                          ZpsAsInt32(a.zps, zps_type, at, count, zp_buffer);
                          zp = zp_buffer;
                        }
                      }
                      const size_t offset = r * length + c;
                      kernel(kernels::GroupArgs{a.src, offset, length, y + offset * DstSize(dst),
                                                length, c_end - c, r_end - r, scale, zp, group,
                                                c % group});
                      r = r_end;
                    }
                    c = c_end;
                  }
                });
}

// DynamicDequantize (and the static op's rows, which are all 8-bit -> f32): the 8-bit -> f32
// per tensor / channel calls keep the Compute path, everything else goes per group (the same
// kernels in both arithmetics: float(x) - float(zp) as oneDNN's reorder while |zp| <=
// kFloatMaxZp; beyond, the exact difference: oneDNN's arithmetic there is not measured).
template <Arithmetic kArithmetic, int kSrc, int kDst, int kZps>
void ComputeDequantize(const CallArgs& a, const ExecContext& ex) {
  constexpr bool kClassic = (kSrc == kS8 || kSrc == kU8) && kDst == kF32;
  if constexpr (kClassic) {
    if (a.group_shape == nullptr && a.scales_type == kF32) {
      using Zp = std::conditional_t<
          kZps == 0, void,
          std::conditional_t<kZps == kS8, int8_t,
                             std::conditional_t<kZps == kU8, uint8_t, int32_t>>>;
      Compute<DequantizeFamily<kArithmetic>, kSrc, Zp>(a, ex);
      return;
    }
  }
  ComputeGroups(a, ex, kSrc, kDst, kZps);
}

// ---- dispatch table ----------------------------------------------------------------------

struct DispatchEntry {
  OpKind op;
  int src;
  int dst;
  int zps;  // 0: none
  ComputeFn fn;
};

#define QG_QUANTIZE(OP, DST, ZPS, ZP_T) \
  DispatchEntry { OpKind::OP, kF32, DST, ZPS, &Compute<QuantizeFamily<A>, DST, ZP_T> }
#define QG_DEQUANTIZE(OP, SRC, ZPS, ZP_T) \
  DispatchEntry { OpKind::OP, SRC, kF32, ZPS, &Compute<DequantizeFamily<A>, SRC, ZP_T> }
#define QG_GROUPED(SRC, DST, ZPS) \
  DispatchEntry { \
    OpKind::kDynamicDequantize, SRC, DST, ZPS, &ComputeDequantize<A, SRC, DST, ZPS> \
  }

// The kernels of each arithmetic A (the same rows in both).
template <Arithmetic A>
constexpr DispatchEntry kDispatch[] = {
    QG_QUANTIZE(kDynamicQuantize, kS8, 0, void),
    QG_QUANTIZE(kDynamicQuantize, kS8, kS8, int8_t),
    QG_QUANTIZE(kDynamicQuantize, kS8, kU8, uint8_t),
    QG_QUANTIZE(kDynamicQuantize, kS8, kS32, int32_t),
    QG_QUANTIZE(kDynamicQuantize, kU8, 0, void),
    QG_QUANTIZE(kDynamicQuantize, kU8, kS8, int8_t),
    QG_QUANTIZE(kDynamicQuantize, kU8, kU8, uint8_t),
    QG_QUANTIZE(kDynamicQuantize, kU8, kS32, int32_t),
    // DynamicDequantize: every (src, dst, zps) of the spec's rows, each qtype.
#define QG_DYNAMIC_DEQUANTIZE_8BIT(SRC, DST) \
  QG_GROUPED(SRC, DST, 0), QG_GROUPED(SRC, DST, kS8), QG_GROUPED(SRC, DST, kU8), \
      QG_GROUPED(SRC, DST, kS32)
    QG_DYNAMIC_DEQUANTIZE_8BIT(kS8, kF32),
    QG_DYNAMIC_DEQUANTIZE_8BIT(kS8, kF16),
    QG_DYNAMIC_DEQUANTIZE_8BIT(kS8, kBF16),
    QG_DYNAMIC_DEQUANTIZE_8BIT(kU8, kF32),
    QG_DYNAMIC_DEQUANTIZE_8BIT(kU8, kF16),
    QG_DYNAMIC_DEQUANTIZE_8BIT(kU8, kBF16),
#undef QG_DYNAMIC_DEQUANTIZE_8BIT
#define QG_DYNAMIC_DEQUANTIZE_S4(DST) \
  QG_GROUPED(kS4, DST, 0), QG_GROUPED(kS4, DST, kS4), QG_GROUPED(kS4, DST, kS32)
#define QG_DYNAMIC_DEQUANTIZE_U4(DST)                                             \
  QG_GROUPED(kU4, DST, 0), QG_GROUPED(kU4, DST, kU4), QG_GROUPED(kU4, DST, kU8), \
      QG_GROUPED(kU4, DST, kS32)
    QG_DYNAMIC_DEQUANTIZE_S4(kF32),
    QG_DYNAMIC_DEQUANTIZE_S4(kF16),
    QG_DYNAMIC_DEQUANTIZE_S4(kBF16),
    QG_DYNAMIC_DEQUANTIZE_U4(kF32),
    QG_DYNAMIC_DEQUANTIZE_U4(kF16),
    QG_DYNAMIC_DEQUANTIZE_U4(kBF16),
#undef QG_DYNAMIC_DEQUANTIZE_S4
#undef QG_DYNAMIC_DEQUANTIZE_U4
    // Static ops: the zps attribute (s64 list, bounded to s32) arrives as int32.
    QG_QUANTIZE(kQuantize, kS8, 0, void),
    QG_QUANTIZE(kQuantize, kS8, kS32, int32_t),
    QG_QUANTIZE(kQuantize, kU8, 0, void),
    QG_QUANTIZE(kQuantize, kU8, kS32, int32_t),
    QG_QUANTIZE(kQuantize, kF8E4M3, 0, void),
    QG_QUANTIZE(kQuantize, kF8E5M2, 0, void),
    QG_DEQUANTIZE(kDequantize, kS8, 0, void),
    QG_DEQUANTIZE(kDequantize, kS8, kS32, int32_t),
    QG_DEQUANTIZE(kDequantize, kU8, 0, void),
    QG_DEQUANTIZE(kDequantize, kU8, kS32, int32_t),
    QG_DEQUANTIZE(kDequantize, kF8E4M3, 0, void),
    QG_DEQUANTIZE(kDequantize, kF8E5M2, 0, void),
};

#undef QG_QUANTIZE
#undef QG_DEQUANTIZE
#undef QG_GROUPED

// ---- the table must be exactly the spec's rows -------------------------------------------

constexpr bool SameString(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

constexpr bool IsFloat8Type(int t) {
  for (const auto& d : spec::kDTypes) {
    if (d.onnx == t) return d.is_float8;
  }
  return false;
}

template <Arithmetic A>
constexpr bool HasEntry(const char* op, int src, int dst, int zps) {
  for (const auto& e : kDispatch<A>) {
    if (SameString(OpName(e.op), op) && e.src == src && e.dst == dst && e.zps == zps) return true;
  }
  return false;
}

constexpr size_t ExpectedEntries() {
  size_t n = 0;
  for (const auto& row : spec::kTypeRows) {
    if (row.scales != 0) {
      n += 1 + static_cast<size_t>(row.zps_count);  // dynamic: no zps + each zps type
    } else {
      n += IsFloat8Type(row.src) || IsFloat8Type(row.dst) ? 1 : 2;  // static: none, s32 attr
    }
  }
  return n;
}

template <Arithmetic A>
constexpr bool CoversSpec() {
  for (const auto& row : spec::kTypeRows) {
    if (!HasEntry<A>(row.op, row.src, row.dst, 0)) return false;
    if (row.scales != 0) {
      for (int z = 0; z < row.zps_count; ++z) {
        if (!HasEntry<A>(row.op, row.src, row.dst, row.zps[z])) return false;
      }
    } else if (!IsFloat8Type(row.src) && !IsFloat8Type(row.dst)) {
      if (!HasEntry<A>(row.op, row.src, row.dst, kS32)) return false;
    }
  }
  return ExpectedEntries() == sizeof(kDispatch<A>) / sizeof(kDispatch<A>[0]);
}

static_assert(CoversSpec<Arithmetic::kOnnx>() && CoversSpec<Arithmetic::kOnednn>(),
              "the dispatch table must have exactly one kernel per (op, src, dst, zps) of the "
              "spec's supported-types table (custom_ops/src/generated/op_spec.h)");

template <Arithmetic A>
ComputeFn Find(OpKind op, int src, int dst, int zps) {
  for (const auto& e : kDispatch<A>) {
    if (e.op == op && e.src == src && e.dst == dst && e.zps == zps) return e.fn;
  }
  return nullptr;
}

}  // namespace

ComputeFn FindCompute(OpKind op, int src, int dst, int zps, Arithmetic arithmetic) {
  return arithmetic == Arithmetic::kOnnx ? Find<Arithmetic::kOnnx>(op, src, dst, zps)
                                         : Find<Arithmetic::kOnednn>(op, src, dst, zps);
}

}  // namespace qg
