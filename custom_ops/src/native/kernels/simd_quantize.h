// The quantize kernels (float32 -> s8/u8 and float8) of kernels.h, written once over a
// vector-ops struct V and an arithmetic A (simd_arithmetic.h), and their table rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels.h"
#include "simd_arithmetic.h"
#include "simd_loops.h"

namespace qg::kernels::simd {

// ---- quantize, integer dst ---------------------------------------------------------------

// The value that is clamped and rounded: x / scale (ONNX), or x * m + float(zp) (oneDNN).
template <class V, class A, bool kZp>
inline typename V::F Scaled(typename V::F x, typename V::F scale, typename V::I zp) {
  typename V::F v = A::template Scale<V>(x, scale);
  if constexpr (kZp && A::kZpInFloat) v = V::Add(v, V::CvtF(zp));
  return v;
}

// The clamped value rounded half to even (MXCSR default), plus zp in ONNX's arithmetic.
template <class V, class A, bool kZp>
inline typename V::I Rounded(typename V::F v, typename V::I zp) {
  typename V::I q = V::CvtRne(v);
  if constexpr (kZp && !A::kZpInFloat) q = V::AddI(q, zp);
  return q;
}

// Scaled clamped to [lo, hi], then Rounded. Two clamp modes:
// * loose: lo, hi = -+2^30 and the saturating narrow does the exact clamp to [qmin, qmax];
//   right for every zero point the SIMD tables take (kernels.h), and for every zero point in
//   oneDNN's arithmetic (the sum is clamped, nothing is added after the conversion).
// * tight (kTight, ONNX only): lo, hi = qmin - zp, qmax - zp, exact in float32 while
//   |zp| <= 2^24; as the bounds are integers, clamping before rounding equals clamping after,
//   and the sum is in range, so a plain truncating narrow stores it (one instruction less on
//   AVX-512: the unsigned saturating narrow needs a max with 0 first). ONNX's MLAS kernels
//   clamp this way.
template <class V, class A, bool kZp>
inline typename V::I QuantizeInt(typename V::F x, typename V::F scale, typename V::I zp,
                                 typename V::F lo, typename V::F hi) {
  typename V::F v = Scaled<V, A, kZp>(x, scale, zp);
  v = V::Max(v, lo);  // NaN -> lo (lands at qmin)
  v = V::Min(v, hi);
  return Rounded<V, A, kZp>(v, zp);
}

template <class V, class A, bool kZp>
inline typename V::I QuantizeInt(typename V::F x, typename V::F scale, typename V::I zp) {
  return QuantizeInt<V, A, kZp>(x, scale, zp, V::Set1(-kSimdClamp), V::Set1(kSimdClamp));
}

// The 4-vector loops narrow with signed saturating packs, exact for every int32 sum, so one
// side of the clamp can be left to them: the values beyond it convert to INT_MIN.
// * kAbove, zero points in [0, 2^29]: v = min(hi, v), hi an integer (qmax - zp, or 2^30). NaN
//   stays NaN; NaN, -inf and values below -2^31 convert to INT_MIN, and INT_MIN + zp
//   saturates to qmin; below hi the sum stays below 2^31.
// * kBelow, tight bounds and zp in [-2^24, 0): v = max(v, lo), NaN -> lo. +inf and values
//   >= 2^31 convert to INT_MIN, which + zp wraps to INT_MAX + 1 + zp: saturates to qmax.
// * oneDNN's arithmetic: kAbove for every zero point (NaN, -inf and values below -2^31 of
//   the sum convert to INT_MIN, which saturates to qmin: NaN -> qmin as oneDNN v3.7+ on AVX).
// Single vectors and tails clamp both sides. One operation less a vector: per-tensor 5-9%
// faster at 16K-1M elements on Zen 5 (the loop is bound by its vector operations, not by
// vdivps alone).
enum class Clamp { kBoth, kAbove, kBelow };

template <class V, class A, bool kZp, Clamp kClamp>
inline typename V::I QuantizeIntPacked(typename V::F x, typename V::F scale, typename V::I zp,
                                       typename V::F lo, typename V::F hi) {
  if constexpr (kClamp == Clamp::kBoth) return QuantizeInt<V, A, kZp>(x, scale, zp, lo, hi);
  typename V::F v = Scaled<V, A, kZp>(x, scale, zp);
  if constexpr (kClamp == Clamp::kAbove) {
    v = V::Min(hi, v);  // a NaN v is returned as is
  } else {
    v = V::Max(v, lo);  // NaN -> lo
  }
  return Rounded<V, A, kZp>(v, zp);
}

inline constexpr int32_t kTightMaxZp = int32_t{1} << 24;

inline bool TightBoundsExact(int32_t zp) {
  return zp >= -kTightMaxZp + 256 && zp <= kTightMaxZp - 256;  // qmin - zp, qmax - zp exact
}

// kTight: bounds qmin - zp, qmax - zp (kPacked: how the 4-vector loop clamps to them), else
// +-2^30 on both sides.
template <class V, class A, typename T, bool kZp, bool kStream, bool kTight,
          Clamp kPacked = Clamp::kBoth, bool kAlignHead = true>
void QuantizeRunIntWith(const float* x, void* y, size_t n, const QuantizeRow& p) {
  static_assert(kTight || kPacked == Clamp::kBoth || A::kZpInFloat,
                "one-sided clamps need exact bounds in ONNX's arithmetic");
  constexpr size_t W = V::kWidth;
  T* out = static_cast<T*>(y);
  size_t i = 0;
  if constexpr (kAlignHead) {  // see AlignedHead
    i = HeadElements<V>(out, 1, n);
    if (i != 0) QuantizeRunIntWith<V, A, T, kZp, false, kTight, kPacked, false>(x, out, i, p);
  }
  constexpr float kMin = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float kMax = static_cast<float>(std::numeric_limits<T>::max());
  const auto s = V::Set1(p.scale);
  const auto zp = V::Set1I(p.zp);
  const auto lo = V::Set1(kTight ? kMin - static_cast<float>(p.zp) : -kSimdClamp);
  const auto hi = V::Set1(kTight ? kMax - static_cast<float>(p.zp) : kSimdClamp);
  for (; i + 4 * W <= n; i += 4 * W) {
    PrefetchAhead<4 * W * sizeof(float)>(x + i);
    const auto q0 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + i), s, zp, lo, hi);
    const auto q1 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + i + W), s, zp, lo, hi);
    const auto q2 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + i + 2 * W), s, zp, lo, hi);
    const auto q3 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + i + 3 * W), s, zp, lo, hi);
    V::template StoreNarrow4<T, kStream>(out + i, q0, q1, q2, q3);
  }
  for (; i + W <= n; i += W) {
    const auto q = QuantizeInt<V, A, kZp>(V::Load(x + i), s, zp, lo, hi);
    V::template StoreNarrow<T, kTight>(out + i, q);
  }
  if (i < n) {
    const auto q = QuantizeInt<V, A, kZp>(V::LoadPartial(x + i, n - i), s, zp, lo, hi);
    V::template StoreNarrowPartial<T, kTight>(out + i, q, n - i);
  }
}

