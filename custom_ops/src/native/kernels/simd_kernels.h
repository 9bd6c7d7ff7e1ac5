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

#include "convert.h"
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

// Prefetches the kBytes (a multiple of kLine) that start `ahead` bytes after p. Forced inline:
// a call to it has no effect GCC can see, and GCC 12 dropped every prefetch of the quantize vec
// kernels when it was called from ForColumnBlocks (always_inline) without it.
template <size_t kBytes>
__attribute__((always_inline)) inline void PrefetchAhead(const void* p,
                                                         size_t ahead = kPrefetchBytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + ahead;
  for (size_t b = 0; b < kBytes; b += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(at + b), 0, 3);
  }
}

// A column block's parameters: 4 vectors of scales and (kZp) of zero points.
template <class V>
struct ParamBlock {
  typename V::F s0, s1, s2, s3;
  typename V::I z0, z1, z2, z3;
};

// The vec kernels' loop, written once: column blocks of 4 vectors, then single vectors, then a
// partial one, each block's parameters loaded once and kept in registers for all `rows` rows
// (row r at element offset r * stride of x and y; x prefetched `prefetch` bytes ahead in all).
// A kernel states its arithmetic at element offset o: block(o, ParamBlock) (the only streaming
// stores), one(o, scale, zp), partial(o, k, scale, zp); and plain(m), itself without streaming
// stores over the first m columns (kStream: the head up to the alignment, or all of them when
// the rows do not share it). Forced inline, as are the kernels' lambdas, so that each kernel
// still compiles to its own loops.
template <class V, bool kZp, bool kStream, typename Src, typename Dst, typename Zp, class Plain,
          class Block, class One, class Partial>
__attribute__((always_inline)) inline void ForColumnBlocks(const Src* x, const Dst* y, size_t n,
                                                           const ChannelParams<Zp>& p, size_t rows,
                                                           size_t stride, size_t prefetch,
                                                           Plain plain, Block block, One one,
                                                           Partial partial) {
  constexpr size_t W = V::kWidth;
  size_t i = 0;
  if constexpr (kStream) {
    if (!RowsShareAlignment<V>(stride * sizeof(Dst), rows)) return plain(n);
    i = HeadElements<V>(y, sizeof(Dst), n);
    plain(i);
  }
  const auto zero = V::Set1I(0);
  // The rows advance together: `prefetch` bytes ahead in the order of reading is
  // prefetch / rows ahead in each row.
  const size_t ahead = prefetch / rows;
  for (; i + 4 * W <= n; i += 4 * W) {
    const ParamBlock<V> b = {V::Load(p.scale + i),
                             V::Load(p.scale + i + W),
                             V::Load(p.scale + i + 2 * W),
                             V::Load(p.scale + i + 3 * W),
                             kZp ? V::LoadI(p.zp + i) : zero,
                             kZp ? V::LoadI(p.zp + i + W) : zero,
                             kZp ? V::LoadI(p.zp + i + 2 * W) : zero,
                             kZp ? V::LoadI(p.zp + i + 3 * W) : zero};
    for (size_t r = 0; r < rows; ++r) {
      PrefetchAhead<4 * W * sizeof(Src)>(x + r * stride + i, ahead);
      block(r * stride + i, b);
    }
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(p.scale + i);
    const auto z0 = kZp ? V::LoadI(p.zp + i) : zero;
    for (size_t r = 0; r < rows; ++r) one(r * stride + i, s0, z0);
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(p.scale + i, k);
    const auto z0 = kZp ? V::LoadPartialI(p.zp + i, k) : zero;
    for (size_t r = 0; r < rows; ++r) partial(r * stride + i, k, s0, z0);
  }
}

// ---- the two arithmetics (kernels.h) ------------------------------------------------------
//
// Quantize kernels and the float8 dequantize kernels are templates on A, the arithmetic:
// OnnxArithmetic divides by the scale and adds the zero point to the rounded integer;
// OnednnArithmetic multiplies by the caller's m = fl(1 / scale), adds the zero point converted
// to float before rounding (two roundings, as oneDNN's reorder: no FMA), and goes to float8
// through float16. Integer dequantize is the same in both (the caller keeps oneDNN's zero
// points within kFloatMaxZp there).

template <class V, class Fmt>
inline typename V::I EncodeF8(typename V::F v);
template <class V, class Fmt>
inline typename V::I EncodeF8Onednn(typename V::F v);

struct OnnxArithmetic {
  static constexpr bool kZpInFloat = false;
  template <class V>
  static typename V::F Scale(typename V::F x, typename V::F scale) {
    return V::Div(x, scale);  // IEEE division
  }
  template <class V, class Fmt>
  static typename V::I Float8(typename V::F x, typename V::F scale) {
    return EncodeF8<V, Fmt>(V::Div(x, scale));
  }
  template <class V>
  static typename V::F Product(typename V::F decoded, typename V::F scale) {
    return V::Mul(decoded, scale);
  }
};

