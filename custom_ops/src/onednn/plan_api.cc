// The plan-time C ABI of libquantgraph_onednn (partition contract, section 2): the planner asks
// the loaded oneDNN how it partitions a description, and whether a unit compiles. Never throws,
// never aborts, writes nothing to stderr.
#include <cstring>
#include <string>

#include "onednn/description.h"
#include "onednn/fused.h"
#include "onednn/graph.h"
#include "onednn/partition.h"

namespace {

using qg::onednn::Description;

// 0 with `text` in `out`; 2 when it does not fit (with its NUL).
int Write(const std::string& text, char* out, size_t out_size, int code) {
  if (out == nullptr || text.size() + 1 > out_size) return 2;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return code;
}

// The body's one-line result, or its error as code 1.
template <typename Body>
int Answer(const char* description, char* out, size_t out_size, Body body) {
  std::string text;
  try {
    if (description == nullptr) throw qg::onednn::DescriptionError("no description");
    text = body(qg::onednn::ParseDescription(description));
  } catch (const std::exception& e) {
    return Write(e.what(), out, out_size, 1);
  } catch (...) {
    return Write("unknown error", out, out_size, 1);
  }
  return Write(text, out, out_size, 0);
}

std::string Partitions(const Description& d) {
  const qg::onednn::BuiltGraph g = qg::onednn::BuildGraph(d, {}, false);
  std::string text;
  for (const auto& p : g.partitions) {
    text += "partition ";
    text += qg::onednn::PartitionSupported(p) ? "1" : "0";
    for (size_t id : qg::onednn::PartitionOps(p)) text += " " + std::to_string(id);
    text += "\n";
  }
  return text;
}

std::string CompileQuery(const Description& d) {
  std::vector<std::vector<int64_t>> dims;
  for (size_t id : qg::onednn::FusedPartition::Inputs(d)) {
    const auto& t = d.Tensor(id);
    bool known = t.rank_known;
    for (int64_t x : t.dims) known = known && x >= 0;
    if (!known) {
      throw qg::onednn::DescriptionError("tensor " + std::to_string(id) +
                                         ": an input's dims must be known to compile");
    }
    dims.push_back(t.dims);
  }
  qg::onednn::FusedPartition::Compile(d, dims);
  return "";
}

}  // namespace

extern "C" {

// One line per partition of the whole description: `partition <supported 0|1> <op id> ...`.
__attribute__((visibility("default"))) int QuantgraphOnednnPartitions(const char* description,
                                                                      char* out, size_t out_size) {
  return Answer(description, out, out_size, Partitions);
}

// 0 when oneDNN compiles the description as one partition for its input dims, else 1 and why.
__attribute__((visibility("default"))) int QuantgraphOnednnCompile(const char* description,
                                                                   char* out, size_t out_size) {
  return Answer(description, out, out_size, CompileQuery);
}

// 1 when the loaded oneDNN's int8 convolution / matmul on this CPU saturate for s8 weights
// beyond |64| (no VNNI: u8 x s8 products summed in int16 pairs, as onnxruntime's own int8
// kernels there), else 0: for the plan to say so.
__attribute__((visibility("default"))) int QuantgraphOnednnInt8Saturates(void) {
  try {
    return qg::onednn::Int8PairsSaturate() ? 1 : 0;
  } catch (...) {
    return 1;
  }
}

}  // extern "C"
