#include "onednn/fused.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "onednn/partition.h"

namespace qg::onednn {

struct FusedPartition::Binding {
  std::vector<Tensor> in, out;
  std::vector<const_dnnl_graph_tensor_t> in_raw, out_raw;
};

namespace {

std::string Ids(const std::vector<size_t>& ids) {
  std::string s;
  for (size_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Where each port's tensor is in `order`; a port missing from it is an error.
std::vector<size_t> PortIndex(const std::vector<dnnl_graph_logical_tensor_t>& ports,
                              const std::vector<size_t>& order, const char* what) {
  std::vector<size_t> index;
  for (const auto& p : ports) {
    const auto it = std::find(order.begin(), order.end(), p.id);
    if (it == order.end()) {
      throw DescriptionError("tensor " + std::to_string(p.id) + ": an " + what +
                             " of the partition that the description's " + what +
                             "s line does not list");
    }
    index.push_back(static_cast<size_t>(it - order.begin()));
  }
  return index;
}

std::vector<dnnl_graph_logical_tensor_t> Ports(const Partition& p, bool inputs) {
  size_t n = 0;
  const char* stage = "listing the partition's ports";
  Check(inputs ? dnnl_graph_partition_get_input_ports_num(p.get(), &n)
               : dnnl_graph_partition_get_output_ports_num(p.get(), &n),
        stage);
  std::vector<dnnl_graph_logical_tensor_t> ports(n);
  Check(inputs ? dnnl_graph_partition_get_input_ports(p.get(), n, ports.data())
               : dnnl_graph_partition_get_output_ports(p.get(), n, ports.data()),
        stage);
  return ports;
}

// oneDNN from v3.4 has its constant tensor cache off by default (capacity 0): const weights
// would be reordered at every call. Unless the user chose a capacity (the environment variable
// or the API), give it 1 GiB. v3.2 has no capacity API (its cache is on) and is left alone;
// the API is looked up at run time because the loaded oneDNN may be newer than the headers.
void EnableConstantCache() {
  if (std::getenv("ONEDNN_GRAPH_CONSTANT_TENSOR_CACHE_CAPACITY") != nullptr) return;
  using Get = dnnl_status_t (*)(dnnl_engine_kind_t, size_t*);
  using Set = dnnl_status_t (*)(dnnl_engine_kind_t, size_t);
  auto get =
      reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "dnnl_graph_get_constant_tensor_cache_capacity"));
  auto set =
      reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "dnnl_graph_set_constant_tensor_cache_capacity"));
  if (get == nullptr || set == nullptr) return;
  size_t megabytes = 0;
  if (get(dnnl_cpu, &megabytes) == dnnl_success && megabytes == 0) set(dnnl_cpu, 1024);
}

bool DenseRowMajor(const dnnl_graph_logical_tensor_t& lt) {
  if (lt.layout_type != dnnl_graph_layout_type_strided) return false;
  int64_t stride = 1;
  for (int i = lt.ndims - 1; i >= 0; --i) {
    if (lt.dims[i] < 0) return false;
    if (lt.dims[i] > 1 && lt.layout.strides[i] != stride) return false;
    stride *= std::max<int64_t>(lt.dims[i], 1);
  }
  return true;
}

}  // namespace

std::vector<size_t> FusedPartition::Inputs(const Description& d) {
  if (d.has_inputs) return d.inputs;
  std::set<size_t> produced, ids;
  for (const auto& op : d.ops) produced.insert(op.outputs.begin(), op.outputs.end());
  for (const auto& op : d.ops) {
    for (size_t id : op.inputs) {
      if (!produced.count(id)) ids.insert(id);
    }
  }
  return {ids.begin(), ids.end()};
}

std::vector<size_t> FusedPartition::Outputs(const Description& d) {
  if (d.has_outputs) return d.outputs;
  std::set<size_t> read, ids;
  for (const auto& op : d.ops) read.insert(op.inputs.begin(), op.inputs.end());
  for (const auto& op : d.ops) {
    for (size_t id : op.outputs) {
      if (!read.count(id)) ids.insert(id);
    }
  }
  return {ids.begin(), ids.end()};
}

