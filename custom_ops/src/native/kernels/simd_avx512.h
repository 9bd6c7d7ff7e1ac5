// 512-bit vector operations for simd_kernels.h. Only include from a TU compiled with
// -mavx512f -mavx512bw -mavx512vl.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace qg::kernels {

struct Avx512 {
  static constexpr size_t kWidth = 16;
  static constexpr size_t kStreamAlign = 64;
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;

  static F Set1(float v) { return _mm512_set1_ps(v); }
  static I Set1I(int32_t v) { return _mm512_set1_epi32(v); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static I LoadI(const int32_t* p) { return _mm512_loadu_si512(p); }
  static I LoadI(const int16_t* p) {  // sign-extended
    return _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  template <bool kStream>
  static void Store(float* p, F v) {
    if constexpr (kStream) {
      _mm512_stream_ps(p, v);  // p is 64-byte aligned
    } else {
      _mm512_storeu_ps(p, v);
    }
  }
  static void Fence() { _mm_sfence(); }

  static M TailMask(size_t n) { return static_cast<M>((1u << n) - 1u); }
  static F LoadPartial(const float* p, size_t n) { return _mm512_maskz_loadu_ps(TailMask(n), p); }
  static I LoadPartialI(const int32_t* p, size_t n) {
    return _mm512_maskz_loadu_epi32(TailMask(n), p);
  }
  static I LoadPartialI(const int16_t* p, size_t n) {
    return _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(TailMask(n), p));
  }
  static void StorePartial(float* p, F v, size_t n) { _mm512_mask_storeu_ps(p, TailMask(n), v); }

  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }  // a NaN -> b
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static I CvtRne(F a) { return _mm512_cvtps_epi32(a); }  // MXCSR default: half to even
  static F CvtF(I a) { return _mm512_cvtepi32_ps(a); }
  static I AddI(I a, I b) { return _mm512_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I MinI(I a, I b) { return _mm512_min_epi32(a, b); }
  static I AndI(I a, I b) { return _mm512_and_si512(a, b); }
  static I OrI(I a, I b) { return _mm512_or_si512(a, b); }
  template <int kBits>
  static I Srl(I a) {
    return _mm512_srli_epi32(a, kBits);
  }
  template <int kBits>
  static I Sll(I a) {
    return _mm512_slli_epi32(a, kBits);
  }
  static I AsI(F a) { return _mm512_castps_si512(a); }
  static F AsF(I a) { return _mm512_castsi512_ps(a); }
  static M CmpGtI(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static M CmpEqI(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static I SelectI(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }
  static F SelectF(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }

  template <typename T>
  static I Widen(const T* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (static_cast<T>(-1) < 0) {
      return _mm512_cvtepi8_epi32(b);
    } else {
      return _mm512_cvtepu8_epi32(b);
    }
  }
  template <typename T>
  static I WidenPartial(const T* p, size_t n) {
    const __m128i b = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << n) - 1u), p);
    if constexpr (static_cast<T>(-1) < 0) {
      return _mm512_cvtepi8_epi32(b);
    } else {
      return _mm512_cvtepu8_epi32(b);
    }
  }

  // ---- per-group dequantize ------------------------------------------------------------

