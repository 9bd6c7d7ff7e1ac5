"""Quantized nodes that are not Q/DQ are named, with a reason code and what to do (issue 21
item 5): QOperator ops the conversion has no rewrite for, in `inspect`'s text and JSON and in
the API report. MatMulNBits, quantize_dynamic's MatMulInteger/ConvInteger and quantize_static's
QOperator forms are converted since issue #34 (tests/test_published_formats.py,
tests/test_dynamic_integer.py, tests/test_qoperator.py):
they are not listed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import NoQuantization
from quantgraph.passes import OtherFormatsPass, RewriteReport
from quantgraph.passes.integer.other_formats import ADVICE
from tests.builders import make_model, tensor_info
from tests.producers import static_quantized, weight_only

# producer -> (node, op type, code) the report must list, in graph order
CASES: dict[str, tuple[Callable[[], onnx.ModelProto], list[tuple[str, str, str]]]] = {
    "qoperator": (  # QLinearWhere: a QOperator form the conversion has no rewrite for
        lambda: _qlinear_where(),
        [("where_quant", "QLinearWhere", "qoperator")],
    ),
    "fused-dynamic": (
        lambda: _contrib_node("DynamicQuantizeMatMul"),
        [("dqmm", "DynamicQuantizeMatMul", "fused_dynamic")],
    ),
}


def _contrib_node(op_type: str) -> onnx.ModelProto:
    """One com.microsoft node onnxruntime's quantizers write (inspect only reads it)."""
    return make_model(
        [helper.make_node(op_type, ["a", "b", "s"], ["y"], name="dqmm", domain="com.microsoft")],
        [tensor_info("a", TensorProto.FLOAT, [2, 2])],
        [tensor_info("y", TensorProto.FLOAT, [2, 2])],
        [
            onnx.numpy_helper.from_array(np.ones((2, 2), np.int8), "b"),
            onnx.numpy_helper.from_array(np.ones(1, np.float32), "s"),
        ],
        domains={"com.microsoft": 1},
        check=False,
    )


def _qlinear_where() -> onnx.ModelProto:
    scalar = [
        helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
        helper.make_tensor("zp", TensorProto.UINT8, [], [128]),
        helper.make_tensor("c", TensorProto.BOOL, [4], [True, False, True, False]),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
        helper.make_node(
            "QLinearWhere",
            ["c", "q", "s", "zp", "q", "s", "zp", "s", "zp"],
            ["w"],
            name="where_quant",
            domain="com.microsoft",
        ),
        helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["y"], name="dq"),
    ]
    graph = helper.make_graph(
        nodes,
        "where",
        [tensor_info("x", TensorProto.FLOAT, [4])],
        [tensor_info("y", TensorProto.FLOAT, [4])],
        scalar,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
    )


def test_qoperator_models_are_converted_not_listed() -> None:
    """quantize_static's QLinearConv, QLinearMatMul, QLinearAdd: converted since issue #34
    (tests/test_qoperator.py)."""
    report = quantgraph.convert(static_quantized(13, qoperator=True)).report
    assert report.other_quantized == []
    assert {k: report.converted[k] for k in ("QLinearConv", "QLinearMatMul", "QLinearAdd")} == {
        "QLinearConv": 1,
        "QLinearMatMul": 1,
        "QLinearAdd": 1,
    }


def _listed(report: dict[str, object]) -> list[tuple[str, str, str]]:
    nodes = report["other_quantized"]
    assert isinstance(nodes, list)
    return [(n["node"], n["op_type"], n["code"]) for n in nodes]


@pytest.mark.parametrize("name", list(CASES))
def test_the_report_names_each_node_and_what_to_do(name: str) -> None:
    build, expected = CASES[name]
    model = build()
    report = quantgraph.convert(model).report
    assert [(n.node, n.op_type, n.code) for n in report.other_quantized] == expected
    assert all(n.advice == ADVICE[n.code] for n in report.other_quantized)


@pytest.mark.parametrize("name", list(CASES))
def test_inspect_shows_them_in_text_and_json(tmp_path: Path, name: str) -> None:
    build, expected = CASES[name]
    source = tmp_path / f"{name}.onnx"
    onnx.save(build(), source)
    runner = CliRunner()
    text = runner.invoke(main, ["inspect", str(source)])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    start = lines.index(f"other quantized formats, left as they are: {len(expected)} node(s):")
    assert lines[start + 1 : start + 1 + len(expected)] == [
        f"  {node}: {op} [{code}]" for node, op, code in expected
    ]
    codes = dict.fromkeys(code for _, _, code in expected)
    assert lines[start + 1 + len(expected) :][: len(codes)] == [
        f"  [{code}] {ADVICE[code]}" for code in codes
    ]
    as_json = runner.invoke(main, ["inspect", str(source), "--json"])
    assert _listed(json.loads(as_json.stdout)) == expected


def test_the_advice_says_what_to_run() -> None:
    assert "quant_format=QuantFormat.QDQ" in ADVICE["qoperator"]
    assert "MatMulNBitsQuantizer(..., quant_format=QuantFormat.QDQ)" in ADVICE["packed_weight_only"]
    assert "MatMulInteger/ConvInteger are converted" in ADVICE["integer_op"]


def test_other_domains_and_plain_ops_are_not_listed() -> None:
    model = make_model(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu"),
            helper.make_node("QLinearConv", ["r"], ["y"], domain="example.other", name="q"),
        ],
        [tensor_info("x", TensorProto.FLOAT, [2])],
        [tensor_info("y", TensorProto.FLOAT, [2])],
        domains={"example.other": 1},
        check=False,
    )
    report = RewriteReport()
    OtherFormatsPass(report)(ir.from_proto(model))
    assert report.other_quantized == []
    with pytest.raises(NoQuantization, match="it holds 1 QLinearConv, 1 Relu"):
        quantgraph.convert(model, check=False)  # nothing quantgraph knows as quantized


def test_matmul_nbits_is_converted_not_listed() -> None:
    report = quantgraph.convert(weight_only(56, 16, True, qoperator=True)).report
    assert report.other_quantized == []
    assert report.converted == {"MatMulNBits": 2}