struct OnednnArithmetic {
  static constexpr bool kZpInFloat = true;
  template <class V>
  static typename V::F Scale(typename V::F x, typename V::F m) {
    return V::Mul(x, m);
  }
  // oneDNN's reference reorder adds its (zero) dst zero point: -0 becomes +0.
  template <class V, class Fmt>
  static typename V::I Float8(typename V::F x, typename V::F m) {
    return EncodeF8Onednn<V, Fmt>(V::Add(V::Mul(x, m), V::Set1(0.0f)));
  }
  template <class V>
  static typename V::F Product(typename V::F decoded, typename V::F scale) {
    return V::Add(V::Mul(decoded, scale), V::Set1(0.0f));
  }
};

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
    QuantizeRunIntWith<V, A, T, kZp, false, kTight, kPacked, false>(x, out, i, p);
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
// zero point in [0, 2^29] that saturates to qmin).
template <class V, class A, typename T, typename Zp, bool kZp, bool kStream, Clamp kPacked>
void QuantizeVecIntWith(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p,
                        size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  T* out = static_cast<T*>(y);
  const auto lo = V::Set1(-kSimdClamp), hi = V::Set1(kSimdClamp);
  ForColumnBlocks<V, kZp, kStream>(
      x, out, n, p, rows, stride, kPrefetchBytes,
      [&](size_t m) __attribute__((always_inline)) {
        QuantizeVecIntWith<V, A, T, Zp, kZp, false, kPacked>(x, out, m, p, rows, stride);
      },
      [&](size_t o, const ParamBlock<V>& b) __attribute__((always_inline)) {
        const float* xr = x + o;
        const auto q0 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr), b.s0, b.z0, lo, hi);
        const auto q1 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + W), b.s1, b.z1, lo, hi);
        const auto q2 =
            QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + 2 * W), b.s2, b.z2, lo, hi);
        const auto q3 =
            QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(xr + 3 * W), b.s3, b.z3, lo, hi);
        V::template StoreNarrow4<T, kStream>(out + o, q0, q1, q2, q3);
      },
      [&](size_t o, auto s, auto z) __attribute__((always_inline)) {
        V::template StoreNarrow<T>(out + o, QuantizeInt<V, A, kZp>(V::Load(x + o), s, z));
      },
      [&](size_t o, size_t k, auto s, auto z) __attribute__((always_inline)) {
        // Padding lanes divide 0 by 0: NaN, clamped and not stored.
        const auto q = QuantizeInt<V, A, kZp>(V::LoadPartial(x + o, k), s, z);
        V::template StoreNarrowPartial<T>(out + o, q, k);
      });
}

// Contiguous rows of a short pattern (ChannelParams::padded, stride == n, n a multiple of
// 4 vectors) as one run of `total` elements, like QuantizeRunIntWith: the same prefetch and
// 4-vector loop, the parameters of element t (p[t % period], j below) loaded from the pattern
// (in L1) beside the data; a 4-vector block that crosses the pattern's end reads the padding.
// The arithmetic is QuantizeVecIntWith's, element for element. kHoist: the period is 4
// vectors (16 or 64 columns on AVX-512), so every 4-vector block has the same parameters: they
// stay in registers, and the loop is the per-tensor one.
template <class V, class A, typename T, typename Zp, bool kZp, bool kStream, Clamp kPacked,
          bool kHoist>
