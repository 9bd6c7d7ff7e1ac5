// The kernels of kernels.h written once over a vector-ops struct V (Avx2, Avx512).
// Every function is a template on V, so each ISA's translation unit gets its own symbols and
// no code compiled for one ISA can be picked by the linker for another.
//
// Loops convert 4 vectors per iteration (MLAS-style), then single vectors, then one masked or
// partial vector for the tail; there is no scalar tail. kStream variants write the aligned
// body with non-temporal stores (a head up to the alignment uses ordinary stores); the caller
// fences (KernelTable::fence) once per block of work, not once per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels.h"

namespace qg::kernels::simd {

// Elements before `p` (elements of `size` bytes) reaches V::kStreamAlign; capped at n.
// AlignedHead: the run kernels convert these first, one vector at a time, so that their wide
// stores (64 bytes on AVX-512) never straddle two cache lines (numpy's large arrays start 16
// bytes into a page).
template <class V>
inline size_t HeadElements(const void* p, size_t size, size_t n) {
  const size_t misaligned = reinterpret_cast<uintptr_t>(p) % V::kStreamAlign;
  const size_t head = misaligned == 0 ? 0 : (V::kStreamAlign - misaligned) / size;
  return head < n ? head : n;
}

// Vec kernels stream only when every row starts at the same alignment (their heads agree).
template <class V>
inline bool RowsShareAlignment(size_t stride_bytes, size_t rows) {
  return rows == 1 || stride_bytes % V::kStreamAlign == 0;
}

// Quantize kernels prefetch their float source kPrefetchBytes ahead of the loads, into L1;
// vec kernels, whose rows advance together, kPrefetchBytes / rows ahead in each row. Measured
// on Zen 5, one thread, f32 -> u8 (medians of paired runs in 8-18 processes):
// * per-tensor: 1M elements (L3-resident) 2-4% faster, 16M (DRAM) 25-30%; nearer distances
//   help less, farther ones (or prefetching into L2 only) make 1M slower;
// * per-channel, innermost axis: [4096, 4096] one row at a time 1.13x of the per-tensor time
//   with it, 2.6x without; [1024, 1024] 1.42x instead of 1.60x and [256, 4096] 1.37x instead
//   of 1.56x (8 rows a block; without it they slow down whenever other tenants of this VM's
//   host take the shared L3); [256, 256] (in L2) unchanged.
// Dequantize reads a quarter of the bytes it writes: its run kernels do not prefetch (1M:
// 10-20% slower with it, 16M: no change); its vec kernels do, 2 KiB ahead of a block of rows
// ([4096, 4096] axis 1: 1.2x of the per-tensor time, 1.4x without or with 8 KiB).
// Loops prefetch past the end of their range: the next task's range usually follows, and
// stopping early (so that a task's first 8 KiB were never prefetched) made 1M slower than no
// prefetch at all. A prefetch never faults; the address is computed as an integer, not by
// pointer arithmetic past the array.
inline constexpr size_t kPrefetchBytes = 8192;
inline constexpr size_t kDequantizePrefetchBytes = 2048;
inline constexpr size_t kLine = 64;

// Prefetches the kBytes (a multiple of kLine) that start `ahead` bytes after p.
template <size_t kBytes>
inline void PrefetchAhead(const void* p, size_t ahead = kPrefetchBytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + ahead;
  for (size_t b = 0; b < kBytes; b += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(at + b), 0, 3);
  }
}

// ---- quantize, integer dst ---------------------------------------------------------------

// x / scale clamped to [lo, hi], rounded half to even, plus zp. Two clamp modes:
// * loose: lo, hi = -+2^30 and the saturating narrow does the exact clamp to [qmin, qmax];
//   right for every zero point the SIMD tables take (kernels.h).
// * tight (kTight): lo, hi = qmin - zp, qmax - zp, exact in float32 while |zp| <= 2^24; as
//   the bounds are integers, clamping before rounding equals clamping after, and the sum is in
//   range, so a plain truncating narrow stores it (one instruction less on AVX-512: the
//   unsigned saturating narrow needs a max with 0 first). ONNX's MLAS kernels clamp this way.
template <class V, bool kZp>
inline typename V::I QuantizeInt(typename V::F x, typename V::F scale, typename V::I zp,
                                 typename V::F lo, typename V::F hi) {
  typename V::F v = V::Div(x, scale);  // IEEE division
  v = V::Max(v, lo);                    // NaN -> lo (lands at qmin)
  v = V::Min(v, hi);
  typename V::I q = V::CvtRne(v);  // half to even
  if constexpr (kZp) q = V::AddI(q, zp);
  return q;
}

