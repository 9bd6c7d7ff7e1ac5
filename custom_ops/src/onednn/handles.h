// oneDNN handles owned RAII-style, the status check, and the process's CPU engine and per-thread
// stream, shared by the single-op kernels (partition.cc) and the partition op (fused*.cc).
#pragma once

#include <utility>

#include "onednn/dnnl_api.h"

namespace qg::onednn {

// Owns one oneDNN handle.
template <typename T, dnnl_status_t (*Destroy)(T)>
class Handle {
 public:
  Handle() = default;
  ~Handle() {
    if (h_ != nullptr) Destroy(h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      if (h_ != nullptr) Destroy(h_);
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }
  T get() const { return h_; }
  T* out() { return &h_; }
  T release() { return std::exchange(h_, nullptr); }

 private:
  T h_ = nullptr;
};

using Graph = Handle<dnnl_graph_graph_t, dnnl_graph_graph_destroy>;
using Op = Handle<dnnl_graph_op_t, dnnl_graph_op_destroy>;
using Partition = Handle<dnnl_graph_partition_t, dnnl_graph_partition_destroy>;
using Compiled = Handle<dnnl_graph_compiled_partition_t, dnnl_graph_compiled_partition_destroy>;
using Tensor = Handle<dnnl_graph_tensor_t, dnnl_graph_tensor_destroy>;
using Stream = Handle<dnnl_stream_t, dnnl_stream_destroy>;

// Throws DnnlError(status name, stage) unless `status` is dnnl_success.
void Check(dnnl_status_t status, const char* stage);

// Inside a catch block: rethrows the exception in flight as a DnnlError naming `stage`
// (oneDNN's C API lets dnnl::error and std::exceptions escape).
[[noreturn]] void Rethrow(const char* stage);

// The process's CPU engine (created on first use, never destroyed).
dnnl_engine_t Engine();

// This thread's stream on `engine`.
dnnl_stream_t ThreadStream(dnnl_engine_t engine);

}  // namespace qg::onednn