template <class V, class A, typename T, bool kZp, bool kStream>
void QuantizeRunInt(const float* x, void* y, size_t n, const QuantizeRow& p) {
  if constexpr (A::kZpInFloat) {
    QuantizeRunIntWith<V, A, T, kZp, kStream, false, Clamp::kAbove>(x, y, n, p);
  } else if (!TightBoundsExact(p.zp)) {
    QuantizeRunIntWith<V, A, T, kZp, kStream, false>(x, y, n, p);
  } else if (p.zp >= 0) {
    QuantizeRunIntWith<V, A, T, kZp, kStream, true, Clamp::kAbove>(x, y, n, p);
  } else {
    QuantizeRunIntWith<V, A, T, kZp, kStream, true, Clamp::kBelow>(x, y, n, p);
  }
}

// Per-element parameters: bounds +-2^30; the 4-vector loop clamps above only when every zero
// point is >= 0 (kPacked = kAbove; see Clamp: NaN and values below -2^31 give INT_MIN, plus a
// zero point in [0, 2^29] that saturates to qmin). kWalk: row blocks, or the rows * n elements
// as one flat run whose parameters repeat with period n (ForFlatPattern, QuantizeVecInt), with
// QuantizeRunIntWith's prefetch; the arithmetic is the same, element for element.
template <class V, class A, typename T, typename Zp, bool kZp, bool kStream, Clamp kPacked,
          Walk kWalk = Walk::kRows>