template <class V, bool kZp>
inline typename V::I QuantizeInt(typename V::F x, typename V::F scale, typename V::I zp) {
  return QuantizeInt<V, kZp>(x, scale, zp, V::Set1(-kSimdClamp), V::Set1(kSimdClamp));
}

// The 4-vector loops narrow with signed saturating packs, exact for every int32 sum, so one
// side of the clamp can be left to them: the values beyond it convert to INT_MIN.
// * kAbove, zero points in [0, 2^29]: v = min(hi, v), hi an integer (qmax - zp, or 2^30). NaN
//   stays NaN; NaN, -inf and values below -2^31 convert to INT_MIN, and INT_MIN + zp
//   saturates to qmin; below hi the sum stays below 2^31.
// * kBelow, tight bounds and zp in [-2^24, 0): v = max(v, lo), NaN -> lo. +inf and values
//   >= 2^31 convert to INT_MIN, which + zp wraps to INT_MAX + 1 + zp: saturates to qmax.
// Single vectors and tails clamp both sides. One operation less a vector: per-tensor 5-9%
// faster at 16K-1M elements on Zen 5 (the loop is bound by its vector operations, not by
// vdivps alone).
enum class Clamp { kBoth, kAbove, kBelow };

template <class V, bool kZp, Clamp kClamp>
inline typename V::I QuantizeIntPacked(typename V::F x, typename V::F scale, typename V::I zp,
                                       typename V::F lo, typename V::F hi) {
  if constexpr (kClamp == Clamp::kBoth) return QuantizeInt<V, kZp>(x, scale, zp, lo, hi);
  typename V::F v = V::Div(x, scale);
  if constexpr (kClamp == Clamp::kAbove) {
    v = V::Min(hi, v);  // a NaN v is returned as is
  } else {
    v = V::Max(v, lo);  // NaN -> lo
  }
  typename V::I q = V::CvtRne(v);
  if constexpr (kZp) q = V::AddI(q, zp);
  return q;
}

inline constexpr int32_t kTightMaxZp = int32_t{1} << 24;

inline bool TightBoundsExact(int32_t zp) {
  return zp >= -kTightMaxZp + 256 && zp <= kTightMaxZp - 256;  // qmin - zp, qmax - zp exact
}

// kTight: bounds qmin - zp, qmax - zp (kPacked: how the 4-vector loop clamps to them), else
// +-2^30 on both sides.
template <class V, typename T, bool kZp, bool kStream, bool kTight, Clamp kPacked = Clamp::kBoth,
          bool kAlignHead = true>
void QuantizeRunIntWith(const float* x, void* y, size_t n, const QuantizeRow& p) {
  static_assert(kTight || kPacked == Clamp::kBoth, "one-sided clamps need exact bounds");
  constexpr size_t W = V::kWidth;
  T* out = static_cast<T*>(y);
  size_t i = 0;
  if constexpr (kAlignHead) {  // see AlignedHead
    i = HeadElements<V>(out, 1, n);
    QuantizeRunIntWith<V, T, kZp, false, kTight, kPacked, false>(x, out, i, p);
  }
  constexpr float kMin = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float kMax = static_cast<float>(std::numeric_limits<T>::max());
  const auto s = V::Set1(p.scale);
  const auto zp = V::Set1I(p.zp);
  const auto lo = V::Set1(kTight ? kMin - static_cast<float>(p.zp) : -kSimdClamp);
  const auto hi = V::Set1(kTight ? kMax - static_cast<float>(p.zp) : kSimdClamp);
  for (; i + 4 * W <= n; i += 4 * W) {
    PrefetchAhead<4 * W * sizeof(float)>(x + i);
    const auto q0 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(x + i), s, zp, lo, hi);
    const auto q1 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(x + i + W), s, zp, lo, hi);
    const auto q2 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(x + i + 2 * W), s, zp, lo, hi);
    const auto q3 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(x + i + 3 * W), s, zp, lo, hi);
    V::template StoreNarrow4<T, kStream>(out + i, q0, q1, q2, q3);
  }
  for (; i + W <= n; i += W) {
    const auto q = QuantizeInt<V, kZp>(V::Load(x + i), s, zp, lo, hi);
    V::template StoreNarrow<T, kTight>(out + i, q);
  }
  if (i < n) {
    const auto q = QuantizeInt<V, kZp>(V::LoadPartial(x + i, n - i), s, zp, lo, hi);
    V::template StoreNarrowPartial<T, kTight>(out + i, q, n - i);
  }
}

