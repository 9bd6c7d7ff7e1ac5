"""QdqToSpecPass on Q/DQ inside If branches and model-local functions, and on scales given by
Constant nodes: converted in place and run differentially against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph import DOMAIN
from tests.builders import (
    BACKENDS,
    all_nodes,
    differential,
    make_model,
    opsets,
    requires_native,
    tensor_info,
)
from tests.passes.qdq_models import (
    QDQ,
    SHAPE,
    Case,
    function_model,
    if_model,
    qdq_nodes,
)

# -- subgraphs and functions --------------------------------------------------------------------


def _branch_feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    feeds = []
    for cond in (True, False):
        for cond2 in (True, False):
            x = (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * np.float32(0.125)
            feeds.append({"x": x, "cond": np.array(cond), "cond2": np.array(cond2)})
            feeds.append(
                {
                    "x": (rng.standard_normal(SHAPE) * 30).astype(np.float32),
                    "cond": np.array(cond),
                    "cond2": np.array(cond2),
                }
            )
    return feeds


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_qdq_inside_if_branches(static: bool, backend: str) -> None:
    model = if_model()
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)
    assert result.report.converted == {"DequantizeLinear": 3, "QuantizeLinear": 3}
    assert result.report.skipped == []
    assert {n.graph for n in result.report.converted_nodes} == {"then", "else", "inner_then"}
    assert not [n for n in all_nodes(out) if n.op_type in QDQ and n.domain in ("", "ai.onnx")]
    names = {n.name for n in all_nodes(out) if n.domain == DOMAIN}
    assert names == {f"{p}_{k}" for p in ("then", "else", "inner") for k in ("Q", "DQ")}
    differential(model, out, _branch_feeds(), backend)


def _check_function_converted(
    model: onnx.ModelProto, static: bool, backend: str = "python"
) -> None:
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)
    assert result.report.converted == {"DequantizeLinear": 2, "QuantizeLinear": 2}
    assert {n.graph for n in result.report.converted_nodes} == {"QDQ"}
    (function,) = out.functions
    assert {(o.domain, o.version) for o in function.opset_import} >= {(DOMAIN, 1)}
    assert DOMAIN in opsets(out)
    ops = {n.name: (n.domain, n.op_type) for n in function.node}
    static_prefix = "" if static else "Dynamic"
    assert ops["f_Q"] == (DOMAIN, f"{static_prefix}Quantize")
    assert ops["f_DQ2"] == (DOMAIN, f"{static_prefix}Dequantize")
    assert not [n for n in function.node if n.op_type in QDQ]
    assert [n.name for n in out.graph.node] == ["call"]
    rng = np.random.default_rng(8)
    feeds = [
        {"x": (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * np.float32(0.25)},
        {"x": (rng.standard_normal(SHAPE) * 60).astype(np.float32)},
    ]
    differential(model, out, feeds, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_qdq_inside_model_local_function(static: bool, backend: str) -> None:
    _check_function_converted(function_model(typed=True), static, backend)


@pytest.mark.parametrize(
    "static",
    [
        pytest.param(False, id="dynamic"),
        pytest.param(True, id="static"),
    ],
)
def test_qdq_inside_function_with_untyped_constant_scales(static: bool) -> None:
    _check_function_converted(function_model(typed=False), static)


@requires_native
def test_qdq_inside_function_with_untyped_constant_scales_native() -> None:
    _check_function_converted(function_model(typed=False), False, "native")


def test_constant_node_scales_in_main_graph() -> None:
    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["cs"],
            name="c_s",
            value=numpy_helper.from_array(np.array(0.25, np.float32)),
        ),
        helper.make_node(
            "Constant", [], ["cz"], name="c_z", value=numpy_helper.from_array(np.array(-3, np.int8))
        ),
        *qdq_nodes("m", "x", "cs", "cz", "y"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, SHAPE)],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
    )
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
        differential(model, result.proto, Case(21, "s8", "scalar").feeds())
