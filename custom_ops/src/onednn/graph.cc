#include "onednn/graph.h"

#include <dlfcn.h>

#include <set>
#include <string>
#include <utility>

#include "onednn/partition.h"

namespace qg::onednn {
namespace {

// `what` failed with `status` at `stage`: one line for the caller.
[[noreturn]] void Fail(const std::string& what, dnnl_status_t status, const char* stage) {
  throw DescriptionError(what + ": " + StatusName(status) + " (" + stage + ")");
}

// A graph with constant 4-bit weights gets oneDNN's weight decompression: its CPU matmul takes
// f32 x s4/u4 with grouped scales only in fpmath mode with apply_to_int (v3.7+; measured on
// v3.13.2, AVX2: "unsupported scales configuration" without it). Strict mode: no precision
// is lowered. Other graphs are left as they were (apply_to_int would let int8 kernels compute
// in floating point). Looked up at run time: the loaded oneDNN may be older than the headers.
void DecompressWeights(dnnl_graph_graph_t graph, const Description& d) {
  bool four_bit = false;
  for (const auto& t : d.tensors) {
    if (t.constant && (t.type->type == kDnnlS4 || t.type->type == kDnnlU4)) four_bit = true;
  }
  if (!four_bit) return;
  using SetFpmath = dnnl_status_t (*)(dnnl_graph_graph_t, int, int);
  auto set = reinterpret_cast<SetFpmath>(dlsym(RTLD_DEFAULT, "dnnl_graph_graph_set_fpmath_mode"));
  if (set != nullptr) set(graph, 0 /* dnnl_fpmath_mode_strict */, 1);
}

dnnl_graph_logical_tensor_t Logical(const TensorSpec& t, const std::vector<int64_t>* dims,
                                    bool unknown) {
  const auto property =
      t.constant ? dnnl_graph_tensor_property_constant : dnnl_graph_tensor_property_variable;
  const std::string what = "tensor " + std::to_string(t.id);
  const std::vector<int64_t>& shape = dims != nullptr ? *dims : t.dims;
  dnnl_graph_logical_tensor_t lt{};
  if (dims == nullptr && !t.rank_known) {
    const dnnl_status_t s =
        dnnl_graph_logical_tensor_init(&lt, t.id, t.type->type, DNNL_GRAPH_UNKNOWN_NDIMS,
                                       dnnl_graph_layout_type_strided, property);
    if (s != dnnl_success) Fail(what, s, "describing the tensor");
    return lt;
  }
  if (shape.size() > DNNL_MAX_NDIMS) {
    throw DescriptionError(what + ": rank " + std::to_string(shape.size()) + " exceeds oneDNN's " +
                           std::to_string(DNNL_MAX_NDIMS));
  }
  dnnl_dims_t d{};
  for (size_t i = 0; i < shape.size(); ++i) d[i] = unknown ? DNNL_GRAPH_UNKNOWN_DIM : shape[i];
  const dnnl_status_t s = dnnl_graph_logical_tensor_init_with_dims(
      &lt, t.id, t.type->type, static_cast<int32_t>(shape.size()), d,
      dnnl_graph_layout_type_strided, property);
  if (s != dnnl_success) Fail(what, s, "describing the tensor");
  return lt;
}

void SetAttr(dnnl_graph_op_t op, const AttrValue& a, const std::string& label) {
  dnnl_status_t s = dnnl_success;
  const dnnl_graph_op_attr_t name = a.name->attr;
  switch (a.name->type) {
    case AttrType::kFloats:
      s = dnnl_graph_op_set_attr_f32(op, name, a.floats.data(), a.floats.size());
      break;
    case AttrType::kInts:
      s = dnnl_graph_op_set_attr_s64(op, name, a.ints.data(), a.ints.size());
      break;
    case AttrType::kBool: {
      const uint8_t v = a.ints.at(0) != 0 ? 1 : 0;
      s = dnnl_graph_op_set_attr_bool(op, name, &v, 1);
      break;
    }
    case AttrType::kString:
      s = dnnl_graph_op_set_attr_str(op, name, a.text.c_str(), a.text.size());
      break;
  }
  if (s != dnnl_success) {
    Fail(label + ": attribute " + a.name->name, s, "setting the attribute");
  }
}

void AddOp(dnnl_graph_graph_t graph, const OpSpec& spec,
           const std::map<size_t, dnnl_graph_logical_tensor_t>& tensors, const std::string& scope) {
  const std::string label = spec.Label();
  const std::string name = scope + label;
  Op op;
  dnnl_status_t s = dnnl_graph_op_create(op.out(), spec.id, spec.kind->kind, name.c_str());
  if (s != dnnl_success) Fail(label, s, "creating the op");
  for (size_t id : spec.inputs) {
    s = dnnl_graph_op_add_input(op.get(), &tensors.at(id));
    if (s != dnnl_success) Fail(label + ": input tensor " + std::to_string(id), s, "adding it");
  }
  for (size_t id : spec.outputs) {
    s = dnnl_graph_op_add_output(op.get(), &tensors.at(id));
    if (s != dnnl_success) Fail(label + ": output tensor " + std::to_string(id), s, "adding it");
  }
  for (const auto& a : spec.attrs) SetAttr(op.get(), a, label);
  s = dnnl_graph_add_op(graph, op.get());
  if (s != dnnl_success) Fail(label, s, "adding the op");
}

BuiltGraph BuildOrThrow(const Description& d, const GivenDims& given, bool unknown_inner,
                        const std::string& scope, const char*& stage) {
  BuiltGraph g;
  std::set<size_t> produced;
  for (const auto& op : d.ops) produced.insert(op.outputs.begin(), op.outputs.end());
  stage = "describing the tensors";
  for (const auto& t : d.tensors) {
    const auto it = given.find(t.id);
    const std::vector<int64_t>* dims = it != given.end() ? &it->second : nullptr;
    const bool unknown = dims == nullptr && unknown_inner && produced.count(t.id) != 0;
    g.tensors.emplace(t.id, Logical(t, dims, unknown));
  }
  stage = "building the graph";
  dnnl_status_t s = dnnl_graph_graph_create(g.graph.out(), dnnl_cpu);
  if (s != dnnl_success) Fail("the graph", s, stage);
  DecompressWeights(g.graph.get(), d);
  for (const auto& op : d.ops) AddOp(g.graph.get(), op, g.tensors, scope);
  stage = "partitioning the graph";
  s = dnnl_graph_graph_finalize(g.graph.get());
  if (s != dnnl_success) Fail("the graph", s, "finalizing the graph");
  s = dnnl_graph_graph_filter(g.graph.get(), dnnl_graph_partition_policy_fusion);
  if (s != dnnl_success) Fail("the graph", s, stage);
  size_t count = 0;
  s = dnnl_graph_graph_get_partition_num(g.graph.get(), &count);
  if (s != dnnl_success) Fail("the graph", s, stage);
  std::vector<dnnl_graph_partition_t> raw(count, nullptr);
  s = dnnl_graph_graph_get_partitions(g.graph.get(), count, raw.data());
  for (auto* p : raw) {  // owned from here on, also when the call failed half-way
    Partition owned;
    *owned.out() = p;
    if (p != nullptr) g.partitions.push_back(std::move(owned));
  }
  if (s != dnnl_success) Fail("the graph", s, stage);
  return g;
}

}  // namespace

BuiltGraph BuildGraph(const Description& d, const GivenDims& given, bool unknown_inner,
                      const std::string& scope) {
  const char* stage = "building the graph";
  try {
    return BuildOrThrow(d, given, unknown_inner, scope, stage);
  } catch (const DescriptionError&) {
    throw;
  } catch (const std::exception& e) {  // oneDNN's C API lets C++ exceptions escape
    throw DescriptionError(std::string("the graph: ") + e.what() + " (" + stage + ")");
  }
}

std::vector<size_t> PartitionOps(const Partition& p) {
  size_t n = 0;
  Check(dnnl_graph_partition_get_op_num(p.get(), &n), "listing the partition's ops");
  std::vector<size_t> ids(n);
  Check(dnnl_graph_partition_get_ops(p.get(), n, ids.data()), "listing the partition's ops");
  return ids;
}

bool PartitionSupported(const Partition& p) {
  uint8_t supported = 0;
  Check(dnnl_graph_partition_is_supported(p.get(), &supported), "asking the partition");
  return supported != 0;
}

}  // namespace qg::onednn
