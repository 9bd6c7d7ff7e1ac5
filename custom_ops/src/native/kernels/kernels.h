// Element-wise quantize/dequantize primitives, one table per instruction set.
//
// This layer knows nothing about onnxruntime or the spec: it converts runs of elements with
// parameters that the caller has already validated and prepared. Every table computes exactly
// the same bits (the scalar table is the definition; the SIMD tables are tested against it):
//
//   quantize, integer dst:  v = x / scale (IEEE float32 division, no reciprocal)
//                           q = saturate(round_half_even(v) + zp) to [qmin, qmax], NaN -> qmin
//                           (the spec's clamp of v to [qmin - zp, qmax - zp] before rounding,
//                           with exact bounds, gives the same)
//   quantize, float8 dst:   v = x / scale; NaN stays NaN, +-inf and finite overflow saturate to
//                           +-max, then round to nearest even (float8_e4m3fn / float8_e5m2)
//   dequantize, integer:    y = float(x - zp) * scale
//   dequantize, float8:     y = float(x) * scale
//
// SIMD tables require |zp| <= kSimdMaxZp (ZeroPointRange::FitsSimd); the caller falls back to the
// scalar table otherwise.
//
// The *_onednn kernels compute what oneDNN's CPU reorder does (quantgraph/reference/onednn_arithmetic.py
// states the evidence), in float32, multiply and add rounded separately (no FMA):
//
//   quantize, integer dst:  v = fl(fl(x * m) + float(zp)), m = fl(1 / scale) computed by the
//                           CALLER once per scale (the kernels take m in place of the scale);
//                           q = saturate(round_half_even(v)), NaN -> qmin. Exact for every s32
//                           zero point in every table (float(zp) rounds as oneDNN's does).
//   quantize, float8 dst:   v = fl(x * m) + 0 (-0 -> +0), rounded to float16 (nearest even,
//                           overflow to inf), then to float8 as oneDNN's float8.cpp: e4m3 NaN
//                           (sign | 0x7F) above 464 (and for inf / NaN), e5m2 inf above 57344
//                           (from 61440), NaN sign | 0x7E or 0x7F (payload); no saturation
//   dequantize, integer:    y = (float(x) - float(zp)) * scale: the same bits as float(x - zp)
//                           while float(zp) is exact; SIMD tables' entries are the ONNX ones and
//                           need |zp| <= kFloatMaxZp (FitsFloat), the scalar table's are exact
//   dequantize, float8:     y = float(x) * scale + 0 (-0 -> +0)
#pragma once

#include <cstddef>
#include <cstdint>