std::unique_ptr<FusedPartition> FusedPartition::Compile(
    const Description& d, const std::vector<std::vector<int64_t>>& input_dims) {
  const std::vector<size_t> inputs = Inputs(d), outputs = Outputs(d);
  if (input_dims.size() != inputs.size()) {
    throw DescriptionError(std::to_string(input_dims.size()) + " input shapes for " +
                           std::to_string(inputs.size()) + " inputs");
  }
  GivenDims given;
  for (size_t i = 0; i < inputs.size(); ++i) given[inputs[i]] = input_dims[i];
  static std::once_flag cache_once;
  std::call_once(cache_once, EnableConstantCache);
  // A name no other compilation in the process uses (see BuildGraph).
  static std::atomic<uint64_t> compilations{0};
  const std::string scope = "qg" + std::to_string(compilations.fetch_add(1)) + " ";
  BuiltGraph g = BuildGraph(d, given, true, scope);
  std::vector<size_t> all;
  for (const auto& op : d.ops) all.push_back(op.id);
  std::sort(all.begin(), all.end());
  if (g.partitions.size() != 1) {
    std::string parts;
    for (const auto& p : g.partitions) parts += " [" + Ids(PartitionOps(p)) + "]";
    throw DescriptionError("oneDNN splits the ops into " + std::to_string(g.partitions.size()) +
                           " partitions:" + parts);
  }
  std::unique_ptr<FusedPartition> f(new FusedPartition());
  f->partition_ = std::move(g.partitions.front());
  std::vector<size_t> ops = PartitionOps(f->partition_);
  std::sort(ops.begin(), ops.end());
  if (ops != all) {
    throw DescriptionError("oneDNN's partition has ops [" + Ids(ops) + "], not all of [" +
                           Ids(all) + "]");
  }
  if (!PartitionSupported(f->partition_)) {
    throw DescriptionError("oneDNN " + LoadedVersion() +
                           " does not support the partition of ops [" + Ids(ops) + "]");
  }
  // The ports as this build describes them: given dims for inputs, unknown (inferred) ones for
  // outputs, strided (dense) both.
  for (const auto& p : Ports(f->partition_, true)) f->in_ports_.push_back(g.tensors.at(p.id));
  for (const auto& p : Ports(f->partition_, false)) f->out_ports_.push_back(g.tensors.at(p.id));
  f->in_index_ = PortIndex(f->in_ports_, inputs, "input");
  f->out_index_ = PortIndex(f->out_ports_, outputs, "output");
  if (f->out_index_.size() != outputs.size()) {
    throw DescriptionError("outputs: " + std::to_string(outputs.size()) +
                           " listed, the partition has " + std::to_string(f->out_index_.size()));
  }
  const char* stage = "compiling the partition";
  try {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::vector<const dnnl_graph_logical_tensor_t*> ins, outs;
      for (const auto& lt : f->in_ports_) ins.push_back(&lt);
      for (const auto& lt : f->out_ports_) outs.push_back(&lt);
      Compiled compiled;
      Check(dnnl_graph_compiled_partition_create(compiled.out(), f->partition_.get()), stage);
      Check(dnnl_graph_partition_compile(f->partition_.get(), compiled.get(), ins.size(),
                                         ins.data(), outs.size(), outs.data(), Engine()),
            stage);
      bool dense = true;
      for (auto& lt : f->out_ports_) {
        Check(dnnl_graph_compiled_partition_query_logical_tensor(compiled.get(), lt.id, &lt),
              "querying the outputs");
        dense = dense && DenseRowMajor(lt);
      }
      f->compiled_ = std::move(compiled);
      if (dense) break;
      if (attempt == 1) throw DnnlError("an output's layout is not dense row-major", stage);
      // Ask again for the inferred dims with dense row-major strides.
      for (auto& lt : f->out_ports_) {
        dnnl_dims_t dims{};
        std::copy(lt.dims, lt.dims + lt.ndims, dims);
        Check(dnnl_graph_logical_tensor_init_with_dims(&lt, lt.id, lt.data_type, lt.ndims, dims,
                                                       dnnl_graph_layout_type_strided, lt.property),
              stage);
      }
    }
  } catch (...) {
    try {
      Rethrow(stage);
    } catch (const DnnlError& e) {
      throw DescriptionError("oneDNN " + LoadedVersion() + " cannot compile ops [" + Ids(ops) +
                             "]: " + e.what());
    }
  }
  f->output_dims_.resize(outputs.size());
  for (size_t i = 0; i < f->out_ports_.size(); ++i) {
    const auto& lt = f->out_ports_[i];
    f->output_dims_[f->out_index_[i]].assign(lt.dims, lt.dims + lt.ndims);
  }
  return f;
}

FusedPartition::~FusedPartition() = default;

std::unique_ptr<FusedPartition::Binding> FusedPartition::TakeBinding() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      auto b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  auto b = std::make_unique<Binding>();
  const char* stage = "creating the tensors";
  for (const auto* ports : {&in_ports_, &out_ports_}) {
    auto& tensors = ports == &in_ports_ ? b->in : b->out;
    auto& raw = ports == &in_ports_ ? b->in_raw : b->out_raw;
    for (const auto& lt : *ports) {
      Tensor t;
      Check(dnnl_graph_tensor_create(t.out(), &lt, Engine(), nullptr), stage);
      raw.push_back(t.get());
      tensors.push_back(std::move(t));
    }
  }
  return b;
}

void FusedPartition::ReturnBinding(std::unique_ptr<Binding> b) const {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(b));
}

void FusedPartition::Execute(const void* const* inputs, void* const* outputs) const {
  const char* stage = "executing the partition";
  try {
    std::unique_ptr<Binding> b = TakeBinding();
    for (size_t i = 0; i < b->in.size(); ++i) {
      // oneDNN takes a non-const handle for every tensor; it does not write its inputs.
      Check(dnnl_graph_tensor_set_data_handle(b->in[i].get(),
                                              const_cast<void*>(inputs[in_index_[i]])),
            stage);
    }
    for (size_t i = 0; i < b->out.size(); ++i) {
      Check(dnnl_graph_tensor_set_data_handle(b->out[i].get(), outputs[out_index_[i]]), stage);
    }
    const dnnl_stream_t stream = ThreadStream(Engine());
    Check(dnnl_graph_compiled_partition_execute(compiled_.get(), stream, b->in_raw.size(),
                                                b->in_raw.data(), b->out_raw.size(),
                                                b->out_raw.data()),
          stage);
    Check(dnnl_stream_wait(stream), stage);
    ReturnBinding(std::move(b));
  } catch (...) {
    Rethrow(stage);
  }
}

}  // namespace qg::onednn