template <class V, typename T, bool kZp, bool kStream>
void QuantizeRunInt(const float* x, void* y, size_t n, const QuantizeRow& p) {
  if (!TightBoundsExact(p.zp)) {
    QuantizeRunIntWith<V, T, kZp, kStream, false>(x, y, n, p);
  } else if (p.zp >= 0) {
    QuantizeRunIntWith<V, T, kZp, kStream, true, Clamp::kAbove>(x, y, n, p);
  } else {
    QuantizeRunIntWith<V, T, kZp, kStream, true, Clamp::kBelow>(x, y, n, p);
  }
}

// Per-element parameters: bounds +-2^30; the 4-vector loop clamps above only when every zero
// point is >= 0 (kPacked = kAbove; see Clamp: NaN and values below -2^31 give INT_MIN, plus a
// zero point in [0, 2^29] that saturates to qmin).
template <class V, typename T, typename Zp, bool kZp, bool kStream, Clamp kPacked>
void QuantizeVecIntWith(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p,
                        size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  T* out = static_cast<T*>(y);
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride * sizeof(T), rows)) {
      return QuantizeVecIntWith<V, T, Zp, kZp, false, kPacked>(x, y, n, p, rows, stride);
    }
    i = HeadElements<V>(out, 1, n);
    QuantizeVecIntWith<V, T, Zp, kZp, false, kPacked>(x, out, i, p, rows, stride);
  }
  const auto zero = V::Set1I(0);
  const auto lo = V::Set1(-kSimdClamp), hi = V::Set1(kSimdClamp);
  // The rows advance together: kPrefetchBytes ahead in the order of reading is
  // kPrefetchBytes / rows ahead in each row.
  const size_t ahead = kPrefetchBytes / rows;
  for (; i + 4 * W <= n; i += 4 * W) {
    // This column block's parameters stay in registers for every row.
    const auto s0 = V::Load(p.scale + i), s1 = V::Load(p.scale + i + W);
    const auto s2 = V::Load(p.scale + i + 2 * W), s3 = V::Load(p.scale + i + 3 * W);
    const auto z0 = kZp ? V::LoadI(p.zp + i) : zero, z1 = kZp ? V::LoadI(p.zp + i + W) : zero;
    const auto z2 = kZp ? V::LoadI(p.zp + i + 2 * W) : zero;
    const auto z3 = kZp ? V::LoadI(p.zp + i + 3 * W) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * stride + i;
      PrefetchAhead<4 * W * sizeof(float)>(xr, ahead);
      const auto q0 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(xr), s0, z0, lo, hi);
      const auto q1 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(xr + W), s1, z1, lo, hi);
      const auto q2 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(xr + 2 * W), s2, z2, lo, hi);
      const auto q3 = QuantizeIntPacked<V, kZp, kPacked>(V::Load(xr + 3 * W), s3, z3, lo, hi);
      V::template StoreNarrow4<T, kStream>(out + r * stride + i, q0, q1, q2, q3);
    }
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    const auto z0 = kZp ? V::LoadI(p.zp + i) : zero;
    for (size_t r = 0; r < rows; ++r) {
      V::template StoreNarrow<T>(out + r * stride + i,
                                 QuantizeInt<V, kZp>(V::Load(x + r * stride + i), s0, z0));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    // Padding lanes divide 0 by 0: NaN, clamped and not stored.
    const auto s0 = V::LoadPartial(p.scale + i, k);
    const auto z0 = kZp ? V::LoadPartialI(p.zp + i, k) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const auto q = QuantizeInt<V, kZp>(V::LoadPartial(x + r * stride + i, k), s0, z0);
      V::template StoreNarrowPartial<T>(out + r * stride + i, q, k);
    }
  }
}