void QuantizeFlatInt(const float* x, T* out, size_t total, const QuantizeVecOf<Zp>& p,
                     size_t period) {
  constexpr size_t W = V::kWidth;
  static_assert(4 * W <= kPatternPad);
  // See AlignedHead (streaming or not: misaligned 64-byte stores straddle cache lines); the
  // head is shorter than 4 vectors, so shorter than a period.
  size_t t = HeadElements<V>(out, 1, total);
  QuantizeVecIntWith<V, A, T, Zp, kZp, false, kPacked>(x, out, t, p, 1, t);
  size_t j = t;  // t % period
  const auto zero = V::Set1I(0);
  const auto lo = V::Set1(-kSimdClamp), hi = V::Set1(kSimdClamp);
  if constexpr (kHoist) {  // j stays where the head left it
    const float* s = p.scale + j;
    const auto s0 = V::Load(s), s1 = V::Load(s + W), s2 = V::Load(s + 2 * W);
    const auto s3 = V::Load(s + 3 * W);
    const auto z0 = kZp ? V::LoadI(p.zp + j) : zero, z1 = kZp ? V::LoadI(p.zp + j + W) : zero;
    const auto z2 = kZp ? V::LoadI(p.zp + j + 2 * W) : zero;
    const auto z3 = kZp ? V::LoadI(p.zp + j + 3 * W) : zero;
    for (; t + 4 * W <= total; t += 4 * W) {
      PrefetchAhead<4 * W * sizeof(float)>(x + t);
      const auto q0 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t), s0, z0, lo, hi);
      const auto q1 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + W), s1, z1, lo, hi);
      const auto q2 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + 2 * W), s2, z2, lo, hi);
      const auto q3 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + 3 * W), s3, z3, lo, hi);
      V::template StoreNarrow4<T, kStream>(out + t, q0, q1, q2, q3);
    }
  } else {
    for (; t + 4 * W <= total; t += 4 * W) {
      PrefetchAhead<4 * W * sizeof(float)>(x + t);
      const float* s = p.scale + j;
      const auto z0 = kZp ? V::LoadI(p.zp + j) : zero, z1 = kZp ? V::LoadI(p.zp + j + W) : zero;
      const auto z2 = kZp ? V::LoadI(p.zp + j + 2 * W) : zero;
      const auto z3 = kZp ? V::LoadI(p.zp + j + 3 * W) : zero;
      const auto q0 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t), V::Load(s), z0, lo, hi);
      const auto q1 =
          QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + W), V::Load(s + W), z1, lo, hi);
      const auto q2 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + 2 * W),
                                                         V::Load(s + 2 * W), z2, lo, hi);
      const auto q3 = QuantizeIntPacked<V, A, kZp, kPacked>(V::Load(x + t + 3 * W),
                                                         V::Load(s + 3 * W), z3, lo, hi);
      V::template StoreNarrow4<T, kStream>(out + t, q0, q1, q2, q3);
      j += 4 * W;
      if (j >= period) j -= period;
    }
  }
  for (; t + W <= total; t += W) {
    const auto z0 = kZp ? V::LoadI(p.zp + j) : zero;
    const auto q = QuantizeInt<V, A, kZp>(V::Load(x + t), V::Load(p.scale + j), z0);
    V::template StoreNarrow<T>(out + t, q);
    j += W;
    if (j >= period) j -= period;
  }
  if (t < total) {
    const size_t k = total - t;
    // Padding lanes divide 0 by 0: NaN, clamped and not stored.
    const auto s0 = V::LoadPartial(p.scale + j, k);
    const auto z0 = kZp ? V::LoadPartialI(p.zp + j, k) : zero;
    const auto q = QuantizeInt<V, A, kZp>(V::LoadPartial(x + t, k), s0, z0);
    V::template StoreNarrowPartial<T>(out + t, q, k);
  }
}

