"""Broken models shared by the tests."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from tests.builders import make_model, tensor_info


def cyclic_model() -> onnx.ModelProto:
    """Add(x, d) -> a, QuantizeLinear(a) -> q, DequantizeLinear(q) -> d: d feeds the Add."""
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    zero_point = helper.make_tensor("z", TensorProto.UINT8, [], [3])
    nodes = [
        helper.make_node("Add", ["x", "d"], ["a"], name="add"),
        helper.make_node("QuantizeLinear", ["a", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
    ]
    x = tensor_info("x", TensorProto.FLOAT, [2])
    d = tensor_info("d", TensorProto.FLOAT, [2])
    return make_model(nodes, [x], [d], [scale, zero_point], check=False)