template <class V, typename T, typename Zp, bool kZp, bool kStream>
void QuantizeVecInt(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                    size_t stride) {
  if (!kZp || p.zp_nonnegative) {
    QuantizeVecIntWith<V, T, Zp, kZp, kStream, Clamp::kAbove>(x, y, n, p, rows, stride);
  } else {
    QuantizeVecIntWith<V, T, Zp, kZp, kStream, Clamp::kBoth>(x, y, n, p, rows, stride);
  }
}

// ---- quantize, float8 dst ----------------------------------------------------------------

// Float8 format: mantissa bits, exponent bias, largest finite value (as float32 bits), NaN code.
template <int kMant_, int kBias_, uint32_t kMaxBits_, int32_t kNan_, bool kHasInf_>
struct F8Format {
  static constexpr int kMant = kMant_;
  static constexpr int kBias = kBias_;
  static constexpr uint32_t kMaxBits = kMaxBits_;
  static constexpr int32_t kNan = kNan_;
  static constexpr bool kHasInf = kHasInf_;
};
using E4M3 = F8Format<3, 7, 0x43E00000u, 0x7F, false>;  // max 448, no inf
using E5M2 = F8Format<2, 15, 0x47600000u, 0x7E, true>;  // max 57344

constexpr float Pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

// v (float32 lanes) -> float8 codes in int32 lanes (0..255). Saturating, round half to even.
template <class V, class Fmt>
inline typename V::I EncodeF8(typename V::F v) {
  constexpr int kShift = 23 - Fmt::kMant;
  constexpr int32_t kMinNormalBits = (128 - Fmt::kBias) << 23;
  const auto bits = V::AsI(v);
  const auto sign = V::template Srl<24>(V::AndI(bits, V::Set1I(static_cast<int32_t>(0x80000000u))));
  auto mag = V::AndI(bits, V::Set1I(0x7FFFFFFF));
  const auto is_nan = V::CmpGtI(mag, V::Set1I(0x7F800000));
  mag = V::MinI(mag, V::Set1I(static_cast<int32_t>(Fmt::kMaxBits)));  // +-inf, overflow -> max
  // Normal: round the mantissa to kMant bits in the integer domain; a carry moves the exponent.
  auto r = V::AddI(mag, V::Set1I((1 << (kShift - 1)) - 1));
  r = V::AddI(r, V::AndI(V::template Srl<kShift>(mag), V::Set1I(1)));
  const auto normal =
      V::SubI(V::template Srl<kShift>(r), V::Set1I((127 - Fmt::kBias) << Fmt::kMant));
  // Subnormal: the code is |v| in units of the smallest subnormal, rounded half to even.
  constexpr float kSubScale = Pow2(Fmt::kBias - 1 + Fmt::kMant);
  const auto subnormal = V::CvtRne(V::Mul(V::AsF(mag), V::Set1(kSubScale)));
  auto code = V::SelectI(V::CmpGtI(V::Set1I(kMinNormalBits), mag), subnormal, normal);
  code = V::SelectI(is_nan, V::Set1I(Fmt::kNan), code);
  return V::OrI(code, sign);
}