template <class V, class A, typename T, typename Zp, bool kZp, bool kStream>
void QuantizeVecInt(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                    size_t stride) {
  if (p.padded && stride == n && n % (4 * V::kWidth) == 0) {
    T* out = static_cast<T*>(y);
    const bool hoist = n == 4 * V::kWidth;
    if (!kZp || A::kZpInFloat || p.zp_nonnegative) {
      if (hoist) {
        QuantizeFlatInt<V, A, T, Zp, kZp, kStream, Clamp::kAbove, true>(x, out, rows * n, p, n);
      } else {
        QuantizeFlatInt<V, A, T, Zp, kZp, kStream, Clamp::kAbove, false>(x, out, rows * n, p, n);
      }
    } else if (hoist) {
      QuantizeFlatInt<V, A, T, Zp, kZp, kStream, Clamp::kBoth, true>(x, out, rows * n, p, n);
    } else {
      QuantizeFlatInt<V, A, T, Zp, kZp, kStream, Clamp::kBoth, false>(x, out, rows * n, p, n);
    }
    return;
  }
  if (!kZp || A::kZpInFloat || p.zp_nonnegative) {
    QuantizeVecIntWith<V, A, T, Zp, kZp, kStream, Clamp::kAbove>(x, y, n, p, rows, stride);
  } else {
    QuantizeVecIntWith<V, A, T, Zp, kZp, kStream, Clamp::kBoth>(x, y, n, p, rows, stride);
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

// oneDNN's float32 -> float8 (common/float8.cpp): through float16 (F16C's conversion, round to
// nearest even, overflow to inf: bit-exact with its float16_t), no saturation.
// * e4m3: float16 magnitudes above 464 (inf and NaN included) -> sign | 0x7F (NaN); the rest
//   round to nearest even, which EncodeF8 does exactly on the float16 value (448 < |v| <= 464
//   saturates to 448, the even neighbour).
// * e5m2 (float16's exponent): the float16 bits rounded to nearest even at bit 8, inf and
//   overflow from 61440 on landing on inf; NaN -> its top byte with the quiet bit set.
template <class V, class Fmt>
inline typename V::I EncodeF8Onednn(typename V::F v) {
  if constexpr (Fmt::kHasInf) {
    const auto h = V::HalfBits(v);
    const auto rounded = V::template Srl<8>(
        V::AddI(V::AddI(h, V::Set1I(0x7F)), V::AndI(V::template Srl<8>(h), V::Set1I(1))));
    const auto nan = V::CmpGtI(V::AndI(h, V::Set1I(0x7FFF)), V::Set1I(0x7C00));
    return V::SelectI(nan, V::OrI(V::template Srl<8>(h), V::Set1I(0x02)), rounded);
  } else {
    const auto h = V::HalfRound(v);  // the float16 value, exactly in float32
    const auto bits = V::AsI(h);
    const auto above = V::CmpGtI(V::AndI(bits, V::Set1I(0x7FFFFFFF)), V::Set1I(0x43E80000));  // 464
    const auto nan = V::OrI(V::template Srl<24>(V::AndI(bits, V::Set1I(INT32_MIN))),
                            V::Set1I(0x7F));
    return V::SelectI(above, nan, EncodeF8<V, Fmt>(h));
  }
}

template <class V, class A, class Fmt, bool kZp, bool kStream>
void QuantizeRunF8(const float* x, void* y, size_t n, const QuantizeRow& p) {
  constexpr size_t W = V::kWidth;
  uint8_t* out = static_cast<uint8_t*>(y);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(out, 1, n);
    QuantizeRunF8<V, A, Fmt, kZp, false>(x, out, i, p);
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

// Contiguous rows of a short pattern as one run (see QuantizeFlatInt); like DequantizeRunInt,
// no prefetch.
template <class V, typename T, typename Zp, bool kZp, bool kStream, bool kHoist>
void DequantizeFlatInt(const T* x, float* y, size_t total, const DequantizeVecOf<Zp>& p,
                       size_t period);

template <class V, typename T, typename Zp, bool kZp, bool kStream>
void DequantizeVecInt(const void* xv, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                      size_t rows, size_t stride) {
  constexpr size_t W = V::kWidth;
  const T* x = static_cast<const T*>(xv);
  if (p.padded && stride == n && n % (4 * W) == 0) {
    if (n == 4 * W) return DequantizeFlatInt<V, T, Zp, kZp, kStream, true>(x, y, rows * n, p, n);
    return DequantizeFlatInt<V, T, Zp, kZp, kStream, false>(x, y, rows * n, p, n);
  }
  ForColumnBlocks<V, kZp, kStream>(
      x, y, n, p, rows, stride, kDequantizePrefetchBytes,
      [&](size_t m) __attribute__((always_inline)) {
        DequantizeVecInt<V, T, Zp, kZp, false>(x, y, m, p, rows, stride);
      },
      [&](size_t o, const ParamBlock<V>& b) __attribute__((always_inline)) {
        const T* xr = x + o;
        float* yr = y + o;
        V::template Store<kStream>(yr,
                                   DequantizeInt<V, T, kZp>(V::template Widen<T>(xr), b.s0, b.z0));
        V::template Store<kStream>(
            yr + W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + W), b.s1, b.z1));
        V::template Store<kStream>(
            yr + 2 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 2 * W), b.s2, b.z2));
        V::template Store<kStream>(
            yr + 3 * W, DequantizeInt<V, T, kZp>(V::template Widen<T>(xr + 3 * W), b.s3, b.z3));
      },
      [&](size_t o, auto s, auto z) __attribute__((always_inline)) {
        V::template Store<false>(y + o,
                                 DequantizeInt<V, T, kZp>(V::template Widen<T>(x + o), s, z));
      },
      [&](size_t o, size_t k, auto s, auto z) __attribute__((always_inline)) {
        const auto f = DequantizeInt<V, T, kZp>(V::template WidenPartial<T>(x + o, k), s, z);
        V::StorePartial(y + o, f, k);
      });
}

