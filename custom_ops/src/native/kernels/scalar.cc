// Portable kernels: the definition of the arithmetic (see kernels.h). ONNX's compute in
// double/int64, so they are also the path for zero points too large for the SIMD tables'
// int32 lanes; oneDNN's compute in float32 as oneDNN does (exact for every zero point too).
#include <cmath>

#include "convert.h"
#include "kernels.h"

namespace qg::kernels {
namespace {

template <typename T>
struct IntLimits;
template <>
struct IntLimits<int8_t> {
  static constexpr int64_t kMin = -128, kMax = 127;
};
template <>
struct IntLimits<uint8_t> {
  static constexpr int64_t kMin = 0, kMax = 255;
};

// Round half to even for |d| < 2^51 under the default rounding mode, without a libm call:
// adding 1.5 * 2^52 leaves no fraction bits, so the addition itself rounds (the build has no
// -ffast-math, so the compiler keeps both operations).
inline double RoundHalfEven(double d) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return (d + kMagic) - kMagic;
}

// float32 -> float8 with round-to-nearest-even after saturation to +-max; NaN -> NaN.
// kMant: mantissa bits, kBias: exponent bias, kMax: largest finite value, kNan: NaN code.
template <int kMant, int kBias, uint32_t kMaxBits, uint8_t kNan>
inline uint8_t EncodeFloat8(float v) {
  const uint32_t bits = FloatToBits(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<uint8_t>(sign | kNan);
  if (abs_bits > kMaxBits) abs_bits = kMaxBits;  // finite overflow and inf saturate
  // Smallest normal: 2^(1 - kBias); below it the code is round(|v| / 2^(1 - kBias - kMant)).
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(128 - kBias) << 23;
  uint32_t code;
  if (abs_bits < kMinNormalBits) {
    const float scaled = BitsToFloat(abs_bits) * std::ldexp(1.0f, kBias - 1 + kMant);
    code = static_cast<uint32_t>(RoundHalfEven(scaled));  // < 2^(kMant + 1): exact
  } else {
    constexpr int kShift = 23 - kMant;
    const uint32_t rounded = abs_bits + ((1u << (kShift - 1)) - 1u) + ((abs_bits >> kShift) & 1u);
    code = (rounded >> kShift) - (static_cast<uint32_t>(127 - kBias) << kMant);
  }
  return static_cast<uint8_t>(sign | code);
}

// float8 -> float32, exact.
template <int kMant, int kBias, bool kHasInf>
inline float DecodeFloat8(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (kHasInf) {  // e5m2: exponent all ones is inf (mantissa 0) or NaN
    if (mag == 0x7Cu) return BitsToFloat(sign | 0x7F800000u);
    if (mag > 0x7Cu) return BitsToFloat(sign | 0x7FC00000u);
  } else if (mag == 0x7Fu) {  // e4m3fn: only S.1111.111 is NaN
    return BitsToFloat(sign | 0x7FC00000u);
  }
  const float m = BitsToFloat(mag << (23 - kMant)) * std::ldexp(1.0f, 127 - kBias);
  return BitsToFloat(FloatToBits(m) | sign);
}

constexpr uint32_t kE4M3MaxBits = 0x43E00000u;  // 448
constexpr uint32_t kE5M2MaxBits = 0x47600000u;  // 57344

inline uint8_t EncodeE4M3(float v) { return EncodeFloat8<3, 7, kE4M3MaxBits, 0x7F>(v); }
inline uint8_t EncodeE5M2(float v) { return EncodeFloat8<2, 15, kE5M2MaxBits, 0x7E>(v); }

// oneDNN's float32 -> float8 (src/common/float8.cpp): to float16 first (round to nearest even,
// overflow to inf; FloatToHalf is bit-exact with its float16_t), then from float16 without
// saturation. e4m3: magnitudes above 464 (inf, NaN too) become sign | 0x7F (NaN); the rest
// round to nearest even, which the saturating encoder does (448 < |v| <= 464 rounds to 448).
inline uint8_t EncodeE4M3Onednn(float v) {
  const uint16_t h = FloatToHalf(v);
  if ((h & 0x7FFFu) > 0x5F40u) return static_cast<uint8_t>(((h >> 8) & 0x80u) | 0x7Fu);
  return EncodeE4M3(HalfToFloat(h));
}
// e5m2 has float16's exponent: NaN keeps the top payload bit and sets the quiet one; the rest
// (inf included) rounds the float16 bits to nearest even, overflowing to inf from 61440 on.
inline uint8_t EncodeE5M2Onednn(float v) {
  const uint32_t h = FloatToHalf(v);
  if ((h & 0x7FFFu) > 0x7C00u) return static_cast<uint8_t>((h >> 8) | 0x02u);
  return static_cast<uint8_t>((h + 0x7Fu + ((h >> 8) & 1u)) >> 8);
}
inline float DecodeE4M3(uint8_t b) { return DecodeFloat8<3, 7, false>(b); }
inline float DecodeE5M2(uint8_t b) { return DecodeFloat8<2, 15, true>(b); }

// Exact for every s32 zero point: the clamp bounds qmin - zp and qmax - zp are integers that
// double holds exactly (the float bounds of the row are for the SIMD kernels only).
template <typename T>
inline T QuantizeOne(float x, float scale, int64_t zp) {
  const float v = x / scale;  // IEEE float32 division
  if (std::isnan(v)) return static_cast<T>(IntLimits<T>::kMin);
  double d = static_cast<double>(v);
  const auto low = static_cast<double>(IntLimits<T>::kMin - zp);
  const auto high = static_cast<double>(IntLimits<T>::kMax - zp);
  if (d < low) d = low;
  if (d > high) d = high;
  const int64_t q = static_cast<int64_t>(RoundHalfEven(d)) + zp;
  return static_cast<T>(q < IntLimits<T>::kMin   ? IntLimits<T>::kMin
                        : q > IntLimits<T>::kMax ? IntLimits<T>::kMax
                                                 : q);
}

// oneDNN's reorder (kernels.h): m = fl(1 / scale) from the caller, zp added in float before
// rounding, two roundings (the build has -ffp-contract=off: no FMA); exact for every s32 zp.
template <typename T>
inline T QuantizeOneOnednn(float x, float m, int64_t zp) {
  const float v = x * m + static_cast<float>(zp);
  if (std::isnan(v)) return static_cast<T>(IntLimits<T>::kMin);
  if (v <= static_cast<float>(IntLimits<T>::kMin)) return static_cast<T>(IntLimits<T>::kMin);
  if (v >= static_cast<float>(IntLimits<T>::kMax)) return static_cast<T>(IntLimits<T>::kMax);
  return static_cast<T>(RoundHalfEven(static_cast<double>(v)));
}

// The two arithmetics of kernels.h, element by element: the kernels below are templates on
// one of them.
struct Onnx {
  template <typename T>
  static T Int(float x, float scale, int64_t zp) {
    return QuantizeOne<T>(x, scale, zp);
  }
  static float Scaled(float x, float scale) { return x / scale; }  // float8 quantize
  static float Difference(int64_t x, int64_t zp) { return static_cast<float>(x - zp); }
  static float Product(float decoded, float scale) { return decoded * scale; }  // float8
};

struct Onednn {
  template <typename T>
  static T Int(float x, float m, int64_t zp) {
    return QuantizeOneOnednn<T>(x, m, zp);
  }
  static float Scaled(float x, float m) { return x * m + 0.0f; }
  static float Difference(int64_t x, int64_t zp) {
    return static_cast<float>(x) - static_cast<float>(zp);
  }
  static float Product(float decoded, float scale) { return decoded * scale + 0.0f; }
};

template <class A, typename T>
void QuantizeRunInt(const float* x, void* y, size_t n, const QuantizeRow& p) {
  T* out = static_cast<T*>(y);
  for (size_t i = 0; i < n; ++i) out[i] = A::template Int<T>(x[i], p.scale, p.zp);
}

template <class A, typename T, typename Zp>
void QuantizeVecInt(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                    size_t stride) {
  for (size_t r = 0; r < rows; ++r) {
    T* out = static_cast<T*>(y) + r * stride;
    const float* in = x + r * stride;
    for (size_t i = 0; i < n; ++i) {
      out[i] = A::template Int<T>(in[i], p.scale[i], p.zp ? p.zp[i] : 0);
    }
  }
}

template <class A, uint8_t (*Encode)(float)>
void QuantizeRunF8(const float* x, void* y, size_t n, const QuantizeRow& p) {
  uint8_t* out = static_cast<uint8_t*>(y);
  for (size_t i = 0; i < n; ++i) out[i] = Encode(A::Scaled(x[i], p.scale));
}

template <class A, uint8_t (*Encode)(float), typename Zp>
void QuantizeVecF8(const float* x, void* y, size_t n, const QuantizeVecOf<Zp>& p, size_t rows,
                   size_t stride) {
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* out = static_cast<uint8_t*>(y) + r * stride;
    const float* in = x + r * stride;
    for (size_t i = 0; i < n; ++i) out[i] = Encode(A::Scaled(in[i], p.scale[i]));
  }
}

template <class A, typename T>
void DequantizeRunInt(const void* x, float* y, size_t n, const DequantizeRow& p) {
  const T* in = static_cast<const T*>(x);
  const int64_t zp = p.zp;
  for (size_t i = 0; i < n; ++i) y[i] = A::Difference(in[i], zp) * p.scale;
}

template <class A, typename T, typename Zp>
void DequantizeVecInt(const void* x, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                      size_t rows, size_t stride) {
  for (size_t r = 0; r < rows; ++r) {
    const T* in = static_cast<const T*>(x) + r * stride;
    float* out = y + r * stride;
    for (size_t i = 0; i < n; ++i) {
      const int64_t zp = p.zp ? p.zp[i] : 0;
      out[i] = A::Difference(in[i], zp) * p.scale[i];
    }
  }
}

template <class A, float (*Decode)(uint8_t)>
void DequantizeRunF8(const void* x, float* y, size_t n, const DequantizeRow& p) {
  const uint8_t* in = static_cast<const uint8_t*>(x);
  for (size_t i = 0; i < n; ++i) y[i] = A::Product(Decode(in[i]), p.scale);
}

template <class A, float (*Decode)(uint8_t), typename Zp>
void DequantizeVecF8(const void* x, float* y, size_t n, const DequantizeVecOf<Zp>& p,
                     size_t rows, size_t stride) {
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* in = static_cast<const uint8_t*>(x) + r * stride;
    float* out = y + r * stride;
    for (size_t i = 0; i < n; ++i) out[i] = A::Product(Decode(in[i]), p.scale[i]);
  }
}

