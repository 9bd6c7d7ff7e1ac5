// The dispatch table: one kernel per (op, src, dst, zps) row of the spec's supported-types
// table in each arithmetic, proved complete by a static_assert.
#include "native/compute.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "common/spec.h"
#include "native/drive.h"
#include "native/groups.h"

namespace qg {
namespace native {
namespace {

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

// DynamicDequantize (and the static op's rows, which are all 8-bit -> f32): the 8-bit -> f32
// per tensor / channel calls keep the Compute path, everything else goes per group (the same
// kernels in both arithmetics: float(x) - float(zp) as oneDNN's reorder while |zp| <=
// kFloatMaxZp; beyond, the exact difference: oneDNN's arithmetic there is not measured).
template <int kSrc, int kDst>
constexpr bool kClassicDequantize = (kSrc == kS8 || kSrc == kU8) && kDst == kF32;

template <int kZps>
using ZpOf = std::conditional_t<
    kZps == 0, void,
    std::conditional_t<kZps == kS8, int8_t, std::conditional_t<kZps == kU8, uint8_t, int32_t>>>;

template <Arithmetic kArithmetic, int kSrc, int kDst, int kZps>
void ComputeDequantize(const CallArgs& a, const ExecContext& ex) {
  if constexpr (kClassicDequantize<kSrc, kDst>) {
    if (a.group_shape == nullptr && a.scales_type == kF32) {
      Compute<DequantizeFamily<kArithmetic>, kSrc, ZpOf<kZps>>(a, ex);
      return;
    }
  }
  ComputeGroups(a, ex, kSrc, kDst, kZps);
}

template <Arithmetic kArithmetic, int kSrc, int kDst, int kZps>
std::unique_ptr<FixedRun> PrepareDequantize(const CallArgs& params,
                                            const kernels::KernelTable& simd) {
  if constexpr (kClassicDequantize<kSrc, kDst>) {
    if (params.scales_type == kF32) {
      return PreparePerTensor<DequantizeFamily<kArithmetic>, kSrc, ZpOf<kZps>>(params, simd);
    }
  }
  return nullptr;  // f16/bf16 scales or dst, 4-bit: the groups driver
}

// ---- dispatch table ----------------------------------------------------------------------

struct DispatchEntry {
  OpKind op;
  int src;
  int dst;
  int zps;  // 0: none
  ComputeFn fn;
  PrepareFn prepare;
};

#define QG_QUANTIZE(OP, DST, ZPS, ZP_T)                                    \
  DispatchEntry {                                                          \
    OpKind::OP, kF32, DST, ZPS, &Compute<QuantizeFamily<A>, DST, ZP_T>,    \
        &PreparePerTensor<QuantizeFamily<A>, DST, ZP_T>                    \
  }
#define QG_DEQUANTIZE(OP, SRC, ZPS, ZP_T)                                  \
  DispatchEntry {                                                          \
    OpKind::OP, SRC, kF32, ZPS, &Compute<DequantizeFamily<A>, SRC, ZP_T>,  \
        &PreparePerTensor<DequantizeFamily<A>, SRC, ZP_T>                  \
  }
#define QG_GROUPED(SRC, DST, ZPS)                                            \
  DispatchEntry {                                                            \
    OpKind::kDynamicDequantize, SRC, DST, ZPS, &ComputeDequantize<A, SRC, DST, ZPS>, \
        &PrepareDequantize<A, SRC, DST, ZPS>                                 \
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
              "spec's supported-types table (custom_ops/src/common/generated/op_spec.h)");

template <Arithmetic A>
RowKernels Find(OpKind op, int src, int dst, int zps) {
  for (const auto& e : kDispatch<A>) {
    if (e.op == op && e.src == src && e.dst == dst && e.zps == zps) return {e.fn, e.prepare};
  }
  return {};
}

}  // namespace
}  // namespace native

RowKernels FindKernels(OpKind op, int src, int dst, int zps, Arithmetic arithmetic) {
  return arithmetic == Arithmetic::kOnnx ? native::Find<Arithmetic::kOnnx>(op, src, dst, zps)
                                         : native::Find<Arithmetic::kOnednn>(op, src, dst, zps);
}

}  // namespace qg
