"""Broken models shared by the tests."""

from __future__ import annotations

import onnx


def cyclic_model() -> onnx.ModelProto:
    """Add(x, d) -> a, QuantizeLinear(a) -> q, DequantizeLinear(q) -> d: d feeds the Add."""
    scale = onnx.helper.make_tensor("s", onnx.TensorProto.FLOAT, [], [0.1])
    zero_point = onnx.helper.make_tensor("z", onnx.TensorProto.UINT8, [], [3])
    nodes = [
        onnx.helper.make_node("Add", ["x", "d"], ["a"], name="add"),
        onnx.helper.make_node("QuantizeLinear", ["a", "s", "z"], ["q"], name="q"),
        onnx.helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
    ]
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    d = onnx.helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph(nodes, "g", [x], [d], [scale, zero_point])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
