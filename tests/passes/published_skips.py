"""Models whose first node a published-format pass (MatMulNBits, quantize_dynamic's integer
ops, QOperator) leaves alone, one per skip code those passes give: the cases of
tests/passes/test_skip_codes.py."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests import published

CONTRIB = "com.microsoft"
U8, S8, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT


def _model(
    node: onnx.NodeProto,
    inputs: list[onnx.ValueInfoProto],
    output: onnx.ValueInfoProto,
    inits: list[onnx.TensorProto],
) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", inputs, [output], inits)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(CONTRIB, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def act_order() -> onnx.ModelProto:
    return published.matmul_nbits(g_idx="shuffled")


def float_zero_point() -> onnx.ModelProto:
    return published.matmul_nbits(zero_points="fractional")


def gather_axis() -> onnx.ModelProto:
    """GatherBlockQuantized quantized along the axis it gathers (int4 data allows it)."""
    return published.gather_block_quantized(data="uint4", quantize_axis=0, k=32)


def packed_layout() -> onnx.ModelProto:
    """MatMulNBits whose N does not fit its B."""
    model = published.matmul_nbits()
    for attribute in model.graph.node[0].attribute:
        if attribute.name == "N":
            attribute.i += 1
    return model


def runtime_weight() -> onnx.ModelProto:
    """MatMulNBits whose packed B is fed at run time."""
    model = published.matmul_nbits()
    (b,) = [t for t in model.graph.initializer if t.name == "B"]
    model.graph.input.append(helper.make_tensor_value_info("B", U8, list(b.dims)))
    model.graph.initializer.remove(b)
    return model


def scale_chain() -> onnx.ModelProto:
    """MatMulInteger whose int32 result is the graph's output: no scale chain after it."""
    node = helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mmi")
    weight = numpy_helper.from_array(np.ones((8, 6), np.int8), "w")
    return _model(
        node,
        [helper.make_tensor_value_info("a", U8, [4, 8])],
        helper.make_tensor_value_info("y", TensorProto.INT32, [4, 6]),
        [weight],
    )


def _scalars(*pairs: tuple[str, float | int, int]) -> list[onnx.TensorProto]:
    return [helper.make_tensor(name, kind, [], [value]) for name, value, kind in pairs]


def channels_last() -> onnx.ModelProto:
    """QLinearAveragePool with channels_last=1 (its float op would be channels-first)."""
    node = helper.make_node(
        "QLinearAveragePool",
        ["x", "xs", "xz", "ys", "yz"],
        ["y"],
        name="pool",
        domain=CONTRIB,
        kernel_shape=[2, 2],
        channels_last=1,
    )
    return _model(
        node,
        [helper.make_tensor_value_info("x", U8, [1, 4, 4, 3])],
        helper.make_tensor_value_info("y", U8, [1, 3, 3, 3]),
        _scalars(("xs", 0.1, F), ("xz", 128, U8), ("ys", 0.1, F), ("yz", 128, U8)),
    )


def gemm_scaling() -> onnx.ModelProto:
    """QGemm with alpha 2 (the int32 bias's scale would depend on it)."""
    node = helper.make_node(
        "QGemm",
        ["a", "as", "az", "b", "bs", "bz", "", "ys", "yz"],
        ["y"],
        name="qgemm",
        domain=CONTRIB,
        alpha=2.0,
    )
    weight = numpy_helper.from_array(np.ones((8, 6), np.int8), "b")
    scalars = _scalars(
        ("as", 0.1, F), ("az", 128, U8), ("bs", 0.05, F), ("bz", 0, S8), ("ys", 0.2, F),
        ("yz", 128, U8),
    )  # fmt: skip
    return _model(
        node,
        [helper.make_tensor_value_info("a", U8, [4, 8])],
        helper.make_tensor_value_info("y", U8, [4, 6]),
        [weight, *scalars],
    )
