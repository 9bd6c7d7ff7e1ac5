// The kernels of kernels.h written once over a vector-ops struct V (Avx2, Avx512), split by
// op family as MLAS splits quantize.cpp and dequantize.cpp: simd_loops.h (the shared loop
// drivers), simd_float8.h and simd_arithmetic.h (codes and the two arithmetics),
// simd_quantize.h, simd_dequantize.h, simd_groups.h (per-group and 4-bit). This header builds
// an ISA's table from them. Every function is a template on V, so each ISA's translation unit
// gets its own symbols and no code compiled for one ISA can be picked by the linker for another.
#pragma once

#include "kernels.h"
#include "simd_arithmetic.h"
#include "simd_dequantize.h"
#include "simd_float8.h"
#include "simd_groups.h"
#include "simd_quantize.h"

namespace qg::kernels::simd {

template <class V>
constexpr KernelTable MakeTable(Isa isa, const char* name) {
  return KernelTable{
      isa,
      name,
      &V::Fence,
      {QuantizeIntKernels<V, OnnxArithmetic, int8_t>(),
       QuantizeIntKernels<V, OnnxArithmetic, uint8_t>(),
       QuantizeF8Kernels<V, OnnxArithmetic, E4M3>(), QuantizeF8Kernels<V, OnnxArithmetic, E5M2>()},
      {DequantizeIntKernels<V, int8_t>(), DequantizeIntKernels<V, uint8_t>(),
       DequantizeF8Kernels<V, OnnxArithmetic, E4M3>(),
       DequantizeF8Kernels<V, OnnxArithmetic, E5M2>()},
      {
#define QG_GROUP_ROW(SRC)                                                                  \
  {                                                                                        \
    {GroupKernel<V, SRC, kGroupF32>(false), GroupKernel<V, SRC, kGroupF32>(true)},         \
        {GroupKernel<V, SRC, kGroupF16>(false), GroupKernel<V, SRC, kGroupF16>(true)},     \
        {GroupKernel<V, SRC, kGroupBF16>(false), GroupKernel<V, SRC, kGroupBF16>(true)},   \
  }
          QG_GROUP_ROW(kGroupS8),
          QG_GROUP_ROW(kGroupU8),
          QG_GROUP_ROW(kGroupS4),
          QG_GROUP_ROW(kGroupU4),
#undef QG_GROUP_ROW
      },
      {QuantizeIntKernels<V, OnednnArithmetic, int8_t>(),
       QuantizeIntKernels<V, OnednnArithmetic, uint8_t>(),
       QuantizeF8Kernels<V, OnednnArithmetic, E4M3>(),
       QuantizeF8Kernels<V, OnednnArithmetic, E5M2>()},
      // Integer dequantize: the ONNX kernels (the caller keeps zero points within kFloatMaxZp).
      {DequantizeIntKernels<V, int8_t>(), DequantizeIntKernels<V, uint8_t>(),
       DequantizeF8Kernels<V, OnednnArithmetic, E4M3>(),
       DequantizeF8Kernels<V, OnednnArithmetic, E5M2>()},
  };
}

}  // namespace qg::kernels::simd
