// The dequantize kernels (s8/u8 and float8 -> float32, per tensor and per channel) of
// kernels.h, written once over a vector-ops struct V, and their table rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels.h"
#include "simd_arithmetic.h"
#include "simd_loops.h"

namespace qg::kernels::simd {

// ---- dequantize, integer src -------------------------------------------------------------

template <class V, typename T, bool kZp>
inline typename V::F DequantizeInt(typename V::I v, typename V::F scale, typename V::I zp) {
  if constexpr (kZp) v = V::SubI(v, zp);  // exact in int32 for |zp| <= kSimdMaxZp
  return V::Mul(V::CvtF(v), scale);       // float(x - zp) * scale
}

template <class V, typename T, bool kZp, bool kStream, bool kAlignHead = true>
void DequantizeRunInt(const void* xv, float* y, size_t n, const DequantizeRow& p) {
  constexpr size_t W = V::kWidth;
  const T* x = static_cast<const T*>(xv);
  size_t i = 0;
  if constexpr (kAlignHead) {  // see AlignedHead
    i = HeadElements<V>(y, sizeof(float), n);
    if (i != 0) DequantizeRunInt<V, T, kZp, false, false>(x, y, i, p);
  }
  const auto s = V::Set1(p.scale);
  const auto zp = V::Set1I(p.zp);
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto f0 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + i), s, zp);
    const auto f1 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + i + W), s, zp);
    const auto f2 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + i + 2 * W), s, zp);
    const auto f3 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + i + 3 * W), s, zp);
    V::template Store<kStream>(y + i, f0);
    V::template Store<kStream>(y + i + W, f1);
    V::template Store<kStream>(y + i + 2 * W, f2);
    V::template Store<kStream>(y + i + 3 * W, f3);
  }
  for (; i + W <= n; i += W) {
    V::template Store<false>(y + i, DequantizeInt<V, T, kZp>(V::template Widen<T>(x + i), s, zp));
  }
  if (i < n) {
    const auto f = DequantizeInt<V, T, kZp>(V::template WidenPartial<T>(x + i, n - i), s, zp);
    V::StorePartial(y + i, f, n - i);
  }
}

// Per-element parameters. kWalk: row blocks, or the rows * n elements as one flat run whose
// parameters repeat with period n (ForFlatPattern, DequantizeVecInt); like DequantizeRunInt,
// the flat run does not prefetch.
template <class V, typename T, typename Zp, bool kZp, bool kStream, Walk kWalk = Walk::kRows>
void DequantizeVecIntWith(const T* x, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                          size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  // x (8-bit) may alias y for the compiler, which keeps the order written here. The flat run
  // loads all four vectors before its stores, as the per-tensor run does (storing each vector
  // before the next load: [n / 64, 64] at 1M ~5% slower); row blocks store each in turn
  // (loads first there: [1024, 1024] ~2% slower). Paired runs, docs/benchmarks.md.
  const auto block = [&](size_t o, const ParamBlock<V>& b) __attribute__((always_inline)) {
    const T* xr = x + o;
    float* yr = y + o;
    if constexpr (kWalk == Walk::kRows) {
      V::template Store<kStream>(yr,
                                 DequantizeInt<V, T, kZp>(V::template Widen<T>(xr), b.s0, b.z0));
      V::template Store<kStream>(
          yr + W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + W), b.s1, b.z1));
      V::template Store<kStream>(
          yr + 2 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 2 * W), b.s2, b.z2));
      V::template Store<kStream>(
          yr + 3 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 3 * W), b.s3, b.z3));
    } else {
      const auto f0 = DequantizeInt<V, T, kZp>(V::template Widen<T>(xr), b.s0, b.z0);
      const auto f1 = DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + W), b.s1, b.z1);
      const auto f2 = DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 2 * W), b.s2, b.z2);
      const auto f3 = DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 3 * W), b.s3, b.z3);
      V::template Store<kStream>(yr, f0);
      V::template Store<kStream>(yr + W, f1);
      V::template Store<kStream>(yr + 2 * W, f2);
      V::template Store<kStream>(yr + 3 * W, f3);
    }
  };
  const auto one = [&](size_t o, auto s, auto z) __attribute__((always_inline)) {
    V::template Store<false>(y + o, DequantizeInt<V, T, kZp>(V::template Widen<T>(x + o), s, z));
  };
  const auto partial = [&](size_t o, size_t k, auto s, auto z) __attribute__((always_inline)) {
    const auto f = DequantizeInt<V, T, kZp>(V::template WidenPartial<T>(x + o, k), s, z);
    V::StorePartial(y + o, f, k);
  };
  if constexpr (kWalk == Walk::kRows) {
    ForColumnBlocks<V, kZp, kStream>(
        x, y, n, p, rows, stride, kDequantizePrefetchBytes,
        [&](size_t m) __attribute__((always_inline)) {
          DequantizeVecIntWith<V, T, Zp, kZp, false>(x, y, m, p, rows, stride);
        },
        block, one, partial);
  } else {
    ForFlatPattern<V, kZp, kWalk == Walk::kFlatHoisted, 0>(
        x, y, rows * n, p, n,
        [&](size_t m) __attribute__((always_inline)) {
          DequantizeVecIntWith<V, T, Zp, kZp, false>(x, y, m, p, 1, m);
        },
        block, one, partial);
  }
}

