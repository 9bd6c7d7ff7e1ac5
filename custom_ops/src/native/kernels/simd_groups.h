// The per-group dequantize kernels (s8/u8/s4/u4 -> f32/f16/bf16, a parameter per group of
// elements: every qtype of DynamicDequantize's newer rows) of kernels.h, written once over a
// vector-ops struct V.
#pragma once

#include <cstddef>
#include <cstdint>

#include "convert.h"
#include "kernels.h"

namespace qg::kernels::simd {

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

}  // namespace qg::kernels::simd
