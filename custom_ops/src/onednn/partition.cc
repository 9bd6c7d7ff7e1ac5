#include "onednn/partition.h"

#include <oneapi/dnnl/dnnl.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "onednn/handles.h"

namespace qg::onednn {

void Check(dnnl_status_t status, const char* stage) {
  if (status != dnnl_success) throw DnnlError(StatusName(status), stage);
}

// oneDNN's C API is C++ inside and lets some failures escape as exceptions (dnnl::error from
// its primitives, e.g. "could not execute a primitive"): they become DnnlErrors too.
void Rethrow(const char* stage) {
  try {
    throw;
  } catch (const DnnlError&) {
    throw;
  } catch (const dnnl::error& e) {
    throw DnnlError(StatusName(e.status), std::string(stage) + ": " + e.what());
  } catch (const std::exception& e) {
    throw DnnlError("exception", std::string(stage) + ": " + e.what());
  }
}

namespace {

const char* RuntimeName(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_NONE:
      return "none";
    case DNNL_RUNTIME_SEQ:
      return "SEQ";
    case DNNL_RUNTIME_OMP:
      return "OMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "THREADPOOL";
    case DNNL_RUNTIME_SYCL:
      return "SYCL";
    default:
      return "other";
  }
}

}  // namespace

// The process's CPU engine, created on first use and kept to the end (destroying it at exit
// could run after libdnnl's own teardown).
dnnl_engine_t Engine() {
  static std::mutex mutex;
  static dnnl_engine_t engine = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (engine == nullptr) {
    const dnnl_status_t status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (status != dnnl_success) {
      engine = nullptr;
      // A SYCL build's CPU engine is an OpenCL device: the usual cause is the ICD loader not
      // finding oneDNN's bundled OpenCL runtime.
      const bool sycl = dnnl_version()->cpu_runtime == DNNL_RUNTIME_SYCL;
      throw DnnlError(StatusName(status),
                      sycl ? "creating the CPU engine; this SYCL build needs OCL_ICD_FILENAMES="
                             "<its lib>/libintelocl.so"
                           : "creating the CPU engine");
    }
  }
  return engine;
}

// This thread's stream on the engine: streams are not meant to be shared by threads, and
// onnxruntime may run a kernel on several at once; creating one per call costs ~80 us with a
// SYCL build (a queue each time).
dnnl_stream_t ThreadStream(dnnl_engine_t engine) {
  thread_local Stream stream;
  if (stream.get() == nullptr) {
    Check(dnnl_stream_create(stream.out(), engine, dnnl_stream_default_flags), "creating a stream");
  }
  return stream.get();
}

namespace {

dnnl_graph_logical_tensor_t Logical(size_t id, const TensorDesc& t) {
  if (t.dims.size() > DNNL_MAX_NDIMS) {
    throw DnnlError("rank " + std::to_string(t.dims.size()) + " exceeds oneDNN's " +
                        std::to_string(DNNL_MAX_NDIMS) + " dims",
                    "describing the tensors");
  }
  dnnl_dims_t dims{};
  for (size_t i = 0; i < t.dims.size(); ++i) dims[i] = t.dims[i];
  dnnl_graph_logical_tensor_t lt{};
  Check(dnnl_graph_logical_tensor_init_with_dims(
            &lt, id, t.type, static_cast<int32_t>(t.dims.size()), dims,
            dnnl_graph_layout_type_strided, dnnl_graph_tensor_property_variable),
        "describing the tensors");
  return lt;
}

Op MakeOp(const OpDesc& desc, const std::vector<dnnl_graph_logical_tensor_t>& inputs,
          const dnnl_graph_logical_tensor_t& output) {
  const char* stage = "creating the op";
  Op op;
  Check(dnnl_graph_op_create(op.out(), 0, desc.kind, "quantgraph"), stage);
  for (const auto& lt : inputs) Check(dnnl_graph_op_add_input(op.get(), &lt), stage);
  Check(dnnl_graph_op_add_output(op.get(), &output), stage);
  stage = "setting the op's attributes";
  if (!desc.qtype.empty()) {
    Check(dnnl_graph_op_set_attr_str(op.get(), dnnl_graph_op_attr_qtype, desc.qtype.c_str(),
                                     desc.qtype.size()),
          stage);
  }
  if (desc.set_axis)
    Check(dnnl_graph_op_set_attr_s64(op.get(), dnnl_graph_op_attr_axis, &desc.axis, 1), stage);
  if (!desc.scales.empty()) {
    Check(dnnl_graph_op_set_attr_f32(op.get(), dnnl_graph_op_attr_scales, desc.scales.data(),
                                     desc.scales.size()),
          stage);
  }
  if (desc.set_zps) {
    Check(dnnl_graph_op_set_attr_s64(op.get(), dnnl_graph_op_attr_zps, desc.zps.data(),
                                     desc.zps.size()),
          stage);
  }
  if (!desc.group_shape.empty()) {
    Check(dnnl_graph_op_set_attr_s64(op.get(), kAttrGroupShape, desc.group_shape.data(),
                                     desc.group_shape.size()),
          stage);
  }
  return op;
}

}  // namespace

