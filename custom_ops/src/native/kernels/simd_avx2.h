// 256-bit vector operations for simd_kernels.h. Only include from a TU compiled with -mavx2
// -mf16c.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace qg::kernels {

struct Avx2 {
  static constexpr size_t kWidth = 8;
  static constexpr size_t kStreamAlign = 32;
  using F = __m256;
  using I = __m256i;
  using M = __m256i;  // all-ones lanes where true

  static F Set1(float v) { return _mm256_set1_ps(v); }
  static I Set1I(int32_t v) { return _mm256_set1_epi32(v); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static I LoadI(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static I LoadI(const int16_t* p) {  // sign-extended
    return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  template <bool kStream>
  static void Store(float* p, F v) {
    if constexpr (kStream) {
      _mm256_stream_ps(p, v);  // p is 32-byte aligned
    } else {
      _mm256_storeu_ps(p, v);
    }
  }
  static void Fence() { _mm_sfence(); }

  static I TailMask(size_t n) {  // lanes [0, n)
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F LoadPartial(const float* p, size_t n) { return _mm256_maskload_ps(p, TailMask(n)); }
  static I LoadPartialI(const int32_t* p, size_t n) {
    return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), TailMask(n));
  }
  static I LoadPartialI(const int16_t* p, size_t n) {  // AVX2 has no 16-bit masked load
    alignas(16) int16_t lanes[kWidth] = {};
    for (size_t i = 0; i < n; ++i) lanes[i] = p[i];
    return LoadI(lanes);
  }
  static void StorePartial(float* p, F v, size_t n) { _mm256_maskstore_ps(p, TailMask(n), v); }

  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }  // a NaN -> b
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static I CvtRne(F a) { return _mm256_cvtps_epi32(a); }  // MXCSR default: half to even
  static F CvtF(I a) { return _mm256_cvtepi32_ps(a); }
  static I AddI(I a, I b) { return _mm256_add_epi32(a, b); }
  static I SubI(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I MinI(I a, I b) { return _mm256_min_epi32(a, b); }
  static I AndI(I a, I b) { return _mm256_and_si256(a, b); }
  static I OrI(I a, I b) { return _mm256_or_si256(a, b); }
  template <int kBits>
  static I Srl(I a) {
    return _mm256_srli_epi32(a, kBits);
  }
  template <int kBits>
  static I Sll(I a) {
    return _mm256_slli_epi32(a, kBits);
  }
  static I AsI(F a) { return _mm256_castps_si256(a); }
  static F AsF(I a) { return _mm256_castsi256_ps(a); }
  static M CmpGtI(I a, I b) { return _mm256_cmpgt_epi32(a, b); }
  static M CmpEqI(I a, I b) { return _mm256_cmpeq_epi32(a, b); }
  static I SelectI(M m, I a, I b) { return _mm256_blendv_epi8(b, a, m); }
  static F SelectF(M m, F a, F b) { return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m)); }

  // kWidth bytes -> int32 lanes.
  template <typename T>
  static I Widen(const T* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    if constexpr (static_cast<T>(-1) < 0) {
      return _mm256_cvtepi8_epi32(b);
    } else {
      return _mm256_cvtepu8_epi32(b);
    }
  }
  template <typename T>
  static I WidenPartial(const T* p, size_t n) {
    alignas(16) T buf[16] = {};
    __builtin_memcpy(buf, p, n);
    return Widen<T>(buf);
  }

  // ---- per-group dequantize ------------------------------------------------------------

