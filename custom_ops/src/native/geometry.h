// The call's layout as the drivers see it: per-tensor and per-channel calls as
// [outer, channels, inner] (runs of one channel's parameters, or a repeating pattern of them);
// every qtype, per_group included, as a grouping of the parameters' row-major layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "native/compute.h"

namespace qg::native {

// Runs shorter than this use the per-element-parameter kernels over a repeating pattern of
// channel parameters (channels * inner elements, at most kMaxPattern unless inner == 1)
// instead of one call per run.
constexpr size_t kMinRun = 16;
constexpr size_t kMaxPattern = size_t{1} << 16;

// The call as [outer, channels, inner]: channel c's parameters hold for each run of `inner`
// consecutive elements, runs cycling through the channels. Per-tensor is channels == 1.
struct Geometry {
  size_t channels = 1;
  size_t inner = 1;
};

inline Geometry MakeGeometry(const CallArgs& a) {
  Geometry g;
  if (a.axis < 0) {
    g.inner = a.elements;
    return g;
  }
  g.channels = static_cast<size_t>(a.dims[a.axis]);
  for (size_t d = static_cast<size_t>(a.axis) + 1; d < a.rank; ++d) {
    g.inner *= static_cast<size_t>(a.dims[d]);
  }
  if (g.channels == 1) g.inner = a.elements;
  return g;
}

// Walks [begin, end) of a channel-cycled layout: run(offset, length, channel) per run.
template <class RunFn>
void WalkRuns(const Geometry& g, size_t begin, size_t end, const RunFn& run) {
  size_t c = (begin / g.inner) % g.channels;
  size_t i = begin % g.inner;
  for (size_t p = begin; p < end;) {
    const size_t len = g.inner - i < end - p ? g.inner - i : end - p;
    run(p, len, c);
    p += len;
    i = 0;
    if (++c == g.channels) c = 0;
  }
}

// One period of per-element parameters from per-channel `values`: channel c's repeated `inner`
// times, channels in order, cycling; `values` itself when it is one already. `pad` more
// elements continue the pattern (kernels::ChannelParams::padded).
// `head`: with pad, the pattern starts in the buffer so that element `head` (where a flat
// kernel's aligned loop starts, kernels::HeadElements of the output) is 64-byte aligned: the
// kernel's parameter loads then never straddle cache lines ([n / 384, 384] dequantize at 1M on
// one thread: 1.26x of the per-tensor time with the stores misaligned instead, 1.42x with the
// parameter loads misaligned).
template <typename T, typename U>
const T* Periodic(const U* values, const Geometry& g, size_t period, std::vector<T>& buffer,
                  size_t pad = 0, size_t head = 0) {
  if constexpr (std::is_same_v<T, U>) {
    if (period == g.channels && pad == 0) return values;
  }
  constexpr size_t kAlign = 64;
  buffer.resize(period + pad + (pad != 0 ? kAlign / sizeof(T) : 0));
  T* out = buffer.data();
  if (pad != 0) {
    while (reinterpret_cast<uintptr_t>(out + head) % kAlign != 0) ++out;
  }
  if (g.inner == 1) {  // the innermost axis: a plain loop that vectorizes
    for (size_t q = 0; q < period; q += g.channels) {
      for (size_t c = 0; c < g.channels; ++c) out[q + c] = static_cast<T>(values[c]);
    }
  } else {
    for (size_t q = 0; q < period;) {
      for (size_t c = 0; c < g.channels; ++c) {
        const T v = static_cast<T>(values[c]);
        for (size_t j = 0; j < g.inner; ++j) out[q++] = v;
      }
    }
  }
  for (size_t q = 0; q < pad; ++q) out[period + q] = out[q % period];
  return out;
}

// The innermost axis (inner == 1) always; other short runs while the pattern stays small.
inline bool UsePattern(const Geometry& g) {
  return g.channels > 1 &&
         (g.inner == 1 || (g.inner < kMinRun && g.channels * g.inner <= kMaxPattern));
}

// ---- groupings ----------------------------------------------------------------------------
//
// DynamicDequantize's rows other than 8-bit -> f32 per tensor / channel (groups.h): 4-bit
// sources, f16/bf16 dst (and scales), per_group. Every qtype is a grouping: element
// (i_0, ..., i_r-1) uses parameter (i_0 / g_0, ..., i_r-1 / g_r-1) of the scales' row-major
// layout, with g = group_shape for per_group, g_d = dims[d] except g_axis = 1 for per_channel,
// g = dims for per_tensor.

// The call's dims and groups simplified: dims of 1 dropped, and neighbours merged where the
// parameter index stays one row-major index (a group that spans its whole dim, or a group of 1
// before the next dim). [K, N] by [1, 32] becomes [K * N] by [32]; per_channel becomes
// [outer, channels * inner] by [outer, inner]; per_tensor [n] by [n].
struct Grouping {
  std::vector<size_t> dims;
  std::vector<size_t> groups;
};

inline Grouping MakeGrouping(const CallArgs& a) {
  Grouping g;
  for (size_t d = 0; d < a.rank; ++d) {
    const auto dim = static_cast<size_t>(a.dims[d]);
    size_t group = dim;
    if (a.group_shape != nullptr) {
      group = static_cast<size_t>(a.group_shape[d]);
    } else if (a.axis >= 0 && d == static_cast<size_t>(a.axis)) {
      group = 1;
    }
    if (dim == 1) continue;
    if (!g.dims.empty()) {
      size_t& last_dim = g.dims.back();
      size_t& last_group = g.groups.back();
      if (group == dim) {  // the parameter does not change along this dim
        last_group *= dim;
        last_dim *= dim;
        continue;
      }
      if (last_group == 1) {  // one parameter per index of the previous dim
        last_group = group;
        last_dim *= dim;
        continue;
      }
    }
    g.dims.push_back(dim);
    g.groups.push_back(group);
  }
  if (g.dims.empty()) {
    g.dims.push_back(1);
    g.groups.push_back(1);
  }
  return g;
}

}  // namespace qg::native