// ---- per-group dequantize ----------------------------------------------------------------

template <int kSrc>
inline int64_t GroupElement(const void* x, size_t i) {
  if constexpr (kSrc == kGroupS8) return static_cast<const int8_t*>(x)[i];
  if constexpr (kSrc == kGroupU8) return static_cast<const uint8_t*>(x)[i];
  if constexpr (kSrc == kGroupS4) return Nibble(x, i, true);
  if constexpr (kSrc == kGroupU4) return Nibble(x, i, false);
}

template <int kDst>
inline void GroupStore(void* y, size_t i, float v) {
  if constexpr (kDst == kGroupF32) static_cast<float*>(y)[i] = v;
  if constexpr (kDst == kGroupF16) static_cast<uint16_t*>(y)[i] = FloatToHalf(v);
  if constexpr (kDst == kGroupBF16) static_cast<uint16_t*>(y)[i] = FloatToBFloat16(v);
}

// Exact for every s32 zero point (int64 difference, one rounding to float32).
template <int kSrc, int kDst>
void DequantizeGroup(const GroupArgs& a) {
  for (size_t r = 0; r < a.rows; ++r) {
    const size_t x0 = a.x_offset + r * a.x_stride;
    const size_t y0 = r * a.y_stride;
    size_t p = 0, in_group = a.phase;
    for (size_t j = 0; j < a.n; ++j) {
      const int64_t zp = a.zp != nullptr ? a.zp[p] : 0;
      const float v = static_cast<float>(GroupElement<kSrc>(a.x, x0 + j) - zp) * a.scale[p];
      GroupStore<kDst>(a.y, y0 + j, v);
      if (++in_group == a.group) {
        in_group = 0;
        ++p;
      }
    }
  }
}

