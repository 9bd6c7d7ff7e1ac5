// A description compiled as one oneDNN Graph partition for fixed input shapes: what the
// OneDnnPartition op runs (per input-shape tuple) and what QuantgraphOnednnCompile tries.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "onednn/description.h"
#include "onednn/graph.h"

namespace qg::onednn {

class FusedPartition {
 public:
  // Compiles every op of `d` as one partition, the graph inputs having `input_dims` (in the
  // order of Inputs(d)). Throws DescriptionError with one line: oneDNN splits the ops, does not
  // support them, refuses to compile them, or gives an output a layout that is not dense.
  // Nothing is executed: no constant is ever cached from placeholder data.
  static std::unique_ptr<FusedPartition> Compile(
      const Description& d, const std::vector<std::vector<int64_t>>& input_dims);
  ~FusedPartition();
  FusedPartition(const FusedPartition&) = delete;
  FusedPartition& operator=(const FusedPartition&) = delete;

  // The node's input / output tensor ids: the description's `inputs` / `outputs` lines, else
  // the graph inputs (tensors no op produces) / outputs (tensors no op reads) in id order.
  static std::vector<size_t> Inputs(const Description& d);
  static std::vector<size_t> Outputs(const Description& d);

  // Dense row-major dims of each output (Outputs order), as oneDNN inferred them.
  const std::vector<std::vector<int64_t>>& output_dims() const { return output_dims_; }

  // Runs on dense row-major buffers (Inputs / Outputs order) of the compiled shapes; may run
  // on several threads at once. Throws DnnlError.
  void Execute(const void* const* inputs, void* const* outputs) const;

 private:
  FusedPartition() = default;
  struct Binding;  // one set of oneDNN tensors, re-pointed at each call's buffers
  std::unique_ptr<Binding> TakeBinding() const;
  void ReturnBinding(std::unique_ptr<Binding> b) const;

  Partition partition_;
  Compiled compiled_;
  std::vector<dnnl_graph_logical_tensor_t> in_ports_;  // the partition's order
  std::vector<size_t> in_index_;                       // port -> position in Inputs
  std::vector<dnnl_graph_logical_tensor_t> out_ports_;
  std::vector<size_t> out_index_;
  std::vector<std::vector<int64_t>> output_dims_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Binding>> free_;
};

}  // namespace qg::onednn