  // kWidth 4-bit elements from kWidth / 2 bytes at p (element 2k in the low nibble of p[k]),
  // as float values: a 16-entry table lookup.
  template <bool kSigned>
  static F Nibbles(const uint8_t* p) {
    return NibbleValues<kSigned>(
        _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  template <bool kSigned>
  static F NibblesPartial(const uint8_t* p, size_t n) {  // n < kWidth elements
    const auto bytes = static_cast<__mmask16>((1u << ((n + 1) / 2)) - 1u);
    return NibbleValues<kSigned>(_mm512_cvtepu8_epi64(_mm_maskz_loadu_epi8(bytes, p)));
  }
  // bytes64: byte k in 64-bit lane k. Or-ing in the lane shifted left by 28 puts the byte's
  // high nibble at the bottom of the lane's upper dword; vpermps reads only the low 4 bits of
  // each dword index: dword 2k selects byte k & 15, dword 2k + 1 byte k >> 4.
  template <bool kSigned>
  static F NibbleValues(__m512i bytes64) {
    const __m512i index = _mm512_or_si512(bytes64, _mm512_slli_epi64(bytes64, 28));
    const __m512 table = kSigned ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4,
                                                  -3, -2, -1)
                                 : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                  14, 15);
    return _mm512_permutexvar_ps(index, table);
  }
  // Lane l of the result is lane index[l] of v (index lanes < kWidth).
  static F PermuteF(F v, I index) { return _mm512_permutexvar_ps(index, v); }
  static I PermuteI(I v, I index) { return _mm512_permutexvar_epi32(index, v); }
  // The float16 nearest v (round to nearest even), as float32 and as bits in int32 lanes.
  static __m256i ToF16(F v) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F HalfRound(F v) { return _mm512_cvtph_ps(ToF16(v)); }
  static I HalfBits(F v) { return _mm512_cvtepu16_epi32(ToF16(v)); }
  // float32 -> float16, round to nearest even (F16C semantics: NaN stays a quiet NaN).
  static void StoreF16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), ToF16(v));
  }
  static void StoreF16Partial(uint16_t* p, F v, size_t n) {
    _mm256_mask_storeu_epi16(p, TailMask(n), ToF16(v));
  }
  // int32 lanes holding values < 2^16 -> uint16.
  static void StoreU16(uint16_t* p, I v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
  static void StoreU16Partial(uint16_t* p, I v, size_t n) {
    _mm512_mask_cvtepi32_storeu_epi16(p, TailMask(n), v);
  }
  // memcpy with non-temporal stores for the 64-byte aligned body of dst.
  static void StreamCopy(void* dst, const void* src, size_t bytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
    head = head < bytes ? head : bytes;
    __builtin_memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
    }
    __builtin_memcpy(d, s, bytes);
  }

  // int32 lanes -> bytes, saturating to T's range.
  template <typename T>
  static __m128i Narrow(I q) {
    if constexpr (static_cast<T>(-1) < 0) {
      return _mm512_cvtsepi32_epi8(q);  // signed saturation
    } else {
      return _mm512_cvtusepi32_epi8(_mm512_max_epi32(q, _mm512_setzero_si512()));
    }
  }
  // kInRange: every lane is already in T's range, so a truncating narrow does.
  template <typename T, bool kInRange = false>
  static void StoreNarrow(T* p, I q) {
    if constexpr (kInRange) {
      _mm512_mask_cvtepi32_storeu_epi8(p, 0xFFFF, q);  // vpmovdb to memory: one instruction
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Narrow<T>(q));
    }
  }
  template <typename T, bool kInRange = false>
  static void StoreNarrowPartial(T* p, I q, size_t n) {
    if constexpr (kInRange) {
      _mm512_mask_cvtepi32_storeu_epi8(p, TailMask(n), q);
    } else if constexpr (static_cast<T>(-1) < 0) {
      _mm512_mask_cvtsepi32_storeu_epi8(p, TailMask(n), q);
    } else {
      const I nonneg = _mm512_max_epi32(q, _mm512_setzero_si512());
      _mm512_mask_cvtusepi32_storeu_epi8(p, TailMask(n), nonneg);
    }
  }
  // Four vectors at once: two saturating packs to int16, one to 8 bits (which together
  // clamp to T's range exactly), one lane permute and one 64-byte store, instead of a
  // narrow (and for u8 a max) and a 16-byte store each: ~10% off a C++ loop over 1M floats.
  template <typename T, bool kStream>
  static void StoreNarrow4(T* p, I q0, I q1, I q2, I q3) {
    const __m512i w01 = _mm512_packs_epi32(q0, q1);
    const __m512i w23 = _mm512_packs_epi32(q2, q3);
    __m512i b;
    if constexpr (static_cast<T>(-1) < 0) {
      b = _mm512_packs_epi16(w01, w23);
    } else {
      b = _mm512_packus_epi16(w01, w23);
    }
    // packs work within 128-bit lanes: lane k holds 4 bytes of each source vector in turn.
    b = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
    if constexpr (kStream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), b);  // p is 64-byte aligned
    } else {
      _mm512_storeu_si512(reinterpret_cast<__m512i*>(p), b);
    }
  }
};

}  // namespace qg::kernels