template <QuantizeRunFn kRun, QuantizeVecFn kVec, QuantizeVec16Fn kVec16>
constexpr QuantizeKernels Quantize() {
  return {{{kRun, kRun}, {kRun, kRun}}, {{kVec, kVec}, {kVec, kVec}}, {kVec16, kVec16}};
}

template <DequantizeRunFn kRun, DequantizeVecFn kVec, DequantizeVec16Fn kVec16>
constexpr DequantizeKernels Dequantize() {
  return {{{kRun, kRun}, {kRun, kRun}}, {{kVec, kVec}, {kVec, kVec}}, {kVec16, kVec16}};
}

template <class A, typename T>
constexpr QuantizeKernels QuantizeInt() {
  return Quantize<QuantizeRunInt<A, T>, QuantizeVecInt<A, T, int32_t>,
                  QuantizeVecInt<A, T, int16_t>>();
}

template <class A, uint8_t (*Encode)(float)>
constexpr QuantizeKernels QuantizeF8() {
  return Quantize<QuantizeRunF8<A, Encode>, QuantizeVecF8<A, Encode, int32_t>,
                  QuantizeVecF8<A, Encode, int16_t>>();
}

template <class A, typename T>
constexpr DequantizeKernels DequantizeInt() {
  return Dequantize<DequantizeRunInt<A, T>, DequantizeVecInt<A, T, int32_t>,
                    DequantizeVecInt<A, T, int16_t>>();
}