template <class V, typename T, typename Zp, bool kZp, bool kStream, bool kHoist>
void DequantizeFlatInt(const T* x, float* y, size_t total, const DequantizeVecOf<Zp>& p,
                       size_t period) {
  constexpr size_t W = V::kWidth;
  static_assert(4 * W <= kPatternPad);
  // See QuantizeFlatInt; stride t + 1: not flat again.
  size_t t = HeadElements<V>(y, sizeof(float), total);
  DequantizeVecInt<V, T, Zp, kZp, false>(x, y, t, p, 1, t + 1);
  size_t j = t;  // t % period
  const auto zero = V::Set1I(0);
  const float* s = p.scale + j;  // kHoist: j stays where the head left it
  const auto hs0 = V::Load(s), hs1 = V::Load(s + W), hs2 = V::Load(s + 2 * W);
  const auto hs3 = V::Load(s + 3 * W);
  const auto hz0 = kZp ? V::LoadI(p.zp + j) : zero, hz1 = kZp ? V::LoadI(p.zp + j + W) : zero;
  const auto hz2 = kZp ? V::LoadI(p.zp + j + 2 * W) : zero;
  const auto hz3 = kZp ? V::LoadI(p.zp + j + 3 * W) : zero;
  for (; t + 4 * W <= total; t += 4 * W) {
    s = p.scale + j;
    const auto s0 = kHoist ? hs0 : V::Load(s), s1 = kHoist ? hs1 : V::Load(s + W);
    const auto s2 = kHoist ? hs2 : V::Load(s + 2 * W), s3 = kHoist ? hs3 : V::Load(s + 3 * W);
    const auto z0 = kHoist || !kZp ? hz0 : V::LoadI(p.zp + j);
    const auto z1 = kHoist || !kZp ? hz1 : V::LoadI(p.zp + j + W);
    const auto z2 = kHoist || !kZp ? hz2 : V::LoadI(p.zp + j + 2 * W);
    const auto z3 = kHoist || !kZp ? hz3 : V::LoadI(p.zp + j + 3 * W);
    const auto f0 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + t), s0, z0);
    const auto f1 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + t + W), s1, z1);
    const auto f2 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + t + 2 * W), s2, z2);
    const auto f3 = DequantizeInt<V, T, kZp>(V::template Widen<T>(x + t + 3 * W), s3, z3);
    V::template Store<kStream>(y + t, f0);
    V::template Store<kStream>(y + t + W, f1);
    V::template Store<kStream>(y + t + 2 * W, f2);
    V::template Store<kStream>(y + t + 3 * W, f3);
    if constexpr (!kHoist) {
      j += 4 * W;
      if (j >= period) j -= period;
    }
  }
  for (; t + W <= total; t += W) {
    const auto z0 = kZp ? V::LoadI(p.zp + j) : zero;
    V::template Store<false>(
        y + t, DequantizeInt<V, T, kZp>(V::template Widen<T>(x + t), V::Load(p.scale + j), z0));
    j += W;
    if (j >= period) j -= period;
  }
  if (t < total) {
    const size_t k = total - t;
    const auto s0 = V::LoadPartial(p.scale + j, k);
    const auto z0 = kZp ? V::LoadPartialI(p.zp + j, k) : zero;
    const auto f = DequantizeInt<V, T, kZp>(V::template WidenPartial<T>(x + t, k), s0, z0);
    V::StorePartial(y + t, f, k);
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

template <class V, class A, class Fmt, bool kZp, bool kStream>
void DequantizeRunF8(const void* xv, float* y, size_t n, const DequantizeRow& p) {
  constexpr size_t W = V::kWidth;
  const uint8_t* x = static_cast<const uint8_t*>(xv);
  size_t i = 0;
  if constexpr (kStream) {
    i = HeadElements<V>(y, sizeof(float), n);
    DequantizeRunF8<V, A, Fmt, kZp, false>(x, y, i, p);
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

// ---- per-group dequantize ----------------------------------------------------------------

// W src elements from element e (even for 4-bit types) as float values; partial: k < W.
template <class V, int kSrc>
inline typename V::F GroupLoad(const void* x, size_t e) {
  if constexpr (kSrc == kGroupS8) {
    return V::CvtF(V::template Widen<int8_t>(static_cast<const int8_t*>(x) + e));
  } else if constexpr (kSrc == kGroupU8) {
    return V::CvtF(V::template Widen<uint8_t>(static_cast<const uint8_t*>(x) + e));
  } else {
    return V::template Nibbles<kSrc == kGroupS4>(static_cast<const uint8_t*>(x) + e / 2);
  }
}

template <class V, int kSrc>
inline typename V::F GroupLoadPartial(const void* x, size_t e, size_t k) {
  if constexpr (kSrc == kGroupS8) {
    return V::CvtF(V::template WidenPartial<int8_t>(static_cast<const int8_t*>(x) + e, k));
  } else if constexpr (kSrc == kGroupU8) {
    return V::CvtF(V::template WidenPartial<uint8_t>(static_cast<const uint8_t*>(x) + e, k));
  } else {
    return V::template NibblesPartial<kSrc == kGroupS4>(static_cast<const uint8_t*>(x) + e / 2,
                                                        k);
  }
}

// float32 -> bfloat16 bits in int32 lanes: round to nearest even, NaN -> sign | 0x7FC0 (as
// FloatToBFloat16; AVX512_BF16's conversion would flush subnormals).
template <class V>
inline typename V::I BFloat16Bits(typename V::F v) {
  const auto b = V::AsI(v);
  const auto lsb = V::AndI(V::template Srl<16>(b), V::Set1I(1));
  const auto rounded = V::template Srl<16>(V::AddI(b, V::AddI(lsb, V::Set1I(0x7FFF))));
  const auto nan = V::CmpGtI(V::AndI(b, V::Set1I(0x7FFFFFFF)), V::Set1I(0x7F800000));
  const auto quiet = V::OrI(V::AndI(V::template Srl<16>(b), V::Set1I(0x8000)), V::Set1I(0x7FC0));
  return V::SelectI(nan, quiet, rounded);
}

template <class V, int kDst>
inline void GroupStore(void* y, size_t i, typename V::F v) {
  if constexpr (kDst == kGroupF32) {
    V::template Store<false>(static_cast<float*>(y) + i, v);
  } else if constexpr (kDst == kGroupF16) {
    V::StoreF16(static_cast<uint16_t*>(y) + i, v);
  } else {
    V::StoreU16(static_cast<uint16_t*>(y) + i, BFloat16Bits<V>(v));
  }
}

template <class V, int kDst>
inline void GroupStorePartial(void* y, size_t i, typename V::F v, size_t k) {
  if constexpr (kDst == kGroupF32) {
    V::StorePartial(static_cast<float*>(y) + i, v, k);
  } else if constexpr (kDst == kGroupF16) {
    V::StoreF16Partial(static_cast<uint16_t*>(y) + i, v, k);
  } else {
    V::StoreU16Partial(static_cast<uint16_t*>(y) + i, BFloat16Bits<V>(v), k);
  }
}

// (x - zp) * scale with x and zp float values: float(x) - float(zp) is float(x - zp), exact
// for |zp| <= kFloatMaxZp.
template <class V, bool kZp>
inline typename V::F GroupValue(typename V::F x, typename V::F scale, typename V::F zp) {
  if constexpr (kZp) x = V::Sub(x, zp);
  return V::Mul(x, scale);
}

// One element the scalar way (bit-exact with the vectors): a 4-bit row's odd first element.
template <int kSrc, int kDst>
inline void GroupOne(const void* x, size_t e, void* y, size_t i, float scale, int32_t zp) {
  const int32_t q = kSrc == kGroupS8   ? static_cast<const int8_t*>(x)[e]
                    : kSrc == kGroupU8 ? static_cast<const uint8_t*>(x)[e]
                                       : Nibble(x, e, kSrc == kGroupS4);
  const float v = static_cast<float>(static_cast<float>(q) - static_cast<float>(zp)) * scale;
  if constexpr (kDst == kGroupF32) {
    static_cast<float*>(y)[i] = v;
  } else if constexpr (kDst == kGroupF16) {
    static_cast<uint16_t*>(y)[i] = FloatToHalf(v);
  } else {
    static_cast<uint16_t*>(y)[i] = FloatToBFloat16(v);
  }
}

inline constexpr bool IsPacked(int src) { return src == kGroupS4 || src == kGroupU4; }

// A parameter per element, the same for every row: each column block's parameters stay in
// registers for all the rows. Row r starts at src element x0 + r * xs (even for 4-bit types)
// and dst element r * ys.
template <class V, int kSrc, int kDst, bool kZp>
void GroupPerElementAligned(const void* x, size_t x0, size_t xs, void* y, size_t ys, size_t n,
                            size_t rows, const float* scale, const int32_t* zp) {
  constexpr size_t W = V::kWidth;
  const auto zero = V::Set1(0.0f);
  size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto s0 = V::Load(scale + i), s1 = V::Load(scale + i + W);
    const auto s2 = V::Load(scale + i + 2 * W), s3 = V::Load(scale + i + 3 * W);
    const auto z0 = kZp ? V::CvtF(V::LoadI(zp + i)) : zero;
    const auto z1 = kZp ? V::CvtF(V::LoadI(zp + i + W)) : zero;
    const auto z2 = kZp ? V::CvtF(V::LoadI(zp + i + 2 * W)) : zero;
    const auto z3 = kZp ? V::CvtF(V::LoadI(zp + i + 3 * W)) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const size_t e = x0 + r * xs + i;
      const size_t o = r * ys + i;
      GroupStore<V, kDst>(y, o, GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e), s0, z0));
      GroupStore<V, kDst>(y, o + W, GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + W), s1, z1));
      GroupStore<V, kDst>(y, o + 2 * W,
                          GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + 2 * W), s2, z2));
      GroupStore<V, kDst>(y, o + 3 * W,
                          GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + 3 * W), s3, z3));
    }
  }
  for (; i + W <= n; i += W) {
    const auto s0 = V::Load(scale + i);
    const auto z0 = kZp ? V::CvtF(V::LoadI(zp + i)) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const auto f = GroupLoad<V, kSrc>(x, x0 + r * xs + i);
      GroupStore<V, kDst>(y, r * ys + i, GroupValue<V, kZp>(f, s0, z0));
    }
  }
  if (i < n) {
    const size_t k = n - i;
    const auto s0 = V::LoadPartial(scale + i, k);
    const auto z0 = kZp ? V::CvtF(V::LoadPartialI(zp + i, k)) : zero;
    for (size_t r = 0; r < rows; ++r) {
      const auto f = GroupLoadPartial<V, kSrc>(x, x0 + r * xs + i, k);
      GroupStorePartial<V, kDst>(y, r * ys + i, GroupValue<V, kZp>(f, s0, z0), k);
    }
  }
}

