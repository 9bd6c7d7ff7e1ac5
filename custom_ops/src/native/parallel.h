// How a call's work is spread: on the calling thread or in tasks on the session's intra-op
// pool; and from which output size stores bypass the cache.
#pragma once

#include <cstddef>

#include "common/ort_api.h"
#include "native/compute.h"

namespace qg::native {

// Work below kParallelMin elements runs on the calling thread; above it in tasks of
// ChunkFor(n) elements on the session's intra-op pool: at least kMinChunk (so a task is worth
// its scheduling), else about n / kTargetTasks (enough tasks to balance the pool's threads).
constexpr size_t kParallelMin = size_t{1} << 15;
constexpr size_t kMinChunk = size_t{1} << 14;
constexpr size_t kTargetTasks = 64;

inline size_t ChunkFor(size_t n) {
  const size_t chunk = (n / kTargetTasks + 63) & ~size_t{63};
  return chunk < kMinChunk ? kMinChunk : chunk;
}

// Output size from which stores bypass the cache (non-temporal): the result will not be read
// back from cache before it is evicted anyway, and skipping the read-for-ownership saves
// memory traffic.
constexpr size_t kStreamMinBytes = size_t{8} << 20;

// body(task) for task in [0, tasks): on the calling thread when the call is small (elements <
// kParallelMin), else on the session's intra-op pool. fence (when set) runs after each task's
// streaming stores.
template <class Body>
void ParallelTasks(const ExecContext& ex, size_t tasks, size_t elements, void (*fence)(),
                   const Body& body) {
  if (ex.ort == nullptr || elements < kParallelMin || tasks < 2) {
    for (size_t t = 0; t < tasks; ++t) body(t);
    if (fence != nullptr) fence();
    return;
  }
  struct Shared {
    const Body* body;
    void (*fence)();
  } shared{&body, fence};
  Ort::KernelContext(ex.ort).ParallelFor(
      [](void* data, size_t task) {
        const auto* s = static_cast<const Shared*>(data);
        (*s->body)(task);
        if (s->fence != nullptr) s->fence();
      },
      tasks, 0, &shared);
}

// body(begin, end) over [0, n) in chunks of ChunkFor(n) elements.
template <class Body>
void ParallelRanges(const ExecContext& ex, size_t n, void (*fence)(), const Body& body) {
  if (ex.ort == nullptr || n < kParallelMin) {
    body(0, n);
    if (fence != nullptr) fence();
    return;
  }
  const size_t chunk = ChunkFor(n);
  ParallelTasks(ex, (n + chunk - 1) / chunk, n, fence, [&](size_t task) {
    const size_t begin = task * chunk;
    body(begin, begin + chunk < n ? begin + chunk : n);
  });
}

}  // namespace qg::native
