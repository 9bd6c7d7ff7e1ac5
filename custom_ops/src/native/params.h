// The call's parameters as the kernels take them: zero points as int32, scales or (oneDNN's
// quantize) their reciprocals; for the groups driver, f16/bf16 scales as float32 and 8-bit or
// 4-bit zero points as int32.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/spec.h"
#include "native/compute.h"
#include "native/kernels/convert.h"

namespace qg::native {

using spec::kF16;
using spec::kS4;
using spec::kS8;
using spec::kU4;
using spec::kU8;

// Zero points as int32: s32 ones (the static ops' attribute too) are used in place; s8/u8
// ones are widened (into `small` up to its size, so per-tensor calls allocate nothing). nullptr
// when the call has none.
struct ZpBuffer {
  int32_t small[16];
  std::vector<int32_t> large;
};

template <typename Zp>
const int32_t* ZeroPoints(const CallArgs& a, ZpBuffer& buffer) {
  if constexpr (std::is_void_v<Zp>) {
    return nullptr;
  } else if constexpr (std::is_same_v<Zp, int32_t>) {
    return static_cast<const int32_t*>(a.zps);
  } else {
    const Zp* z = static_cast<const Zp*>(a.zps);
    int32_t* out = buffer.small;
    if (a.scale_count > sizeof buffer.small / sizeof buffer.small[0]) {
      buffer.large.resize(a.scale_count);
      out = buffer.large.data();
    }
    for (size_t i = 0; i < a.scale_count; ++i) out[i] = z[i];
    return out;
  }
}

// Per-call scale values: the call's own, or (oneDNN's quantize) their reciprocals, computed once
// here so that the kernels multiply (in `small` up to its size: per-tensor calls allocate
// nothing).
struct ScaleBuffer {
  float small[16] = {};
  std::vector<float> large;
};

// fl(1 / s) for each scale, as oneDNN computes it (float32 division, correctly rounded: the
// static op's `1.f / s` in graph/backend/dnnl/passes/lower.cpp, the dynamic op's eltwise pow
// with beta -1, a vdivps).
inline const float* Reciprocals(const CallArgs& a, ScaleBuffer& buffer) {
  const auto* s = static_cast<const float*>(a.scales);
  float* out = buffer.small;
  if (a.scale_count > sizeof buffer.small / sizeof buffer.small[0]) {
    buffer.large.resize(a.scale_count);
    out = buffer.large.data();
  }
  for (size_t i = 0; i < a.scale_count; ++i) out[i] = 1.0f / s[i];
  return out;
}

// count scales from index first, as float32 (f16/bf16 exactly converted).
inline void ScalesAsFloat(const void* scales, int type, size_t first, size_t count, float* out) {
  if (type == kF16) {
    const auto* h = static_cast<const uint16_t*>(scales) + first;
    for (size_t i = 0; i < count; ++i) out[i] = kernels::HalfToFloat(h[i]);
  } else {
    const auto* b = static_cast<const uint16_t*>(scales) + first;
    for (size_t i = 0; i < count; ++i) out[i] = kernels::BFloat16ToFloat(b[i]);
  }
}

// count zero points from index first, as int32 (4-bit ones unpacked).
inline void ZpsAsInt32(const void* zps, int type, size_t first, size_t count, int32_t* out) {
  switch (type) {
    case kS8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<const int8_t*>(zps)[first + i];
      break;
    case kU8:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<const uint8_t*>(zps)[first + i];
      break;
    case kS4:
    case kU4:
      for (size_t i = 0; i < count; ++i) out[i] = kernels::Nibble(zps, first + i, type == kS4);
      break;
    default:
      std::copy_n(static_cast<const int32_t*>(zps) + first, count, out);
  }
}

}  // namespace qg::native