template <class V, class Fmt, bool kZp, bool kStream>
void QuantizeRunF8(const float* x, void* y, size_t n, const QuantizeRow& p) {
  constexpr size_t W = V::kWidth;
  uint8_t* out = static_cast<uint8_t*>(y);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(out, 1, n);
    QuantizeRunF8<V, Fmt, kZp, false>(x, out, i, p);
  }
  const auto s = V::Set1(p.scale);
  for (; i + 4 * W <= n; i += 4 * W) {
    PrefetchAhead<4 * W * sizeof(float)>(x + i);
    const auto c0 = EncodeF8<V, Fmt>(V::Div(V::Load(x + i), s));
    const auto c1 = EncodeF8<V, Fmt>(V::Div(V::Load(x + i + W), s));
    const auto c2 = EncodeF8<V, Fmt>(V::Div(V::Load(x + i + 2 * W), s));
    const auto c3 = EncodeF8<V, Fmt>(V::Div(V::Load(x + i + 3 * W), s));
    V::template StoreNarrow4<uint8_t, kStream>(out + i, c0, c1, c2, c3);
  }
  for (; i + W <= n; i += W) {
    V::template StoreNarrow<uint8_t>(out + i, EncodeF8<V, Fmt>(V::Div(V::Load(x + i), s)));
  }
  if (i < n) {
    const auto c = EncodeF8<V, Fmt>(V::Div(V::LoadPartial(x + i, n - i), s));
    V::template StoreNarrowPartial<uint8_t>(out + i, c, n - i);
  }
}

template <class V, class Fmt, typename Zp, bool kStream>
void QuantizeVecF8(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                   size_t stride) {
  constexpr size_t W = V::kWidth;
  uint8_t* out = static_cast<uint8_t*>(y);
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride, rows)) {
      return QuantizeVecF8<V, Fmt, Zp, false>(x, y, n, p, rows, stride);
    }
    i = HeadElements<V>(out, 1, n);
    QuantizeVecF8<V, Fmt, Zp, false>(x, out, i, p, rows, stride);
  }
  const size_t ahead = kPrefetchBytes / rows;
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto s0 = V::Load(p.scale + i), s1 = V::Load(p.scale + i + W);
    const auto s2 = V::Load(p.scale + i + 2 * W), s3 = V::Load(p.scale + i + 3 * W);
    for (size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * stride + i;
      PrefetchAhead<4 * W * sizeof(float)>(xr, ahead);
      V::template StoreNarrow4<uint8_t, kStream>(out + r * stride + i,
                                                 EncodeF8<V, Fmt>(V::Div(V::Load(xr), s0)),
                                                 EncodeF8<V, Fmt>(V::Div(V::Load(xr + W), s1)),
                                                 EncodeF8<V, Fmt>(V::Div(V::Load(xr + 2 * W), s2)),
                                                 EncodeF8<V, Fmt>(V::Div(V::Load(xr + 3 * W), s3)));
    }
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    for (size_t r = 0; r < rows; ++r) {
      V::template StoreNarrow<uint8_t>(out + r * stride + i,
                                       EncodeF8<V, Fmt>(V::Div(V::Load(x + r * stride + i), s0)));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(p.scale + i, k);
    for (size_t r = 0; r < rows; ++r) {
      const auto c = EncodeF8<V, Fmt>(V::Div(V::LoadPartial(x + r * stride + i, k), s0));
      V::template StoreNarrowPartial<uint8_t>(out + r * stride + i, c, k);
    }
  }
}

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
    DequantizeRunInt<V, T, kZp, false, false>(x, y, i, p);
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