std::string StatusName(dnnl_status_t status) {
  switch (status) {
    case dnnl_success:
      return "dnnl_success";
    case dnnl_out_of_memory:
      return "dnnl_out_of_memory";
    case dnnl_invalid_arguments:
      return "dnnl_invalid_arguments";
    case dnnl_unimplemented:
      return "dnnl_unimplemented";
    case dnnl_last_impl_reached:
      return "dnnl_last_impl_reached";
    case dnnl_runtime_error:
      return "dnnl_runtime_error";
    case dnnl_not_required:
      return "dnnl_not_required";
    case dnnl_invalid_graph:
      return "dnnl_invalid_graph";
    case dnnl_invalid_graph_op:
      return "dnnl_invalid_graph_op";
    case dnnl_invalid_shape:
      return "dnnl_invalid_shape";
    case dnnl_invalid_data_type:
      return "dnnl_invalid_data_type";
  }
  return "dnnl status " + std::to_string(static_cast<int>(status));
}

std::string LoadedVersion() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

bool LoadedAtLeast(int major, int minor) {
  const dnnl_version_t* v = dnnl_version();
  return v->major > major || (v->major == major && v->minor >= minor);
}

bool Int8PairsSaturate() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (isa == dnnl_cpu_isa_default) return false;  // not x86: no vpmaddubsw kernels
  const bool avx2_vnni = isa == dnnl_cpu_isa_avx2_vnni || isa == dnnl_cpu_isa_avx2_vnni_2;
  const bool avx512_vnni = (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
  return !avx2_vnni && !avx512_vnni;
}

std::string LoadedVersionDetails() {
  const dnnl_version_t* v = dnnl_version();
  const std::string hash = v->hash != nullptr ? std::string(v->hash).substr(0, 8) : "unknown";
  return LoadedVersion() + " (" + hash + ", cpu runtime " + RuntimeName(v->cpu_runtime) + ")";
}

std::shared_ptr<const CompiledOp> CompiledOp::Compile(const OpDesc& desc) {
  const char* stage = "building the graph";
  try {
    return CompileOrThrow(desc, stage);
  } catch (...) {
    Rethrow(stage);
  }
}

