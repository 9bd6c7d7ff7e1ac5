#include "onednn/tables.h"

namespace qg::onednn {
namespace {

// The inference ops of oneDNN v3.2's Graph API (the enum values are oneDNN's ABI, so they hold
// for any newer oneDNN 3.x too).
constexpr OpKindName kOpKinds[] = {
    {"Abs", dnnl_graph_op_abs},
    {"Add", dnnl_graph_op_add},
    {"AvgPool", dnnl_graph_op_avg_pool},
    {"BatchNormInference", dnnl_graph_op_batch_norm_inference},
    {"BiasAdd", dnnl_graph_op_bias_add},
    {"Clamp", dnnl_graph_op_clamp},
    {"Concat", dnnl_graph_op_concat},
    {"Convolution", dnnl_graph_op_convolution},
    {"ConvTranspose", dnnl_graph_op_conv_transpose},
    {"Dequantize", dnnl_graph_op_dequantize},
    {"Divide", dnnl_graph_op_divide},
    {"DynamicDequantize", dnnl_graph_op_dynamic_dequantize},
    {"DynamicQuantize", dnnl_graph_op_dynamic_quantize},
    {"Elu", dnnl_graph_op_elu},
    {"Exp", dnnl_graph_op_exp},
    {"GELU", dnnl_graph_op_gelu},
    {"HardSigmoid", dnnl_graph_op_hard_sigmoid},
    {"HardSwish", dnnl_graph_op_hard_swish},
    {"Interpolate", dnnl_graph_op_interpolate},
    {"LayerNorm", dnnl_graph_op_layer_norm},
    {"LeakyReLU", dnnl_graph_op_leaky_relu},
    {"Log", dnnl_graph_op_log},
    {"LogSoftmax", dnnl_graph_op_log_softmax},
    {"MatMul", dnnl_graph_op_matmul},
    {"Maximum", dnnl_graph_op_maximum},
    {"MaxPool", dnnl_graph_op_max_pool},
    {"Minimum", dnnl_graph_op_minimum},
    {"Mish", dnnl_graph_op_mish},
    {"Multiply", dnnl_graph_op_multiply},
    {"Pow", dnnl_graph_op_pow},
    {"PReLU", dnnl_graph_op_prelu},
    {"Quantize", dnnl_graph_op_quantize},
    {"Reciprocal", dnnl_graph_op_reciprocal},
    {"ReduceL1", dnnl_graph_op_reduce_l1},
    {"ReduceL2", dnnl_graph_op_reduce_l2},
    {"ReduceMax", dnnl_graph_op_reduce_max},
    {"ReduceMean", dnnl_graph_op_reduce_mean},
    {"ReduceMin", dnnl_graph_op_reduce_min},
    {"ReduceProd", dnnl_graph_op_reduce_prod},
    {"ReduceSum", dnnl_graph_op_reduce_sum},
    {"ReLU", dnnl_graph_op_relu},
    {"Reorder", dnnl_graph_op_reorder},
    {"Round", dnnl_graph_op_round},
    {"Select", dnnl_graph_op_select},
    {"Sigmoid", dnnl_graph_op_sigmoid},
    {"SoftMax", dnnl_graph_op_softmax},
    {"SoftPlus", dnnl_graph_op_softplus},
    {"Sqrt", dnnl_graph_op_sqrt},
    {"Square", dnnl_graph_op_square},
    {"SquaredDifference", dnnl_graph_op_squared_difference},
    {"StaticReshape", dnnl_graph_op_static_reshape},
    {"StaticTranspose", dnnl_graph_op_static_transpose},
    {"Subtract", dnnl_graph_op_subtract},
    {"Tanh", dnnl_graph_op_tanh},
    {"TypeCast", dnnl_graph_op_type_cast},
    {"Wildcard", dnnl_graph_op_wildcard},
};

constexpr AttrName kAttrs[] = {
    {"alpha", dnnl_graph_op_attr_alpha, AttrType::kFloats},
    {"beta", dnnl_graph_op_attr_beta, AttrType::kFloats},
    {"epsilon", dnnl_graph_op_attr_epsilon, AttrType::kFloats},
    {"max", dnnl_graph_op_attr_max, AttrType::kFloats},
    {"min", dnnl_graph_op_attr_min, AttrType::kFloats},
    {"momentum", dnnl_graph_op_attr_momentum, AttrType::kFloats},
    {"scales", dnnl_graph_op_attr_scales, AttrType::kFloats},
    {"axis", dnnl_graph_op_attr_axis, AttrType::kInts},
    {"begin_norm_axis", dnnl_graph_op_attr_begin_norm_axis, AttrType::kInts},
    {"groups", dnnl_graph_op_attr_groups, AttrType::kInts},
    {"axes", dnnl_graph_op_attr_axes, AttrType::kInts},
    {"dilations", dnnl_graph_op_attr_dilations, AttrType::kInts},
    {"dst_shape", dnnl_graph_op_attr_dst_shape, AttrType::kInts},
    {"kernel", dnnl_graph_op_attr_kernel, AttrType::kInts},
    {"order", dnnl_graph_op_attr_order, AttrType::kInts},
    {"output_padding", dnnl_graph_op_attr_output_padding, AttrType::kInts},
    {"pads_begin", dnnl_graph_op_attr_pads_begin, AttrType::kInts},
    {"pads_end", dnnl_graph_op_attr_pads_end, AttrType::kInts},
    {"shape", dnnl_graph_op_attr_shape, AttrType::kInts},
    {"sizes", dnnl_graph_op_attr_sizes, AttrType::kInts},
    {"src_shape", dnnl_graph_op_attr_src_shape, AttrType::kInts},
    {"strides", dnnl_graph_op_attr_strides, AttrType::kInts},
    {"weights_shape", dnnl_graph_op_attr_weights_shape, AttrType::kInts},
    {"zps", dnnl_graph_op_attr_zps, AttrType::kInts},
    {"group_shape", kAttrGroupShape, AttrType::kInts},
    {"exclude_pad", dnnl_graph_op_attr_exclude_pad, AttrType::kBool},
    {"keep_dims", dnnl_graph_op_attr_keep_dims, AttrType::kBool},
    {"keep_stats", dnnl_graph_op_attr_keep_stats, AttrType::kBool},
    {"per_channel_broadcast", dnnl_graph_op_attr_per_channel_broadcast, AttrType::kBool},
    {"special_zero", dnnl_graph_op_attr_special_zero, AttrType::kBool},
    {"transpose_a", dnnl_graph_op_attr_transpose_a, AttrType::kBool},
    {"transpose_b", dnnl_graph_op_attr_transpose_b, AttrType::kBool},
    {"use_affine", dnnl_graph_op_attr_use_affine, AttrType::kBool},
    {"use_dst", dnnl_graph_op_attr_use_dst, AttrType::kBool},
    {"auto_broadcast", dnnl_graph_op_attr_auto_broadcast, AttrType::kString},
    {"auto_pad", dnnl_graph_op_attr_auto_pad, AttrType::kString},
    {"coordinate_transformation_mode", dnnl_graph_op_attr_coordinate_transformation_mode,
     AttrType::kString},
    {"data_format", dnnl_graph_op_attr_data_format, AttrType::kString},
    {"mode", dnnl_graph_op_attr_mode, AttrType::kString},
    {"qtype", dnnl_graph_op_attr_qtype, AttrType::kString},
    {"rounding_type", dnnl_graph_op_attr_rounding_type, AttrType::kString},
    {"weights_format", dnnl_graph_op_attr_weights_format, AttrType::kString},
};

constexpr DataTypeName kDataTypes[] = {
    {"f32", dnnl_f32, 32, 1}, {"f16", dnnl_f16, 16, 10}, {"bf16", dnnl_bf16, 16, 16},
    {"s8", dnnl_s8, 8, 3},    {"u8", dnnl_u8, 8, 2},     {"s32", dnnl_s32, 32, 6},
    {"s4", kDnnlS4, 4, 22},   {"u4", kDnnlU4, 4, 21},    {"boolean", dnnl_boolean, 8, 9},
};

}  // namespace

const OpKindName* FindOpKind(const std::string& name) {
  for (const auto& k : kOpKinds) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const AttrName* FindAttr(const std::string& name) {
  for (const auto& a : kAttrs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

const DataTypeName* FindDataType(const std::string& name) {
  for (const auto& t : kDataTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

const DataTypeName* FindDataType(dnnl_data_type_t type) {
  for (const auto& t : kDataTypes) {
    if (type == t.type) return &t;
  }
  return nullptr;
}

const DataTypeName* FindOnnxType(int onnx) {
  for (const auto& t : kDataTypes) {
    if (onnx == t.onnx) return &t;
  }
  return nullptr;
}

std::string DataTypeNames() {
  std::string names;
  for (const auto& t : kDataTypes) names += std::string(names.empty() ? "" : " ") + t.name;
  return names;
}

}  // namespace qg::onednn