// As GroupPerElementAligned, any start: a 4-bit row starting at an odd element converts that
// element alone, then the rest from the byte boundary (rows one at a time when they start at
// different parities).
template <class V, int kSrc, int kDst, bool kZp>
void GroupPerElement(const void* x, size_t x0, size_t xs, void* y, size_t ys, size_t n,
                     size_t rows, const float* scale, const int32_t* zp) {
  if constexpr (IsPacked(kSrc)) {
    if (n == 0) return;
    if ((x0 & 1u) != 0 || (rows > 1 && (xs & 1u) != 0)) {
      constexpr size_t kDstSize = kDst == kGroupF32 ? 4 : 2;
      for (size_t r = 0; r < rows; ++r) {
        const size_t e = x0 + r * xs;
        void* yr = static_cast<char*>(y) + r * ys * kDstSize;
        if ((e & 1u) == 0) {
          GroupPerElementAligned<V, kSrc, kDst, kZp>(x, e, 0, yr, 0, n, 1, scale, zp);
          continue;
        }
        GroupOne<kSrc, kDst>(x, e, yr, 0, scale[0], kZp ? zp[0] : 0);
        GroupPerElementAligned<V, kSrc, kDst, kZp>(x, e + 1, 0, static_cast<char*>(yr) + kDstSize,
                                                   0, n - 1, 1, scale + 1, kZp ? zp + 1 : zp);
      }
      return;
    }
  }
  GroupPerElementAligned<V, kSrc, kDst, kZp>(x, x0, xs, y, ys, n, rows, scale, zp);
}

