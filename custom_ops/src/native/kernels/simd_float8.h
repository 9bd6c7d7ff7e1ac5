// Float8 (e4m3fn, e5m2) codes to and from float32 lanes, over a vector-ops struct V: ONNX's
// saturating encoding, oneDNN's (through float16, no saturation), and the exact decoding.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qg::kernels::simd {

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

}  // namespace qg::kernels::simd