  // kWidth 4-bit elements from kWidth / 2 bytes at p (element 2k in the low nibble of p[k]),
  // as float values.
  template <bool kSigned>
  static F Nibbles(const uint8_t* p) {
    int32_t word;
    __builtin_memcpy(&word, p, sizeof word);
    return NibbleValues<kSigned>(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word)));
  }
  template <bool kSigned>
  static F NibblesPartial(const uint8_t* p, size_t n) {  // n < kWidth elements
    int32_t word = 0;
    __builtin_memcpy(&word, p, (n + 1) / 2);
    return NibbleValues<kSigned>(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word)));
  }
  // bytes64: byte k in 64-bit lane k; shifting the lane left by 28 puts its high nibble at the
  // bottom of the upper dword.
  template <bool kSigned>
  static F NibbleValues(__m256i bytes64) {
    __m256i v = _mm256_or_si256(bytes64, _mm256_slli_epi64(bytes64, 28));
    v = _mm256_and_si256(v, _mm256_set1_epi32(0xF));
    if constexpr (kSigned) {
      v = _mm256_sub_epi32(_mm256_xor_si256(v, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
    }
    return _mm256_cvtepi32_ps(v);
  }
  // Lane l of the result is lane index[l] of v (index lanes < kWidth).
  static F PermuteF(F v, I index) { return _mm256_permutevar8x32_ps(v, index); }
  static I PermuteI(I v, I index) { return _mm256_permutevar8x32_epi32(v, index); }
  // float32 -> float16, round to nearest even (F16C: NaN stays a quiet NaN).
  static __m128i ToF16(F v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // The float16 nearest v (round to nearest even), as float32 and as bits in int32 lanes.
  static F HalfRound(F v) { return _mm256_cvtph_ps(ToF16(v)); }
  static I HalfBits(F v) { return _mm256_cvtepu16_epi32(ToF16(v)); }
  static void StoreF16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), ToF16(v));
  }
  static void StoreF16Partial(uint16_t* p, F v, size_t n) {
    alignas(16) uint16_t lanes[kWidth];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), ToF16(v));
    __builtin_memcpy(p, lanes, n * sizeof(uint16_t));
  }
  // int32 lanes holding values < 2^16 -> uint16.
  static __m128i NarrowU16(I v) {
    const __m256i packed = _mm256_packus_epi32(v, v);  // per 128-bit lane: v0..3 v0..3 | v4..7
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
  }
  static void StoreU16(uint16_t* p, I v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), NarrowU16(v));
  }
  static void StoreU16Partial(uint16_t* p, I v, size_t n) {
    alignas(16) uint16_t lanes[kWidth];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), NarrowU16(v));
    __builtin_memcpy(p, lanes, n * sizeof(uint16_t));
  }
  // memcpy with non-temporal stores for the 32-byte aligned body of dst.
  static void StreamCopy(void* dst, const void* src, size_t bytes) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    size_t head = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32;
    head = head < bytes ? head : bytes;
    __builtin_memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 32; bytes -= 32, d += 32, s += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    }
    __builtin_memcpy(d, s, bytes);
  }

  // int32 lanes -> bytes with saturation to T's range.
  template <typename T>
  static __m128i Narrow(I q) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    if constexpr (static_cast<T>(-1) < 0) {
      return _mm_packs_epi16(w, w);
    } else {
      return _mm_packus_epi16(w, w);
    }
  }
  // kInRange (every lane already in T's range) changes nothing here: packs saturate anyway.
  template <typename T, bool kInRange = false>
  static void StoreNarrow(T* p, I q) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), Narrow<T>(q));
  }
  template <typename T, bool kInRange = false>
  static void StoreNarrowPartial(T* p, I q, size_t n) {
    alignas(16) T buf[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), Narrow<T>(q));
    __builtin_memcpy(p, buf, n);
  }
  // Four vectors (4 * kWidth lanes) at once: two packs and one cross-lane permute.
  template <typename T, bool kStream>
  static void StoreNarrow4(T* p, I q0, I q1, I q2, I q3) {
    const __m256i w01 = _mm256_packs_epi32(q0, q1);
    const __m256i w23 = _mm256_packs_epi32(q2, q3);
    __m256i b;
    if constexpr (static_cast<T>(-1) < 0) {
      b = _mm256_packs_epi16(w01, w23);
    } else {
      b = _mm256_packus_epi16(w01, w23);
    }
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if constexpr (kStream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), b);  // p is 32-byte aligned
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), b);
    }
  }
};

}  // namespace qg::kernels