// len elements from src element e with one scale and zero point (4-bit: any e).
template <class V, int kSrc, int kDst, bool kZp>
void GroupSegment(const void* x, size_t e, void* y, size_t o, size_t len, float scale,
                  int32_t zp) {
  constexpr size_t W = V::kWidth;
  if constexpr (IsPacked(kSrc)) {
    if ((e & 1u) != 0 && len != 0) {
      GroupOne<kSrc, kDst>(x, e, y, o, scale, zp);
      ++e;
      ++o;
      --len;
    }
  }
  const auto s = V::Set1(scale);
  const auto z = V::Set1(static_cast<float>(zp));
  size_t i = 0;
  for (; i + 4 * W <= len; i += 4 * W) {
    const auto f0 = GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + i), s, z);
    const auto f1 = GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + i + W), s, z);
    const auto f2 = GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + i + 2 * W), s, z);
    const auto f3 = GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + i + 3 * W), s, z);
    GroupStore<V, kDst>(y, o + i, f0);
    GroupStore<V, kDst>(y, o + i + W, f1);
    GroupStore<V, kDst>(y, o + i + 2 * W, f2);
    GroupStore<V, kDst>(y, o + i + 3 * W, f3);
  }
  for (; i + W <= len; i += W) {
    GroupStore<V, kDst>(y, o + i, GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e + i), s, z));
  }
  if (i < len) {
    const auto f = GroupLoadPartial<V, kSrc>(x, e + i, len - i);
    GroupStorePartial<V, kDst>(y, o + i, GroupValue<V, kZp>(f, s, z), len - i);
  }
}

// Groups shorter than a vector: a vector's parameters are among the kWidth from its first
// element's, so one permute of them gives the lanes theirs (lane l: parameter
// (r0 + l) / group, r0 the first element's place in its group). Rows start at even src
// elements (4-bit); `params`: the parameters there are from `scale` / `zp` on.
template <class V, int kSrc, int kDst, bool kZp>
void GroupShortAligned(const void* x, size_t x0, size_t xs, void* y, size_t ys, size_t n,
                       size_t rows, const float* scale, const int32_t* zp, size_t group,
                       size_t phase) {
  constexpr size_t W = V::kWidth;
  alignas(64) int32_t index[W][W];  // [r0][lane], r0 < group < W
  for (size_t r0 = 0; r0 < group; ++r0) {
    for (size_t l = 0; l < W; ++l) index[r0][l] = static_cast<int32_t>((r0 + l) / group);
  }
  const size_t params = n == 0 ? 0 : (phase + n - 1) / group + 1;
  const auto zero = V::Set1(0.0f);
  for (size_t i = 0; i < n; i += W) {
    const size_t k = n - i < W ? n - i : W;
    const size_t p0 = (phase + i) / group;
    const auto lanes = V::LoadI(index[(phase + i) % group]);
    const size_t count = params - p0 < W ? params - p0 : W;
    const auto s = V::PermuteF(count == W ? V::Load(scale + p0) : V::LoadPartial(scale + p0, count),
                               lanes);
    auto z = zero;
    if constexpr (kZp) {
      const auto zi = count == W ? V::LoadI(zp + p0) : V::LoadPartialI(zp + p0, count);
      z = V::CvtF(V::PermuteI(zi, lanes));
    }
    for (size_t r = 0; r < rows; ++r) {
      const size_t e = x0 + r * xs + i;
      if (k == W) {
        GroupStore<V, kDst>(y, r * ys + i, GroupValue<V, kZp>(GroupLoad<V, kSrc>(x, e), s, z));
      } else {
        const auto f = GroupLoadPartial<V, kSrc>(x, e, k);
        GroupStorePartial<V, kDst>(y, r * ys + i, GroupValue<V, kZp>(f, s, z), k);
      }
    }
  }
}

