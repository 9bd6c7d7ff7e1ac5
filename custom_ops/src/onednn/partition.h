// One quantization op as a compiled single-op oneDNN Graph partition on oneDNN's CPU engine:
// build the graph, take its partition, compile it for fixed shapes and types, execute it on
// caller-owned buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "onednn/dnnl_api.h"

namespace qg::onednn {

// oneDNN did not do what was asked: `reason` is its status name (dnnl_unimplemented, ...) or
// what was missing ("no partition"), `stage` the step that failed ("compiling the partition").
class DnnlError : public std::runtime_error {
 public:
  DnnlError(std::string reason, std::string stage)
      : std::runtime_error(reason + " (" + stage + ")"),
        reason_(std::move(reason)),
        stage_(std::move(stage)) {}
  const std::string& reason() const { return reason_; }
  const std::string& stage() const { return stage_; }

 private:
  std::string reason_;
  std::string stage_;
};

// "dnnl_unimplemented", ...; "dnnl status <n>" for a value these headers do not name.
std::string StatusName(dnnl_status_t status);

// The loaded oneDNN (not the headers'): "3.2.0", and "3.2.0 (40112196, cpu runtime OMP)".
std::string LoadedVersion();
std::string LoadedVersionDetails();
bool LoadedAtLeast(int major, int minor);

// Whether the loaded oneDNN's int8 convolution / matmul kernels on this CPU sum u8 x s8 products
// in int16 pairs (x86 without VNNI: vpmaddubsw), which saturate unless every |weight| <= 64
// (measured on v3.2, AVX2: full-range s8 weights gave results up to 158 steps off the float
// composition; onnxruntime's own fused int8 kernels saturate there too). Information for the
// planner: such partitions run as they are.
bool Int8PairsSaturate();

struct TensorDesc {
  dnnl_data_type_t type = dnnl_data_type_undef;
  std::vector<int64_t> dims;
};

// The op and everything oneDNN compiles it for. Inputs in the op's order: src, then for the
// dynamic ops scales and (optionally) zps.
struct OpDesc {
  dnnl_graph_op_kind_t kind = dnnl_graph_op_quantize;
  std::string qtype;  // empty: oneDNN's default
  bool set_axis = false;
  int64_t axis = 1;
  std::vector<float> scales;  // static ops
  bool set_zps = false;
  std::vector<int64_t> zps;          // static ops, when set_zps
  std::vector<int64_t> group_shape;  // per_group (empty: not set)
  std::vector<TensorDesc> inputs;
  TensorDesc dst;
};

class CompiledOp {
 public:
  // Throws DnnlError when oneDNN refuses the op at any step.
  static std::shared_ptr<const CompiledOp> Compile(const OpDesc& desc);
  ~CompiledOp();
  CompiledOp(const CompiledOp&) = delete;
  CompiledOp& operator=(const CompiledOp&) = delete;

  // `inputs` in OpDesc order, dense row-major buffers of the compiled shapes and types; may run
  // on several threads at once. Throws DnnlError.
  void Execute(const void* const* inputs, void* dst) const;

 private:
  CompiledOp() = default;
  // The steps, throwing what oneDNN throws; `stage` names the step under way.
  static std::shared_ptr<const CompiledOp> CompileOrThrow(const OpDesc& desc, const char*& stage);
  void ExecuteOrThrow(const void* const* inputs, void* dst, const char* stage) const;

  dnnl_graph_compiled_partition_t compiled_ = nullptr;
  // The partition's input ports (its order, which need not be the op's) and where each one's
  // buffer is in Execute's `inputs`.
  std::vector<dnnl_graph_logical_tensor_t> ports_;
  std::vector<size_t> port_input_;
  dnnl_graph_logical_tensor_t output_{};
};

}  // namespace qg::onednn
