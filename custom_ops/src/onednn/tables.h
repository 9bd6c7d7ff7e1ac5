// The names a partition description uses (docs/onednn.md, "Partition descriptions") and what
// they are to oneDNN: one table of op kinds, one of attributes, one of data types.
#pragma once

#include <cstddef>
#include <string>

#include "onednn/dnnl_api.h"

namespace qg::onednn {

struct OpKindName {
  const char* name;  // oneDNN's documented name: "Convolution", "MatMul", ...
  dnnl_graph_op_kind_t kind;
};

// How an attribute's values are written: `i` int64 list, `f` f32 list (float.hex), `s` one
// string, `b` 0 or 1.
enum class AttrType : char { kInts = 'i', kFloats = 'f', kString = 's', kBool = 'b' };

struct AttrName {
  const char* name;  // oneDNN's documented name: "strides", "qtype", ...
  dnnl_graph_op_attr_t attr;
  AttrType type;
};

struct DataTypeName {
  const char* name;  // "f32", "u8", ...
  dnnl_data_type_t type;
  int bits;  // per element: 4-bit types pack two to a byte
  int onnx;  // ONNX's element type
};

// nullptr when the name is not in the table.
const OpKindName* FindOpKind(const std::string& name);
const AttrName* FindAttr(const std::string& name);
const DataTypeName* FindDataType(const std::string& name);
const DataTypeName* FindDataType(dnnl_data_type_t type);
const DataTypeName* FindOnnxType(int onnx);

// "f32 f16 ...", for messages.
std::string DataTypeNames();

}  // namespace qg::onednn