// Contiguous rows of a short pattern (ChannelParams::padded, stride == n, n a multiple of
// 4 vectors) go flat; a period of 4 vectors keeps its parameters in registers.
template <class V, typename T, typename Zp, bool kZp, bool kStream>
void DequantizeVecInt(const void* xv, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                      size_t rows, size_t stride) {
  constexpr Walk kFlat = Walk::kFlat, kHoisted = Walk::kFlatHoisted;
  const T* x = static_cast<const T*>(xv);
  if (p.padded && stride == n && n % (4 * V::kWidth) == 0) {
    if (n == 4 * V::kWidth) {
      DequantizeVecIntWith<V, T, Zp, kZp, kStream, kHoisted>(x, y, n, p, rows, stride);
    } else {
      DequantizeVecIntWith<V, T, Zp, kZp, kStream, kFlat>(x, y, n, p, rows, stride);
    }
    return;
  }
  DequantizeVecIntWith<V, T, Zp, kZp, kStream>(x, y, n, p, rows, stride);
}

// ---- dequantize, float8 src --------------------------------------------------------------

template <class V, class A, class Fmt, bool kZp, bool kStream>
void DequantizeRunF8(const void* xv, float* y, size_t n, const DequantizeRow& p) {
  constexpr size_t W = V::kWidth;
  const uint8_t* x = static_cast<const uint8_t*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(y, sizeof(float), n);
    if (i != 0) DequantizeRunF8<V, A, Fmt, kZp, false>(x, y, i, p);
  }
  const auto s = V::Set1(p.scale);
  for (; i + W <= n; i += W) {
    const auto f = DecodeF8<V, Fmt>(V::template Widen<uint8_t>(x + i));
    V::template Store<kStream>(y + i, A::template Product<V>(f, s));
  }
  if (i < n) {
    const auto f = DecodeF8<V, Fmt>(V::template WidenPartial<uint8_t>(x + i, n - i));
    V::StorePartial(y + i, A::template Product<V>(f, s), n - i);
  }
}

template <class V, class A, class Fmt, typename Zp, bool kStream>
void DequantizeVecF8(const void* xv, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                     size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  const uint8_t* x = static_cast<const uint8_t*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride * sizeof(float), rows)) {
      return DequantizeVecF8<V, A, Fmt, Zp, false>(x, y, n, p, rows, stride);
    }
    i = HeadElements<V>(y, sizeof(float), n);
    DequantizeVecF8<V, A, Fmt, Zp, false>(x, y, i, p, rows, stride);
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    for (size_t r = 0; r < rows; ++r) {
      const auto f = DecodeF8<V, Fmt>(V::template Widen<uint8_t>(x + r * stride + i));
      V::template Store<kStream>(y + r * stride + i, A::template Product<V>(f, s0));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(p.scale + i, k);
    for (size_t r = 0; r < rows; ++r) {
      const auto f = DecodeF8<V, Fmt>(V::template WidenPartial<uint8_t>(x + r * stride + i, k));
      V::StorePartial(y + r * stride + i, A::template Product<V>(f, s0), k);
    }
  }
}

// ---- tables ------------------------------------------------------------------------------

// Float8 kernels ignore zero points (the spec forbids them): their [zp] variants are the same.
template <class V, typename T>
constexpr DequantizeKernels DequantizeIntKernels() {
  return {
      {{DequantizeRunInt<V, T, false, false>, DequantizeRunInt<V, T, false, true>},
       {DequantizeRunInt<V, T, true, false>, DequantizeRunInt<V, T, true, true>}},
      {{DequantizeVecInt<V, T, int32_t, false, false>, DequantizeVecInt<V, T, int32_t, false, true>},
       {DequantizeVecInt<V, T, int32_t, true, false>, DequantizeVecInt<V, T, int32_t, true, true>}},
      {DequantizeVecInt<V, T, int16_t, true, false>, DequantizeVecInt<V, T, int16_t, true, true>}};
}

template <class V, class A, class Fmt>
constexpr DequantizeKernels DequantizeF8Kernels() {
  return {
      {{DequantizeRunF8<V, A, Fmt, false, false>, DequantizeRunF8<V, A, Fmt, false, true>},
       {DequantizeRunF8<V, A, Fmt, false, false>, DequantizeRunF8<V, A, Fmt, false, true>}},
      {{DequantizeVecF8<V, A, Fmt, int32_t, false>, DequantizeVecF8<V, A, Fmt, int32_t, true>},
       {DequantizeVecF8<V, A, Fmt, int32_t, false>, DequantizeVecF8<V, A, Fmt, int32_t, true>}},
      {DequantizeVecF8<V, A, Fmt, int16_t, false>, DequantizeVecF8<V, A, Fmt, int16_t, true>}};
}
}  // namespace qg::kernels::simd
