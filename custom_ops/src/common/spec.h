// The spec as the kernels use it: rule messages, dtype names and the supported-types tables,
// all read from the generated op_spec.h (quantgraph/spec is the single source of truth).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/generated/op_spec.h"

namespace qg {

// The op kinds and their flags are the generated spec::OpKind / spec::kOps.
using spec::OpKind;

constexpr const spec::OpInfo& Info(OpKind kind) { return spec::kOps[static_cast<int>(kind)]; }
constexpr const char* OpName(OpKind kind) { return Info(kind).name; }
constexpr bool IsQuantize(OpKind kind) { return Info(kind).is_quantize; }
constexpr bool IsStatic(OpKind kind) { return Info(kind).is_static; }
bool OpHasAttribute(OpKind kind, std::string_view name);  // the op defines the attribute
bool HasQtype(OpKind kind, std::string_view qtype);      // one of the op's qtype values
std::string JoinQtypes(OpKind kind);                     // "per_tensor, per_channel", ...

// The spec's kind of an attribute of the ops ("int", "string", "floats", "ints"; throws
// std::logic_error for a name the ops do not have).
const char* AttributeKind(std::string_view name);

// A broken rule: what() is `<Op> node '<node>': <rule text> [rule <id>]`, the same text as
// quantgraph.spec.SpecError.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string message, std::string rule)
      : std::runtime_error(std::move(message)), rule_(std::move(rule)) {}
  const std::string& rule() const { return rule_; }

 private:
  std::string rule_;
};

using RuleFields = std::vector<std::pair<std::string_view, std::string>>;

// The rule's text with its {field} placeholders filled (throws std::logic_error on an unknown
// rule id or a placeholder without a value: the header and the caller disagree).
std::string FormatRule(std::string_view rule_id, const RuleFields& fields);
[[noreturn]] void ThrowRule(OpKind op, std::string_view node, std::string_view rule_id,
                            const RuleFields& fields);

// Element types (ONNX TensorProto enums).
const spec::DType* FindDType(int onnx);  // nullptr: not a type of the spec
std::string TypeName(int onnx);          // as quantgraph.spec.dtypes.onnx_name
std::string JoinTypeNames(const std::vector<int>& types);

// The op's supported-types table, in the spec's row order (values unique).
std::vector<int> SrcTypes(OpKind op);
std::vector<int> DstTypes(OpKind op, int src);              // dst of rows with this src
std::vector<int> ScalesTypes(OpKind op, int src, int dst);  // dynamic ops
std::vector<int> ZpsTypes(OpKind op, int src, int dst);     // dynamic ops

// Python's str() of an int, of a float and of a list of ints (for rule fields).
std::string PyInt(int64_t v);
std::string PyFloat(float v);
std::string PyIntList(const int64_t* values, size_t count);

}  // namespace qg