template <class V, typename T, typename Zp, bool kZp, bool kStream>
void DequantizeVecInt(const void* xv, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                      size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  const T* x = static_cast<const T*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride * sizeof(float), rows)) {
      return DequantizeVecInt<V, T, Zp, kZp, false>(x, y, n, p, rows, stride);
    }
    i = HeadElements<V>(y, sizeof(float), n);
    DequantizeVecInt<V, T, Zp, kZp, false>(x, y, i, p, rows, stride);
  }
  const auto zero = V::Set1I(0);
  const size_t ahead = kDequantizePrefetchBytes / rows;
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto s0 = V::Load(p.scale + i), s1 = V::Load(p.scale + i + W);
    const auto s2 = V::Load(p.scale + i + 2 * W), s3 = V::Load(p.scale + i + 3 * W);
    const auto z0 = kZp ? V::LoadI(p.zp + i) : zero, z1 = kZp ? V::LoadI(p.zp + i + W) : zero;
    const auto z2 = kZp ? V::LoadI(p.zp + i + 2 * W) : zero;
    const auto z3 = kZp ? V::LoadI(p.zp + i + 3 * W) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const T* xr = x + r * stride + i;
      float* yr = y + r * stride + i;
      PrefetchAhead<4 * W * sizeof(T)>(xr, ahead);
      V::template Store<kStream>(yr, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr), s0, z0));
      V::template Store<kStream>(yr + W,
                                 DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + W), s1, z1));
      V::template Store<kStream>(
          yr + 2 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 2 * W), s2, z2));
      V::template Store<kStream>(
          yr + 3 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 3 * W), s3, z3));
    }
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    const auto z0 = kZp ? V::LoadI(p.zp + i) : zero;
    for (size_t r = 0; r < rows; ++r) {
      V::template Store<false>(
          y + r * stride + i,
          DequantizeInt<V, T, kZp>(V::template Widen<T>(x + r * stride + i), s0, z0));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(p.scale + i, k);
    const auto z0 = kZp ? V::LoadPartialI(p.zp + i, k) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const auto f =
          DequantizeInt<V, T, kZp>(V::template WidenPartial<T>(x + r * stride + i, k), s0, z0);
      V::StorePartial(y + r * stride + i, f, k);
    }
  }
}

// ---- dequantize, float8 src --------------------------------------------------------------

// float8 codes (int32 lanes) -> float32, exact: the code's magnitude bits placed at the top of
// a float32 mantissa, times 2^(127 - bias), covers normals and subnormals alike.
template <class V, class Fmt>
inline typename V::F DecodeF8(typename V::I b) {
  const auto mag = V::AndI(b, V::Set1I(0x7F));
  auto f = V::Mul(V::AsF(V::template Sll<23 - Fmt::kMant>(mag)), V::Set1(Pow2(127 - Fmt::kBias)));
  const auto qnan = V::AsF(V::Set1I(0x7FC00000));
  if constexpr (Fmt::kHasInf) {
    f = V::SelectF(V::CmpEqI(mag, V::Set1I(0x7C)), V::AsF(V::Set1I(0x7F800000)), f);
    f = V::SelectF(V::CmpGtI(mag, V::Set1I(0x7C)), qnan, f);
  } else {
    f = V::SelectF(V::CmpEqI(mag, V::Set1I(0x7F)), qnan, f);
  }
  const auto sign = V::template Sll<24>(V::AndI(b, V::Set1I(0x80)));
  return V::AsF(V::OrI(V::AsI(f), sign));
}

template <class V, class Fmt, bool kZp, bool kStream>
void DequantizeRunF8(const void* xv, float* y, size_t n, const DequantizeRow& p) {
  constexpr size_t W = V::kWidth;
  const uint8_t* x = static_cast<const uint8_t*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(y, sizeof(float), n);
    DequantizeRunF8<V, Fmt, kZp, false>(x, y, i, p);
  }
  const auto s = V::Set1(p.scale);
  for (; i + W <= n; i += W) {
    V::template Store<kStream>(y + i,
                               V::Mul(DecodeF8<V, Fmt>(V::template Widen<uint8_t>(x + i)), s));
  }
  if (i < n) {
    const auto f = DecodeF8<V, Fmt>(V::template WidenPartial<uint8_t>(x + i, n - i));
    V::StorePartial(y + i, V::Mul(f, s), n - i);
  }
}

template <class V, class Fmt, typename Zp, bool kStream>
void DequantizeVecF8(const void* xv, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                     size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  const uint8_t* x = static_cast<const uint8_t*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride * sizeof(float), rows)) {
      return DequantizeVecF8<V, Fmt, Zp, false>(x, y, n, p, rows, stride);
    }
    i = HeadElements<V>(y, sizeof(float), n);
    DequantizeVecF8<V, Fmt, Zp, false>(x, y, i, p, rows, stride);
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    for (size_t r = 0; r < rows; ++r) {
      const auto f = DecodeF8<V, Fmt>(V::template Widen<uint8_t>(x + r * stride + i));
      V::template Store<kStream>(y + r * stride + i, V::Mul(f, s0));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(p.scale + i, k);
    for (size_t r = 0; r < rows; ++r) {
      const auto f = DecodeF8<V, Fmt>(V::template WidenPartial<uint8_t>(x + r * stride + i, k));
      V::StorePartial(y + r * stride + i, V::Mul(f, s0), k);
    }
  }
}