template <class A, float (*Decode)(uint8_t)>
constexpr DequantizeKernels DequantizeF8() {
  return Dequantize<DequantizeRunF8<A, Decode>, DequantizeVecF8<A, Decode, int32_t>,
                    DequantizeVecF8<A, Decode, int16_t>>();
}

// One function per type: zero points are handled generally, and there are no streaming stores.
constexpr KernelTable kScalarTable = {
    Isa::kScalar,
    "scalar",
    nullptr,
    {QuantizeInt<Onnx, int8_t>(), QuantizeInt<Onnx, uint8_t>(), QuantizeF8<Onnx, EncodeE4M3>(),
     QuantizeF8<Onnx, EncodeE5M2>()},
    {DequantizeInt<Onnx, int8_t>(), DequantizeInt<Onnx, uint8_t>(),
     DequantizeF8<Onnx, DecodeE4M3>(), DequantizeF8<Onnx, DecodeE5M2>()},
    {
#define QG_GROUP_ROW(SRC)                                                              \
  {                                                                                    \
    {DequantizeGroup<SRC, kGroupF32>, DequantizeGroup<SRC, kGroupF32>},                \
        {DequantizeGroup<SRC, kGroupF16>, DequantizeGroup<SRC, kGroupF16>},            \
        {DequantizeGroup<SRC, kGroupBF16>, DequantizeGroup<SRC, kGroupBF16>},          \
  }
        QG_GROUP_ROW(kGroupS8),
        QG_GROUP_ROW(kGroupU8),
        QG_GROUP_ROW(kGroupS4),
        QG_GROUP_ROW(kGroupU4),
#undef QG_GROUP_ROW
    },
    {QuantizeInt<Onednn, int8_t>(), QuantizeInt<Onednn, uint8_t>(),
     QuantizeF8<Onednn, EncodeE4M3Onednn>(), QuantizeF8<Onednn, EncodeE5M2Onednn>()},
    {DequantizeInt<Onednn, int8_t>(), DequantizeInt<Onednn, uint8_t>(),
     DequantizeF8<Onednn, DecodeE4M3>(), DequantizeF8<Onednn, DecodeE5M2>()},
};

}  // namespace

const KernelTable* ScalarTable() { return &kScalarTable; }

}  // namespace qg::kernels