namespace qg::kernels {

// Quantized element types, in the order the tables are indexed by.
enum QType : int { kS8 = 0, kU8 = 1, kF8E4M3 = 2, kF8E5M2 = 3, kNumQTypes = 4 };

// Parameters of one run whose elements share a channel.
struct QuantizeRow {
  float scale;
  int32_t zp;  // 0 for float8
};

// Parameters of a run whose element i belongs to channel i (arrays of at least n elements).
// Zero points come as int16 when they all fit (ZeroPointsFitInt16): a row's parameters then
// take 6 bytes a column instead of 8, which keeps a 4096-column row of them in L1 beside the
// streamed data (innermost-axis quantize of [4096, 4096] on Zen 5: 1.45x -> 1.25x of the
// per-tensor time), else as int32.
template <typename Zp>
struct ChannelParams {
  const float* scale;
  const Zp* zp;               // nullptr: all zero (symmetric)
  bool zp_nonnegative = true;  // every zp[i] >= 0: quantize kernels may clamp one side only
  // The arrays hold a repeating pattern of n parameters plus kPatternPad more that continue it
  // (element n + k is element k). With stride == n the rows are contiguous: the SIMD integer
  // kernels then convert the rows * n elements as one run whose parameters repeat with period n
  // (no row blocks; a prefetch distance and loop like the per-tensor run's).
  bool padded = false;
};
// Parameters past a pattern's end in padded ChannelParams (4 AVX-512 vectors of float).
inline constexpr size_t kPatternPad = 64;
template <typename Zp>
using QuantizeVecOf = ChannelParams<Zp>;
using QuantizeVec = QuantizeVecOf<int32_t>;
using QuantizeVec16 = QuantizeVecOf<int16_t>;

struct DequantizeRow {
  float scale;
  int32_t zp;
};

template <typename Zp>
using DequantizeVecOf = ChannelParams<Zp>;
using DequantizeVec = DequantizeVecOf<int32_t>;
using DequantizeVec16 = DequantizeVecOf<int16_t>;

// Run kernels convert n elements with one channel's parameters. Vec kernels convert `rows`
// rows of n elements, row r at element offset r * stride of x and y, element i of every row
// with the parameters p[i]: the parameters are loaded once per column for all the rows.
using QuantizeRunFn = void (*)(const float* x, void* y, size_t n, const QuantizeRow& p);
template <typename Zp>
using QuantizeVecFnOf = void (*)(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p,
                                 size_t rows, size_t stride);
using QuantizeVecFn = QuantizeVecFnOf<int32_t>;
using QuantizeVec16Fn = QuantizeVecFnOf<int16_t>;
using DequantizeRunFn = void (*)(const void* x, float* y, size_t n, const DequantizeRow& p);
template <typename Zp>
using DequantizeVecFnOf = void (*)(const void* x, float* y, size_t n,
                                   const DequantizeVecOf<Zp>& p, size_t rows, size_t stride);
using DequantizeVecFn = DequantizeVecFnOf<int32_t>;
using DequantizeVec16Fn = DequantizeVecFnOf<int16_t>;

// Variants by [zero points present][streaming stores]; vec16 kernels always have zero points
// (int16). Streaming (non-temporal) stores skip the cache for outputs too large to be read
// back from it; the caller chooses them by size.
struct QuantizeKernels {
  QuantizeRunFn run[2][2];
  QuantizeVecFn vec[2][2];
  QuantizeVec16Fn vec16[2];
};

struct DequantizeKernels {
  DequantizeRunFn run[2][2];
  DequantizeVecFn vec[2][2];
  DequantizeVec16Fn vec16[2];
};

// ---- dequantize with a parameter per group of elements -------------------------------------
//
// DynamicDequantize's rows beyond 8-bit -> f32 per tensor / channel: src s8, u8, s4, u4 (4-bit
// packed two to a byte, element 2k in the low nibble of byte k), dst f32, f16, bf16:
//
//   y = round_to_dst(float(x - zp) * scale)   (f16/bf16: once, to nearest even)
//
// over `rows` rows of n elements that share their parameters: row r starts at src element
// x_offset + r * x_stride and at dst element r * y_stride of y. Element j of a row uses
// parameter (phase + j) / group (group >= 1: 1 is a parameter per element, n a single one).
// SIMD tables need every zero point within +-kFloatMaxZp (ZeroPointRange::FitsFloat): they
// compute float(x) - float(zp), exact there.
enum GroupSrc : int { kGroupS8 = 0, kGroupU8 = 1, kGroupS4 = 2, kGroupU4 = 3, kNumGroupSrc = 4 };
enum GroupDst : int { kGroupF32 = 0, kGroupF16 = 1, kGroupBF16 = 2, kNumGroupDst = 3 };

struct GroupArgs {
  const void* x;
  size_t x_offset;  // in elements (4-bit: may be odd)
  size_t x_stride;  // elements
  void* y;          // dst element of row 0, element 0
  size_t y_stride;  // elements
  size_t n;
  size_t rows;
  const float* scale;  // parameter 0 is the one of row element 0
  const int32_t* zp;   // nullptr: no zero points
  size_t group;
  size_t phase;  // < group
};
using DequantizeGroupFn = void (*)(const GroupArgs& a);
inline constexpr int32_t kFloatMaxZp = (int32_t{1} << 24) - 256;

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct KernelTable {
  Isa isa;
  const char* name;
  void (*fence)();  // orders streaming stores before what follows; nullptr: none needed
  QuantizeKernels quantize[kNumQTypes];      // indexed by dst QType
  DequantizeKernels dequantize[kNumQTypes];  // indexed by src QType
  // [src][dst][streaming stores]
  DequantizeGroupFn dequantize_group[kNumGroupSrc][kNumGroupDst][2];
  QuantizeKernels quantize_onednn[kNumQTypes];  // oneDNN's arithmetic (above)
  DequantizeKernels dequantize_onednn[kNumQTypes];
};

// The best instruction set this CPU (and OS) supports, and the one to use: the best, capped by
// the environment variable QUANTGRAPH_NATIVE_ISA (scalar, avx2, avx512) when set.
Isa DetectIsa();
Isa SelectIsa();
const char* IsaName(Isa isa);
// The table for `isa`; a table this build or CPU lacks falls back to the next lower one.
const KernelTable& GetKernelTable(Isa isa);

// The SIMD quantize kernels clamp x / scale to +-kSimdClamp before converting to int32 and let
// the saturating narrowing do the exact clamp to [qmin, qmax]; that is exact while
// |zp| <= kSimdMaxZp (no int32 overflow, NaN and -kSimdClamp still land below qmin). The
// SIMD dequantize kernels compute x - zp in int32, exact for the same zero points.
inline constexpr float kSimdClamp = 1073741824.0f;  // 2^30
inline constexpr int32_t kSimdMaxZp = int32_t{1} << 29;

// The smallest and largest of n zero points (and 0): one pass over them tells the caller all
// it needs to choose kernels.
struct ZeroPointRange {
  int32_t lo = 0, hi = 0;
  ZeroPointRange(const int32_t* zp, size_t n) {
    for (size_t i = 0; i < n; ++i) {  // no early exit: the loop vectorizes
      lo = zp[i] < lo ? zp[i] : lo;
      hi = zp[i] > hi ? zp[i] : hi;
    }
  }
  bool AllZero() const { return lo == 0 && hi == 0; }
  bool FitsSimd() const { return lo >= -kSimdMaxZp && hi <= kSimdMaxZp; }  // else scalar table
  bool FitsInt16() const { return lo >= INT16_MIN && hi <= INT16_MAX; }    // vec16 kernels
  bool FitsFloat() const { return lo >= -kFloatMaxZp && hi <= kFloatMaxZp; }  // group kernels
};

// Per-ISA table getters; nullptr when the build did not compile that ISA.
const KernelTable* ScalarTable();
const KernelTable* Avx2Table();
const KernelTable* Avx512Table();

}  // namespace qg::kernels
