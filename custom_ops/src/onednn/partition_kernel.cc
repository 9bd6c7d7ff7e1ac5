// The OneDnnPartition kernel: the description parsed once, a FusedPartition compiled per
// distinct tuple of input shapes (a bounded LRU cache per node), executed on onnxruntime's
// buffers. Const inputs must be the node's initializers: oneDNN caches what it derives from
// them (reordered weights) by compiled kernel, so they may never change between calls.
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "onednn/description.h"
#include "onednn/fused.h"
#include "onednn/partition.h"
#include "onednn/partition_op.h"

namespace qg::onednn {
namespace {

using Shapes = std::vector<std::vector<int64_t>>;

// Compiled partitions per input shapes, least recently used dropped past `capacity`.
class ShapeCache {
 public:
  explicit ShapeCache(size_t capacity) : capacity_(capacity) {}

  std::shared_ptr<const FusedPartition> Find(const Shapes& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);  // now the most recent
    return it->second->second;
  }

  std::shared_ptr<const FusedPartition> Add(const Shapes& key,
                                            std::shared_ptr<const FusedPartition> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;  // another thread compiled it first
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }

 private:
  using Entry = std::pair<Shapes, std::shared_ptr<const FusedPartition>>;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;
  std::map<Shapes, std::list<Entry>::iterator> index_;
};

constexpr size_t kCacheEntries = 16;

std::string TypeText(ONNXTensorElementDataType t) {
  const DataTypeName* known = FindOnnxType(static_cast<int>(t));
  return known != nullptr ? known->name : "ONNX type " + std::to_string(static_cast<int>(t));
}

class PartitionKernel final : public OpKernel {
 public:
  PartitionKernel(const OrtApi&, const OrtKernelInfo* raw) : cache_(kCacheEntries) {
    Ort::ConstKernelInfo info(raw);
    node_ = info.GetNodeName();
    try {
      description_ = ParseDescription(info.GetAttribute<std::string>("description"));
    } catch (const DescriptionError& e) {
      Fail(std::string("description: ") + e.what(), ORT_INVALID_ARGUMENT);
    } catch (const Ort::Exception& e) {
      Fail(std::string("attribute description: ") + e.what(), ORT_INVALID_ARGUMENT);
    }
    inputs_ = FusedPartition::Inputs(description_);
    outputs_ = FusedPartition::Outputs(description_);
    if (info.GetInputCount() != inputs_.size() || info.GetOutputCount() != outputs_.size()) {
      Fail("the node has " + std::to_string(info.GetInputCount()) + " inputs and " +
               std::to_string(info.GetOutputCount()) + " outputs, its description " +
               std::to_string(inputs_.size()) + " and " + std::to_string(outputs_.size()),
           ORT_INVALID_ARGUMENT);
    }
    CheckInputs(info);
    CompileIfStatic(info);
  }

  void Compute(OrtKernelContext* raw) const override {
    Ort::KernelContext ctx(raw);
    Shapes shapes(inputs_.size());
    std::vector<const void*> in(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Ort::ConstValue v = ctx.GetInput(i);
      shapes[i] = v.GetTensorTypeAndShapeInfo().GetShape();
      in[i] = v.GetTensorRawData();
    }
    const std::shared_ptr<const FusedPartition> fused = Compiled(shapes);
    std::vector<void*> out(outputs_.size());
    bool empty = false;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const auto& dims = fused->output_dims()[i];
      Ort::UnownedValue v = ctx.GetOutput(i, dims.data(), dims.size());
      out[i] = v.GetTensorMutableRawData();
      for (int64_t d : dims) empty = empty || d == 0;
    }
    if (empty) return;  // nothing for oneDNN to write
    try {
      fused->Execute(in.data(), out.data());
    } catch (const DnnlError& e) {
      Fail("oneDNN " + LoadedVersion() + " failed: " + e.what(), ORT_FAIL);
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what, OrtErrorCode code) const {
    throw Ort::Exception(std::string(kPartitionOp) + " node '" + node_ + "': " + what, code);
  }

  // Types as described; const inputs are initializers (anything else could change between
  // calls while oneDNN keeps what it derived from the first call's values).
  void CheckInputs(const Ort::ConstKernelInfo& info) const {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const TensorSpec& t = description_.Tensor(inputs_[i]);
      const std::string name =
          "input " + std::to_string(i) + " (tensor " + std::to_string(t.id) + ")";
      const auto type = info.GetInputTypeInfo(i).GetTensorTypeAndShapeInfo().GetElementType();
      if (static_cast<int>(type) != t.type->onnx) {
        Fail(name + " is " + TypeText(type) + ", the description says " + t.type->name,
             ORT_INVALID_ARGUMENT);
      }
      if (!t.constant) continue;
      int is_constant = 0;
      info.GetTensorConstantInput(i, &is_constant);
      if (is_constant == 0) {
        Fail(name + " is declared const but is not an initializer of the model",
             ORT_INVALID_ARGUMENT);
      }
    }
  }

  // Every input shape known now: compile now, so that a refusal refuses the session.
  void CompileIfStatic(const Ort::ConstKernelInfo& info) {
    Shapes shapes;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const auto type_info = info.GetInputTypeInfo(i);
      const auto tensor = type_info.GetTensorTypeAndShapeInfo();
      std::vector<int64_t> dims = tensor.GetShape();
      // Rank 0 is also how an unknown shape reads here: wait for the call.
      if (dims.empty() && !description_.Tensor(inputs_[i]).rank_known) return;
      for (int64_t d : dims) {
        if (d < 0) return;
      }
      shapes.push_back(std::move(dims));
    }
    Compiled(shapes);
  }

  std::shared_ptr<const FusedPartition> Compiled(const Shapes& shapes) const {
    if (auto hit = cache_.Find(shapes)) return hit;
    std::shared_ptr<const FusedPartition> fused;
    try {
      fused = FusedPartition::Compile(description_, shapes);
    } catch (const DescriptionError& e) {
      Fail(std::string(e.what()) + " (input shapes " + ShapesText(shapes) + ")",
           ORT_NOT_IMPLEMENTED);
    } catch (const DnnlError& e) {
      Fail("oneDNN " + LoadedVersion() + " failed: " + e.what() + " (input shapes " +
               ShapesText(shapes) + ")",
           ORT_NOT_IMPLEMENTED);
    }
    return cache_.Add(shapes, std::move(fused));
  }

  static std::string ShapesText(const Shapes& shapes) {
    std::string s;
    for (const auto& dims : shapes) {
      s += s.empty() ? "[" : ", [";
      for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
      s += "]";
    }
    return s;
  }

  std::string node_;
  Description description_;
  std::vector<size_t> inputs_, outputs_;
  mutable ShapeCache cache_;
};

}  // namespace

std::unique_ptr<OpKernel> MakePartitionKernel(const OrtApi& api, const OrtKernelInfo* info) {
  return std::make_unique<PartitionKernel>(api, info);
}

}  // namespace qg::onednn