void QuantizeVecIntWith(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p,
                        size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  T* out = static_cast<T*>(y);
  const auto lo = V::Set1(-kSimdClamp), hi = V::Set1(kSimdClamp);
  const auto block = [&](size_t o, const ParamBlock<V>& b) __attribute__((always_inline)) {
    const float* xr = x + o;
    const auto q0 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr), b.s0, b.z0, lo, hi);
    const auto q1 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + W), b.s1, b.z1, lo, hi);
    const auto q2 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + 2 * W), b.s2, b.z2, lo, hi);
    const auto q3 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + 3 * W), b.s3, b.z3, lo, hi);
    V::template StoreNarrow4<T, kStream>(out + o, q0, q1, q2, q3);
  };
  const auto one = [&](size_t o, auto s, auto z) __attribute__((always_inline)) {
    V::template StoreNarrow<T>(out + o, QuantizeInt<V, A, kZp>(V::Load(x + o), s, z));
  };
  const auto partial = [&](size_t o, size_t k, auto s, auto z) __attribute__((always_inline)) {
    // Padding lanes divide 0 by 0: NaN, clamped and not stored.
    const auto q = QuantizeInt<V, A, kZp>(V::LoadPartial(x + o, k), s, z);
    V::template StoreNarrowPartial<T>(out + o, q, k);
  };
  if constexpr (kWalk == Walk::kRows) {
    ForColumnBlocks<V, kZp, kStream>(
        x, out, n, p, rows, stride, kPrefetchBytes,
        [&](size_t m) __attribute__((always_inline)) {
          QuantizeVecIntWith<V, A, T, Zp, kZp, false, kPacked>(x, out, m, p, rows, stride);
        },
        block, one, partial);
  } else {
    ForFlatPattern<V, kZp, kWalk == Walk::kFlatHoisted, kPrefetchBytes>(
        x, out, rows * n, p, n,
        [&](size_t m) __attribute__((always_inline)) {
          QuantizeVecIntWith<V, A, T, Zp, kZp, false, kPacked>(x, out, m, p, 1, m);
        },
        block, one, partial);
  }
}

// Contiguous rows of a short pattern (ChannelParams::padded, stride == n, n a multiple of
// 4 vectors) go flat; a period of 4 vectors keeps its parameters in registers.
template <class V, class A, typename T, typename Zp, bool kZp, bool kStream, Clamp kPacked>
void QuantizeVecIntClamped(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p,
                           size_t rows, size_t stride) {
  constexpr Walk kFlat = Walk::kFlat, kHoisted = Walk::kFlatHoisted;
  if (p.padded && stride == n && n % (4 * V::kWidth) == 0) {
    if (n == 4 * V::kWidth) {
      QuantizeVecIntWith<V, A, T, Zp, kZp, kStream, kPacked, kHoisted>(x, y, n, p, rows, stride);
    } else {
      QuantizeVecIntWith<V, A, T, Zp, kZp, kStream, kPacked, kFlat>(x, y, n, p, rows, stride);
    }
    return;
  }
  QuantizeVecIntWith<V, A, T, Zp, kZp, kStream, kPacked>(x, y, n, p, rows, stride);
}

template <class V, class A, typename T, typename Zp, bool kZp, bool kStream>
void QuantizeVecInt(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                    size_t stride) {
  if (!kZp || A::kZpInFloat || p.zp_nonnegative) {
    QuantizeVecIntClamped<V, A, T, Zp, kZp, kStream, Clamp::kAbove>(x, y, n, p, rows, stride);
  } else {
    QuantizeVecIntClamped<V, A, T, Zp, kZp, kStream, Clamp::kBoth>(x, y, n, p, rows, stride);
  }
}

// ---- quantize, float8 dst ----------------------------------------------------------------

// Codes: simd_float8.h.

