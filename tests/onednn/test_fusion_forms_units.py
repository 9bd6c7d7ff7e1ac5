"""oneDNN partitions on graphs as exporters write them, and a fusion that forms nothing says so
(issue #33, item 2).

PyTorch's exporter writes weights and shapes as Constant nodes; one Constant node used to make
oneDNN refuse the whole graph ("op 0 Wildcard: output tensor 0 is declared const"), so
fusion "onednn" formed no unit and "auto" quietly gave everything to onnxruntime.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import FusionWarning
from quantgraph.fusion.onednn.onednn_translate import translate
from quantgraph.validation import make_inputs
from tests.builders import requires_onednn

pytestmark = requires_onednn
ROOT = Path(__file__).resolve().parents[2]
CNN = ROOT / "models" / "cnn_u8.onnx"


def _with_constant_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every initializer as a Constant node, as PyTorch's exporter writes weights."""
    moved = onnx.ModelProto()
    moved.CopyFrom(model)
    graph = moved.graph
    constants = [
        helper.make_node("Constant", [], [t.name], value=t, name=f"const_{t.name}")
        for t in graph.initializer
    ]
    del graph.initializer[:]
    nodes = constants + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return moved


def _plan(model: onnx.ModelProto, fusion: str) -> quantgraph.InferenceSession:
    return quantgraph.InferenceSession(quantgraph.convert(model).proto, "native", fusion=fusion)


def test_constant_nodes_are_constants_not_ops_of_the_description() -> None:
    model = _with_constant_nodes(onnx.load(CNN))
    rewritten = quantgraph.convert(model).model
    translation = translate(rewritten)
    constants = {id(n) for n in rewritten.graph if n.op_type == "Constant"}
    assert constants and not any(id(n) in constants for n in translation.nodes.values())


@pytest.mark.parametrize("fusion", ["onednn", "auto"])
def test_constant_nodes_form_the_same_units_as_initializers(fusion: str) -> None:
    original = onnx.load(CNN)
    with_initializers = _plan(original, fusion)
    with_constants = _plan(_with_constant_nodes(original), fusion)
    units = [(u.compute, u.engine, u.kernel) for u in with_initializers.fusion_plan.units]
    assert units
    assert any(u[1] == "onednn" for u in units) or fusion == "auto"  # auto: the CPU decides
    assert [(u.compute, u.engine, u.kernel) for u in with_constants.fusion_plan.units] == units
    feeds = make_inputs(CNN, seed=3)
    expected = with_initializers.run(None, feeds)
    for got, want in zip(with_constants.run(None, feeds), expected, strict=True):
        np.testing.assert_array_equal(got, want)  # the same partitions on the same weights


def _lone_qdq(tmp_path: Path) -> Path:
    """Q -> DQ -> Relu: no compute oneDNN fuses with the spec ops."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    scale = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    zero = numpy_helper.from_array(np.array(3, np.uint8), "z")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
        helper.make_node("Relu", ["d"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [scale, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "lone_qg.onnx"
    quantgraph.convert(model).save(path)
    return path


def test_a_fusion_that_forms_no_unit_warns_once(tmp_path: Path) -> None:
    path = _lone_qdq(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = quantgraph.InferenceSession(path, "native", fusion="onednn")
    (warning,) = [w for w in caught if issubclass(w.category, FusionWarning)]
    why = session.fusion_plan.no_unit
    assert why is not None and str(warning.message) == why
    assert why.startswith("fusion 'onednn' formed no unit: all 2 spec ops run alone: ")
    assert "no partition with compute" in why
    assert session.fusion_plan.to_dict()["no_unit"] == why
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none: nothing was asked of a fusion
        quantgraph.InferenceSession(path, "native")


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    path = _lone_qdq(tmp_path)
    result = CliRunner().invoke(main, ["run", str(path), "--fusion", "onednn"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1
    assert lines[0].startswith("quantgraph: warning: fusion 'onednn' formed no unit: all 2 ")
    assert "session.py" not in result.stderr
