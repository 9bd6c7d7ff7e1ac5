"""Real weight-only int4 models: onnxruntime's own MatMulNBitsQuantizer in QDQ format.

A small float model (two MatMuls whose weights the quantizer takes, float32 and float16) is
quantized symmetric int4 and asymmetric uint4 with blocks of 32 and 128 along K: every blocked
DequantizeLinear it writes must become a per_group DynamicDequantize, the converted model must
compute what the original computes (onnx's ReferenceEvaluator with quantgraph's ops, and the
native backend, against onnxruntime at ORT_DISABLE_ALL), and lowering must give ONNX's blocked
DequantizeLinear back, agreeing again.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import quantgraph
from quantgraph.errors import BackendError
from quantgraph.reference.compare import compare
from quantgraph.reference.evaluator import REFERENCE_OPS
from quantgraph.spec import DOMAIN
from quantgraph.testing import ort_session
from tests import producers
from tests.builders import requires_native, run_evaluator

CASES = [(sym, block) for sym in (True, False) for block in (32, 128)]
IDS = [f"{'int4-sym' if sym else 'uint4-asym'}-block{block}" for sym, block in CASES]


def float_model(dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """x [batch, 8, 256] -> MatMul [256, 128] -> Add -> Relu -> MatMul [128, 256] -> Add."""
    rng = np.random.default_rng(0)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np_type), name)

    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "b1"], ["a1"], name="add1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
        helper.make_node("Add", ["h2", "b2"], ["y"], name="add2"),
    ]
    graph = helper.make_graph(
        nodes,
        "weight_only",
        [helper.make_tensor_value_info("x", dtype, ["batch", 8, 256])],
        [helper.make_tensor_value_info("y", dtype, ["batch", 8, 256])],
        [
            weight("w1", [256, 128]),
            weight("b1", [128]),
            weight("w2", [128, 256]),
            weight("b2", [256]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


@cache
def quantized(symmetric: bool, block: int, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    return producers.matmul_nbits(float_model(dtype), block, symmetric=symmetric)


def _x(dtype: int = TensorProto.FLOAT) -> np.ndarray:
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    return np.random.default_rng(1).standard_normal((2, 8, 256)).astype(np_type)


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return np.asarray(ort_session(model).run(None, {"x": x})[0])


@pytest.mark.parametrize(("symmetric", "block"), CASES, ids=IDS)
def test_every_blocked_dequantize_becomes_a_per_group_op(symmetric: bool, block: int) -> None:
    original = quantized(symmetric, block)
    blocked = [n for n in original.graph.node if n.op_type == "DequantizeLinear"]
    assert len(blocked) == 2 and all(
        helper.get_attribute_value(a) == block
        for n in blocked
        for a in n.attribute
        if a.name == "block_size"
    )
    result = quantgraph.convert(original)
    assert result.report.converted == {"DequantizeLinear": 2}
    assert result.report.skipped == []
    spec_nodes = [n for n in result.proto.graph.node if n.domain == DOMAIN]
    for node in spec_nodes:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert node.op_type == "DynamicDequantize"
        assert attributes["qtype"] == b"per_group" and attributes["group_shape"] == [block, 1]
        assert len(node.input) == (2 if symmetric else 3)
    details = {n.detail for n in result.report.converted_nodes}
    assert details == {f"{'s4' if symmetric else 'u4'}, per_group [{block}, 1]"}


@pytest.mark.parametrize(("symmetric", "block"), CASES, ids=IDS)
def test_the_reference_computes_what_onnxruntime_computes(symmetric: bool, block: int) -> None:
    """The dequantized weights bit for bit; the MatMuls after them are float compute by two
    libraries (numpy's BLAS, MLAS), whose sums round in their own order: within 1e-5."""
    original = _with_weights_out(quantized(symmetric, block))
    converted = _with_weights_out(quantgraph.convert(quantized(symmetric, block)).proto)
    x = _x()
    names = [o.name for o in original.graph.output]
    want = dict(zip(names, _onnxruntime_all(original, x), strict=True))
    got = run_evaluator(ReferenceEvaluator(converted, new_ops=REFERENCE_OPS), names, {"x": x})
    for name, value in zip(names[1:], got[1:], strict=True):
        assert compare(name, want[name], value).agree, name
    np.testing.assert_allclose(got[0], want["y"], rtol=1e-5, atol=1e-5)


def _with_weights_out(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each weight's dequantized value as an output too (the DQ/spec op's
    output keeps its name through the conversion)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.op_type in ("DequantizeLinear", "DynamicDequantize"):
            copy.graph.output.append(onnx.ValueInfoProto(name=node.output[0]))
    return copy


def _onnxruntime_all(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(v) for v in ort_session(model).run(None, {"x": x})]


@requires_native
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16], ids=["f32", "f16"])
@pytest.mark.parametrize(("symmetric", "block"), CASES, ids=IDS)
def test_native_validates_exactly_and_so_does_the_lowered_model(
    symmetric: bool, block: int, dtype: int
) -> None:
    original = quantized(symmetric, block, dtype)
    result = quantgraph.convert(original)
    report = quantgraph.validate(original, result.proto, backend="native", iterations=2)
    assert report.agree, report.to_dict()
    lowered = quantgraph.lower(result.proto)
    assert lowered.report.skipped == []
    assert {n.op_type for n in lowered.proto.graph.node} == {n.op_type for n in original.graph.node}
    again = quantgraph.validate(original, lowered.proto, backend="native")
    assert again.agree


def test_the_python_backend_says_it_cannot_carry_4_bit() -> None:
    converted = quantgraph.convert(quantized(False, 32)).proto
    with pytest.raises(BackendError, match=r"has src type u4: onnxruntime-extensions has no 4-bit"):
        quantgraph.InferenceSession(converted, "python")


def test_float16_scales_give_float16_dst() -> None:
    original = quantized(True, 32, TensorProto.FLOAT16)
    result = quantgraph.convert(original)
    assert result.report.skipped == []
    details = {n.detail for n in result.report.converted_nodes}
    assert details == {"s4, per_group [32, 1], f16 scales"}
    outputs = {v.name: v.type.tensor_type.elem_type for v in result.proto.graph.value_info}
    spec_outputs = [n.output[0] for n in result.proto.graph.node if n.domain == DOMAIN]
    assert all(
        outputs.get(name, TensorProto.FLOAT16) == TensorProto.FLOAT16 for name in spec_outputs
    )