// As GroupShortAligned from any start (a 4-bit row at an odd element converts it alone).
template <class V, int kSrc, int kDst, bool kZp>
void GroupShort(const GroupArgs& a) {
  if constexpr (IsPacked(kSrc)) {
    if (a.n != 0 && ((a.x_offset & 1u) != 0 || (a.rows > 1 && (a.x_stride & 1u) != 0))) {
      constexpr size_t kDstSize = kDst == kGroupF32 ? 4 : 2;
      for (size_t r = 0; r < a.rows; ++r) {
        const size_t e = a.x_offset + r * a.x_stride;
        void* yr = static_cast<char*>(a.y) + r * a.y_stride * kDstSize;
        if ((e & 1u) == 0) {
          GroupShortAligned<V, kSrc, kDst, kZp>(a.x, e, 0, yr, 0, a.n, 1, a.scale, a.zp, a.group,
                                                a.phase);
          continue;
        }
        GroupOne<kSrc, kDst>(a.x, e, yr, 0, a.scale[0], kZp ? a.zp[0] : 0);
        const size_t next = a.phase + 1 == a.group ? 1 : 0;  // the next element's parameter
        GroupShortAligned<V, kSrc, kDst, kZp>(
            a.x, e + 1, 0, static_cast<char*>(yr) + kDstSize, 0, a.n - 1, 1, a.scale + next,
            kZp ? a.zp + next : a.zp, a.group, (a.phase + 1) % a.group);
      }
      return;
    }
  }
  GroupShortAligned<V, kSrc, kDst, kZp>(a.x, a.x_offset, a.x_stride, a.y, a.y_stride, a.n,
                                        a.rows, a.scale, a.zp, a.group, a.phase);
}

template <class V, int kSrc, int kDst, bool kZp>
void DequantizeGroupWith(const GroupArgs& a) {
  if (a.group == 1) {
    GroupPerElement<V, kSrc, kDst, kZp>(a.x, a.x_offset, a.x_stride, a.y, a.y_stride, a.n,
                                        a.rows, a.scale, a.zp);
    return;
  }
  if (a.group < V::kWidth) {
    GroupShort<V, kSrc, kDst, kZp>(a);
    return;
  }
  for (size_t r = 0; r < a.rows; ++r) {
    const size_t e = a.x_offset + r * a.x_stride;
    const size_t o = r * a.y_stride;
    size_t p = 0, left = a.group - a.phase;
    for (size_t j = 0; j < a.n; ++p) {
      const size_t len = left < a.n - j ? left : a.n - j;
      GroupSegment<V, kSrc, kDst, kZp>(a.x, e + j, a.y, o + j, len, a.scale[p],
                                       kZp ? a.zp[p] : 0);
      j += len;
      left = a.group;
    }
  }
}

template <class V, int kSrc, int kDst>
void DequantizeGroupDirect(const GroupArgs& a) {
  if (a.zp != nullptr) {
    DequantizeGroupWith<V, kSrc, kDst, true>(a);
  } else {
    DequantizeGroupWith<V, kSrc, kDst, false>(a);
  }
}

// Streaming stores: blocks of up to kStageRows rows by kStageColumns elements are converted
// into a buffer in L1, then copied out with non-temporal stores (so the kernels above need not
// care where the dst rows start).
inline constexpr size_t kStageColumns = 1024;
inline constexpr size_t kStageRows = 4;

template <class V, int kSrc, int kDst>
void DequantizeGroupStream(const GroupArgs& a) {
  constexpr size_t kDstSize = kDst == kGroupF32 ? 4 : 2;
  alignas(64) unsigned char stage[kStageRows * kStageColumns * kDstSize];
  for (size_t c = 0; c < a.n; c += kStageColumns) {
    const size_t len = a.n - c < kStageColumns ? a.n - c : kStageColumns;
    const size_t first = (a.phase + c) / a.group;
    for (size_t r = 0; r < a.rows; r += kStageRows) {
      GroupArgs b = a;
      b.x_offset = a.x_offset + r * a.x_stride + c;
      b.y = stage;
      b.y_stride = kStageColumns;
      b.n = len;
      b.rows = a.rows - r < kStageRows ? a.rows - r : kStageRows;
      b.scale = a.scale + first;
      b.zp = a.zp != nullptr ? a.zp + first : nullptr;
      b.phase = (a.phase + c) % a.group;
      DequantizeGroupDirect<V, kSrc, kDst>(b);
      for (size_t q = 0; q < b.rows; ++q) {
        V::StreamCopy(static_cast<char*>(a.y) + ((r + q) * a.y_stride + c) * kDstSize,
                      stage + q * kStageColumns * kDstSize, len * kDstSize);
      }
    }
  }
}

template <class V, int kSrc, int kDst>
constexpr DequantizeGroupFn GroupKernel(bool stream) {
  return stream ? DequantizeGroupStream<V, kSrc, kDst> : DequantizeGroupDirect<V, kSrc, kDst>;
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
