// The loops every SIMD kernel shares, over a vector-ops struct V (Avx2, Avx512): the aligned
// head, the prefetch, and the two drivers of the per-element-parameter (vec) kernels:
// ForColumnBlocks (column blocks over a block of rows) and ForFlatPattern (contiguous rows of a
// short repeating pattern as one run). A kernel supplies its arithmetic as lambdas.
//
// Loops convert 4 vectors per iteration (MLAS-style), then single vectors, then one masked or
// partial vector for the tail; there is no scalar tail. kStream variants write the aligned
// body with non-temporal stores (a head up to the alignment uses ordinary stores); the caller
// fences (KernelTable::fence) once per block of work, not once per call.
#pragma once

#include <cstddef>
#include <cstdint>

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

// The 4 vectors of parameters that start at element i of p's arrays (zero points: kZp).
template <class V, bool kZp, typename Zp>
__attribute__((always_inline)) inline ParamBlock<V> LoadParamBlock(const ChannelParams<Zp>& p,
                                                                   size_t i) {
  constexpr size_t W = V::kWidth;
  const auto zero = V::Set1I(0);
  return {V::Load(p.scale + i),
          V::Load(p.scale + i + W),
          V::Load(p.scale + i + 2 * W),
          V::Load(p.scale + i + 3 * W),
          kZp ? V::LoadI(p.zp + i) : zero,
          kZp ? V::LoadI(p.zp + i + W) : zero,
          kZp ? V::LoadI(p.zp + i + 2 * W) : zero,
          kZp ? V::LoadI(p.zp + i + 3 * W) : zero};
}

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
    const ParamBlock<V> b = LoadParamBlock<V, kZp>(p, i);
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

// How a vec kernel walks its rows: column blocks over blocks of rows (ForColumnBlocks), or the
// rows as one flat run (ForFlatPattern), its period's parameters hoisted into registers or not.
enum class Walk { kRows, kFlat, kFlatHoisted };

// The flat loop, written once: contiguous rows of a short pattern (ChannelParams::padded,
// stride == n, n == period a multiple of 4 vectors) as one run of `total` elements, like a
// per-tensor run kernel: the same 4-vector loop and (kPrefetch bytes ahead, 0: none) prefetch,
// the parameters of element t (p[t % period], j below) loaded from the pattern (in L1) beside
// the data; a 4-vector block that crosses the pattern's end reads the padding. head(m) converts
// the first m elements without streaming stores: up to the output's alignment (see
// AlignedHead: streaming or not, misaligned 64-byte stores straddle cache lines), shorter than
// 4 vectors, so than a period. block, one and partial state the arithmetic as for
// ForColumnBlocks, at element offset t of the run. kHoist: the period is 4 vectors (16 or 64
// columns on AVX-512), so every 4-vector block has the same parameters: they stay in
// registers, and the loop is the per-tensor one.
template <class V, bool kZp, bool kHoist, size_t kPrefetch, typename Src, typename Dst,
          typename Zp, class Head, class Block, class One, class Partial>
__attribute__((always_inline)) inline void ForFlatPattern(const Src* x, const Dst* y,
                                                          size_t total, const ChannelParams<Zp>& p,
                                                          size_t period, Head head, Block block,
                                                          One one, Partial partial) {
  constexpr size_t W = V::kWidth;
  static_assert(4 * W <= kPatternPad);
  size_t t = HeadElements<V>(y, sizeof(Dst), total);
  head(t);
  size_t j = t;  // t % period
  const auto zero = V::Set1I(0);
  if constexpr (kHoist) {  // j stays where the head left it
    const ParamBlock<V> b = LoadParamBlock<V, kZp>(p, j);
    for (; t + 4 * W <= total; t += 4 * W) {
      if constexpr (kPrefetch != 0) PrefetchAhead<4 * W * sizeof(Src)>(x + t, kPrefetch);
      block(t, b);
    }
  } else {
    for (; t + 4 * W <= total; t += 4 * W) {
      if constexpr (kPrefetch != 0) PrefetchAhead<4 * W * sizeof(Src)>(x + t, kPrefetch);
      block(t, LoadParamBlock<V, kZp>(p, j));
      j += 4 * W;
      if (j >= period) j -= period;
    }
  }
  for (; t + W <= total; t += W) {
    one(t, V::Load(p.scale + j), kZp ? V::LoadI(p.zp + j) : zero);
    j += W;
    if (j >= period) j -= period;
  }
  if (t < total) {
    const size_t k = total - t;
    partial(t, k, V::LoadPartial(p.scale + j, k), kZp ? V::LoadPartialI(p.zp + j, k) : zero);
  }
}

}  // namespace qg::kernels::simd