std::shared_ptr<const CompiledOp> CompiledOp::CompileOrThrow(const OpDesc& desc,
                                                             const char*& stage) {
  stage = "creating the CPU engine";
  const dnnl_engine_t engine = Engine();
  // Logical tensor ids: the inputs' positions, then the output.
  stage = "describing the tensors";
  std::vector<dnnl_graph_logical_tensor_t> inputs;
  for (size_t i = 0; i < desc.inputs.size(); ++i) inputs.push_back(Logical(i, desc.inputs[i]));
  const dnnl_graph_logical_tensor_t output = Logical(desc.inputs.size(), desc.dst);

  stage = "creating the op";
  Op op = MakeOp(desc, inputs, output);
  Graph graph;
  stage = "adding the op to a graph";
  Check(dnnl_graph_graph_create(graph.out(), dnnl_cpu), stage);
  Check(dnnl_graph_add_op(graph.get(), op.get()), stage);
  stage = "partitioning the graph";
  Check(dnnl_graph_graph_finalize(graph.get()), stage);
  Check(dnnl_graph_graph_filter(graph.get(), dnnl_graph_partition_policy_fusion), stage);
  size_t count = 0;
  Check(dnnl_graph_graph_get_partition_num(graph.get(), &count), stage);
  if (count != 1) {
    throw DnnlError(count == 0 ? "no partition" : std::to_string(count) + " partitions", stage);
  }
  Partition partition;
  Check(dnnl_graph_graph_get_partitions(graph.get(), 1, partition.out()), stage);
  uint8_t supported = 0;
  Check(dnnl_graph_partition_is_supported(partition.get(), &supported), stage);
  if (supported == 0) throw DnnlError("partition not supported", stage);

  std::shared_ptr<CompiledOp> result(new CompiledOp());
  size_t ports = 0;
  Check(dnnl_graph_partition_get_input_ports_num(partition.get(), &ports), stage);
  std::vector<dnnl_graph_logical_tensor_t> port_lts(ports);
  Check(dnnl_graph_partition_get_input_ports(partition.get(), ports, port_lts.data()), stage);
  for (const auto& port : port_lts) {
    if (port.id >= inputs.size()) throw DnnlError("unexpected input port", stage);
    result->ports_.push_back(inputs[port.id]);
    result->port_input_.push_back(port.id);
  }
  std::vector<const dnnl_graph_logical_tensor_t*> compile_inputs;
  for (const auto& lt : result->ports_) compile_inputs.push_back(&lt);
  result->output_ = output;
  const dnnl_graph_logical_tensor_t* compile_outputs[] = {&result->output_};

  stage = "compiling the partition";
  Compiled compiled;
  Check(dnnl_graph_compiled_partition_create(compiled.out(), partition.get()), stage);
  Check(dnnl_graph_partition_compile(partition.get(), compiled.get(), compile_inputs.size(),
                                     compile_inputs.data(), 1, compile_outputs, engine),
        stage);
  result->compiled_ = compiled.release();
  return result;
}

CompiledOp::~CompiledOp() {
  if (compiled_ != nullptr) dnnl_graph_compiled_partition_destroy(compiled_);
}

void CompiledOp::Execute(const void* const* inputs, void* dst) const {
  const char* stage = "executing the partition";
  try {
    ExecuteOrThrow(inputs, dst, stage);
  } catch (...) {
    Rethrow(stage);
  }
}

void CompiledOp::ExecuteOrThrow(const void* const* inputs, void* dst, const char* stage) const {
  const dnnl_engine_t engine = Engine();
  std::vector<Tensor> tensors(ports_.size());
  std::vector<const_dnnl_graph_tensor_t> in;
  for (size_t i = 0; i < ports_.size(); ++i) {
    // oneDNN takes a non-const handle for every tensor; it does not write its inputs.
    void* handle = const_cast<void*>(inputs[port_input_[i]]);
    Check(dnnl_graph_tensor_create(tensors[i].out(), &ports_[i], engine, handle), stage);
    in.push_back(tensors[i].get());
  }
  Tensor out;
  Check(dnnl_graph_tensor_create(out.out(), &output_, engine, dst), stage);
  const_dnnl_graph_tensor_t outs[] = {out.get()};
  const dnnl_stream_t stream = ThreadStream(engine);
  Check(dnnl_graph_compiled_partition_execute(compiled_, stream, in.size(), in.data(), 1, outs),
        stage);
  Check(dnnl_stream_wait(stream), stage);
}

}  // namespace qg::onednn
