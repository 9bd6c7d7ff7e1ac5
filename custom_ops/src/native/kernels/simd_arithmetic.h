// The two arithmetics (kernels.h) as policies of the SIMD kernels, over a vector-ops struct V.
#pragma once

#include "simd_float8.h"

namespace qg::kernels::simd {

// Quantize kernels and the float8 dequantize kernels are templates on A, the arithmetic:
// OnnxArithmetic divides by the scale and adds the zero point to the rounded integer;
// OnednnArithmetic multiplies by the caller's m = fl(1 / scale), adds the zero point converted
// to float before rounding (two roundings, as oneDNN's reorder: no FMA), and goes to float8
// through float16. Integer dequantize is the same in both (the caller keeps oneDNN's zero
// points within kFloatMaxZp there).
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

}  // namespace qg::kernels::simd