// ---- tables ------------------------------------------------------------------------------

// Float8 kernels ignore zero points (the spec forbids them): their [zp] variants are the same.
template <class V, typename T>
constexpr QuantizeKernels QuantizeIntKernels() {
  return {{{QuantizeRunInt<V, T, false, false>, QuantizeRunInt<V, T, false, true>},
           {QuantizeRunInt<V, T, true, false>, QuantizeRunInt<V, T, true, true>}},
          {{QuantizeVecInt<V, T, int32_t, false, false>, QuantizeVecInt<V, T, int32_t, false, true>},
           {QuantizeVecInt<V, T, int32_t, true, false>, QuantizeVecInt<V, T, int32_t, true, true>}},
          {QuantizeVecInt<V, T, int16_t, true, false>, QuantizeVecInt<V, T, int16_t, true, true>}};
}

template <class V, class Fmt>
constexpr QuantizeKernels QuantizeF8Kernels() {
  return {{{QuantizeRunF8<V, Fmt, false, false>, QuantizeRunF8<V, Fmt, false, true>},
           {QuantizeRunF8<V, Fmt, false, false>, QuantizeRunF8<V, Fmt, false, true>}},
          {{QuantizeVecF8<V, Fmt, int32_t, false>, QuantizeVecF8<V, Fmt, int32_t, true>},
           {QuantizeVecF8<V, Fmt, int32_t, false>, QuantizeVecF8<V, Fmt, int32_t, true>}},
          {QuantizeVecF8<V, Fmt, int16_t, false>, QuantizeVecF8<V, Fmt, int16_t, true>}};
}

template <class V, typename T>
constexpr DequantizeKernels DequantizeIntKernels() {
  return {
      {{DequantizeRunInt<V, T, false, false>, DequantizeRunInt<V, T, false, true>},
       {DequantizeRunInt<V, T, true, false>, DequantizeRunInt<V, T, true, true>}},
      {{DequantizeVecInt<V, T, int32_t, false, false>, DequantizeVecInt<V, T, int32_t, false, true>},
       {DequantizeVecInt<V, T, int32_t, true, false>, DequantizeVecInt<V, T, int32_t, true, true>}},
      {DequantizeVecInt<V, T, int16_t, true, false>, DequantizeVecInt<V, T, int16_t, true, true>}};
}

template <class V, class Fmt>
constexpr DequantizeKernels DequantizeF8Kernels() {
  return {{{DequantizeRunF8<V, Fmt, false, false>, DequantizeRunF8<V, Fmt, false, true>},
           {DequantizeRunF8<V, Fmt, false, false>, DequantizeRunF8<V, Fmt, false, true>}},
          {{DequantizeVecF8<V, Fmt, int32_t, false>, DequantizeVecF8<V, Fmt, int32_t, true>},
           {DequantizeVecF8<V, Fmt, int32_t, false>, DequantizeVecF8<V, Fmt, int32_t, true>}},
          {DequantizeVecF8<V, Fmt, int16_t, false>, DequantizeVecF8<V, Fmt, int16_t, true>}};
}

template <class V>
constexpr KernelTable MakeTable(Isa isa, const char* name) {
  return KernelTable{
      isa,
      name,
      &V::Fence,
      {QuantizeIntKernels<V, int8_t>(), QuantizeIntKernels<V, uint8_t>(),
       QuantizeF8Kernels<V, E4M3>(), QuantizeF8Kernels<V, E5M2>()},
      {DequantizeIntKernels<V, int8_t>(), DequantizeIntKernels<V, uint8_t>(),
       DequantizeF8Kernels<V, E4M3>(), DequantizeF8Kernels<V, E5M2>()},
  };
}

}  // namespace qg::kernels::simd
