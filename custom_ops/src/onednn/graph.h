// A parsed description as one oneDNN Graph: its ops and logical tensors added, finalized and
// partitioned by oneDNN. Used at plan time (the whole graph, Wildcards included) and by the
// partition op (one partition, compiled per input shapes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "onednn/description.h"
#include "onednn/handles.h"

namespace qg::onednn {

// Dims oneDNN is told for some tensors (a node's inputs when compiling); the others get the
// description's dims.
using GivenDims = std::map<size_t, std::vector<int64_t>>;

struct BuiltGraph {
  Graph graph;
  std::map<size_t, dnnl_graph_logical_tensor_t> tensors;  // every tensor, as given to the ops
  std::vector<Partition> partitions;                      // in oneDNN's order
};

// Adds every op, finalizes and partitions (fusion policy). `unknown_inner`: tensors that are
// neither given nor graph inputs get unknown dims (oneDNN infers them at compile time), so
// the description's dims cannot disagree with the given ones. Throws DescriptionError naming
// the op (or tensor) oneDNN refused, with its status and the step. `scope` prefixes every op's
// name: oneDNN's compiled-partition cache (from v3.4 keyed by ops and tensors, no longer by the
// partition object) must never hand one node's kernel, and so its cached constants, to another.
BuiltGraph BuildGraph(const Description& d, const GivenDims& given, bool unknown_inner,
                      const std::string& scope = "");

// The op ids of a partition and whether oneDNN's backend supports it.
std::vector<size_t> PartitionOps(const Partition& p);
bool PartitionSupported(const Partition& p);

}  // namespace qg::onednn
