// A partition description (the text of /work/partition-contract.md section 1, documented in
// docs/onednn.md): what the planner hands over, parsed once into ops and logical tensors.
//
//   qgpart 1
//   tensor <id> <dtype> <var|const> <dims>
//   op <id> <Kind> in=<id>,... out=<id>,... [<attr>=<t>:<v>,<v>,... ...]
//   inputs <id> ...
//   outputs <id> ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "onednn/tables.h"

namespace qg::onednn {

// A description that breaks a rule: one line naming the op or tensor (or the line) and the rule.
class DescriptionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorSpec {
  size_t id = 0;
  const DataTypeName* type = nullptr;
  bool constant = false;
  bool rank_known = false;
  std::vector<int64_t> dims;  // -1: unknown
};

struct AttrValue {
  const AttrName* name = nullptr;
  std::vector<int64_t> ints;  // kInts, kBool (0 or 1)
  std::vector<float> floats;  // kFloats
  std::string text;           // kString
};

struct OpSpec {
  size_t id = 0;
  const OpKindName* kind = nullptr;
  std::vector<size_t> inputs;
  std::vector<size_t> outputs;
  std::vector<AttrValue> attrs;

  std::string Label() const;  // "op 7 Convolution"
};

struct Description {
  std::vector<TensorSpec> tensors;
  std::vector<OpSpec> ops;
  bool has_inputs = false;  // the `inputs` / `outputs` lines (a partition node's order)
  bool has_outputs = false;
  std::vector<size_t> inputs;
  std::vector<size_t> outputs;

  const TensorSpec& Tensor(size_t id) const;  // throws DescriptionError for an unknown id
  std::map<size_t, size_t> tensor_index;      // id -> position in `tensors`
};

// Parses and checks a description (ids declared and unique, each tensor produced by at most
// one op, attribute names, types and values); throws DescriptionError.
Description ParseDescription(const std::string& text);

}  // namespace qg::onednn