template <class V, class A, class Fmt, bool kZp, bool kStream>
void QuantizeRunF8(const float* x, void* y, size_t n, const QuantizeRow& p) {
  constexpr size_t W = V::kWidth;
  uint8_t* out = static_cast<uint8_t*>(y);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(out, 1, n);
    if (i != 0) QuantizeRunF8<V, A, Fmt, kZp, false>(x, out, i, p);
  }
  const auto s = V::Set1(p.scale);
  for (; i + 4 * W <= n; i += 4 * W) {
    PrefetchAhead<4 * W * sizeof(float)>(x + i);
    const auto c0 = A::template Float8<V, Fmt>(V::Load(x + i), s);
    const auto c1 = A::template Float8<V, Fmt>(V::Load(x + i + W), s);
    const auto c2 = A::template Float8<V, Fmt>(V::Load(x + i + 2 * W), s);
    const auto c3 = A::template Float8<V, Fmt>(V::Load(x + i + 3 * W), s);
    V::template StoreNarrow4<uint8_t, kStream>(out + i, c0, c1, c2, c3);
  }
  for (; i + W <= n; i += W) {
    V::template StoreNarrow<uint8_t>(out + i, A::template Float8<V, Fmt>(V::Load(x + i), s));
  }
  if (i < n) {
    const auto c = A::template Float8<V, Fmt>(V::LoadPartial(x + i, n - i), s);
    V::template StoreNarrowPartial<uint8_t>(out + i, c, n - i);
  }
}

template <class V, class A, class Fmt, typename Zp, bool kStream>
void QuantizeVecF8(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                   size_t stride) {
  constexpr size_t W = V::kWidth;
  uint8_t* out = static_cast<uint8_t*>(y);
  ForColumnBlocks<V, false, kStream>(
      x, out, n, p, rows, stride, kPrefetchBytes,
      [&](size_t m) __attribute__((always_inline)) {
        QuantizeVecF8<V, A, Fmt, Zp, false>(x, out, m, p, rows, stride);
      },
      [&](size_t o, const ParamBlock<V>& b) __attribute__((always_inline)) {
        const float* xr = x + o;
        const auto c0 = A::template Float8<V, Fmt>(V::Load(xr), b.s0);
        const auto c1 = A::template Float8<V, Fmt>(V::Load(xr + W), b.s1);
        const auto c2 = A::template Float8<V, Fmt>(V::Load(xr + 2 * W), b.s2);
        const auto c3 = A::template Float8<V, Fmt>(V::Load(xr + 3 * W), b.s3);
        V::template StoreNarrow4<uint8_t, kStream>(out + o, c0, c1, c2, c3);
      },
      [&](size_t o, auto s, auto) __attribute__((always_inline)) {
        V::template StoreNarrow<uint8_t>(out + o, A::template Float8<V, Fmt>(V::Load(x + o), s));
      },
      [&](size_t o, size_t k, auto s, auto) __attribute__((always_inline)) {
        const auto c = A::template Float8<V, Fmt>(V::LoadPartial(x + o, k), s);
        V::template StoreNarrowPartial<uint8_t>(out + o, c, k);
      });
}

// ---- tables ------------------------------------------------------------------------------

// Float8 kernels ignore zero points (the spec forbids them): their [zp] variants are the same.
template <class V, class A, typename T>
constexpr QuantizeKernels QuantizeIntKernels() {
  return {{{QuantizeRunInt<V, A, T, false, false>, QuantizeRunInt<V, A, T, false, true>},
           {QuantizeRunInt<V, A, T, true, false>, QuantizeRunInt<V, A, T, true, true>}},
          {{QuantizeVecInt<V, A, T, int32_t, false, false>,
            QuantizeVecInt<V, A, T, int32_t, false, true>},
           {QuantizeVecInt<V, A, T, int32_t, true, false>,
            QuantizeVecInt<V, A, T, int32_t, true, true>}},
          {QuantizeVecInt<V, A, T, int16_t, true, false>,
           QuantizeVecInt<V, A, T, int16_t, true, true>}};
}

template <class V, class A, class Fmt>
constexpr QuantizeKernels QuantizeF8Kernels() {
  return {{{QuantizeRunF8<V, A, Fmt, false, false>, QuantizeRunF8<V, A, Fmt, false, true>},
           {QuantizeRunF8<V, A, Fmt, false, false>, QuantizeRunF8<V, A, Fmt, false, true>}},
          {{QuantizeVecF8<V, A, Fmt, int32_t, false>, QuantizeVecF8<V, A, Fmt, int32_t, true>},
           {QuantizeVecF8<V, A, Fmt, int32_t, false>, QuantizeVecF8<V, A, Fmt, int32_t, true>}},
          {QuantizeVecF8<V, A, Fmt, int16_t, false>, QuantizeVecF8<V, A, Fmt, int16_t, true>}};
}

}  // namespace qg::kernels::simd
