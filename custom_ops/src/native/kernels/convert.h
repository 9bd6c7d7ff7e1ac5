// Scalar conversions between float32 and the 16-bit float types, and 4-bit element access.
// Bit-exact with the SIMD kernels (F16C / AVX-512 conversions, round to nearest even) and with
// numpy / ml_dtypes for every value a dequantize produces (NaNs produced by arithmetic are
// quiet; these keep them quiet NaNs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace qg::kernels {

inline uint32_t FloatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float16 -> float32, exact (a NaN keeps its payload, quieted as vcvtph2ps does).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {  // inf, NaN
    const uint32_t quiet = mantissa != 0 ? 0x400000u : 0u;
    return BitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);
  // Subnormal: mantissa * 2^-24, exact in float32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
  return BitsToFloat(sign | FloatToBits(magnitude));
}

// float32 -> float16, round to nearest even; overflow to inf; NaN -> quiet NaN with the top
// payload bits (what vcvtps2ph gives).
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatToBits(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 2^16
  if (abs >= 0x38800000u) {  // normal float16 (>= 2^-14)
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal float16: the value in units of 2^-24, rounded to nearest even.
  const uint32_t exponent = abs >> 23;                    // 102 .. 112
  const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;  // 24 bits
  const uint32_t shift = 126u - exponent;                   // 14 .. 24
  const uint32_t half = 1u << (shift - 1);
  uint32_t code = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  if (rest > half || (rest == half && (code & 1u) != 0)) ++code;
  return static_cast<uint16_t>(sign | code);
}

inline float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// float32 -> bfloat16, round to nearest even (overflow to inf); NaN -> sign | 0x7FC0 (as
// ml_dtypes). Subnormals are kept (AVX512_BF16's vcvtneps2bf16 would flush them).
inline uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatToBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7FC0u);
  }
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// Element i of a packed 4-bit tensor (element 2k in the low nibble of byte k).
inline int32_t Nibble(const void* base, size_t i, bool is_signed) {
  const uint8_t byte = static_cast<const uint8_t*>(base)[i / 2];
  const int32_t v = (i & 1u) != 0 ? byte >> 4 : byte & 0xF;
  return is_signed ? ((v ^ 8) - 8) : v;
}

}  // namespace qg::kernels
