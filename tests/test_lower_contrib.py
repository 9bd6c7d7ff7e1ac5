"""`lower` is a true round trip below opset 13, and never leaves spec ops silently (issue 21
item 4).

quantize_static with UseQDQContribOps writes com.microsoft QuantizeLinear/DequantizeLinear (with
per-channel axis) at opsets 11 and 12, where ONNX's own Q/DQ have no axis: lowering gives the
com.microsoft nodes back, and plain onnxruntime loads and runs the result as the original.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from tests.builders import dequantize_linear_model, run_ort, spec_op_model
from tests.producers import static_quantized

X = {"x": np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def _arrays(model: onnx.ModelProto) -> dict[str, bytes]:
    return {t.name: numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
@pytest.mark.parametrize("opset", [11, 12])
def test_use_qdq_contrib_ops_models_round_trip(opset: int, per_channel: bool) -> None:
    original = static_quantized(opset, contrib=True, per_channel=per_channel)
    assert {n.domain for n in original.graph.node if "Quantize" in n.op_type} == {"com.microsoft"}
    result = quantgraph.convert(original)
    assert [s.node for s in result.report.skipped] == ["cb_DequantizeLinear"]  # int32 bias
    assert all(n.detail.endswith("from com.microsoft") for n in result.report.converted_nodes)
    assert quantgraph.validate(original, result.proto, backend="python").agree

    lowered = quantgraph.lower(result.proto)
    assert lowered.report.skipped == []
    back = lowered.proto
    assert [n.SerializeToString() for n in back.graph.node] == [
        n.SerializeToString() for n in original.graph.node
    ]
    assert _arrays(back) == _arrays(original)
    assert sorted((o.domain, o.version) for o in back.opset_import) == sorted(
        (o.domain, o.version) for o in original.opset_import
    )
    # plain onnxruntime (no quantgraph) loads it and computes what the original computes
    assert np.array_equal(run_ort(back, X)[0], run_ort(original, X)[0])


def test_per_axis_spec_ops_below_opset_13_lower_to_com_microsoft() -> None:
    """A spec op with no ONNX form at the model's opset (per_channel at 10) becomes the
    com.microsoft Q/DQ, which onnxruntime runs; the domain is imported."""
    model = spec_op_model(
        "Dequantize", (TensorProto.UINT8, [2, 2]), [0.5, 1.0], [1, 2], dst_type=1, opset=10,
        qtype="per_channel", axis=1,
    )  # fmt: skip
    lowered = quantgraph.lower(model)
    (node,) = lowered.proto.graph.node
    assert (node.domain, node.op_type) == ("com.microsoft", "DequantizeLinear")
    assert lowered.report.converted_nodes[0].detail == "u8, axis 1, com.microsoft"
    assert {o.domain: o.version for o in lowered.proto.opset_import}["com.microsoft"] == 1
    src = {"src": np.array([[1, 2], [5, 6]], np.uint8)}
    assert run_ort(lowered.proto, src)[0].tolist() == [[0.0, 0.0], [2.0, 4.0]]


def _unlowerable() -> onnx.ModelProto:
    # s32 zero points computed at run time: ONNX's zero point has the quantized type
    return spec_op_model(
        "DynamicQuantize",
        (TensorProto.FLOAT, [4]),
        (TensorProto.FLOAT, [1]),
        (TensorProto.INT32, [1]),
        dst_type=TensorProto.UINT8,
    )


def test_lower_refuses_to_leave_spec_ops_unless_allowed() -> None:
    with pytest.raises(ModelError) as error:
        quantgraph.lower(_unlowerable())
    assert str(error.value) == (
        "1 quantgraph op(s) cannot be lowered: node 'node0' (DynamicQuantize): zps of type s32 "
        "computed at run time cannot become an ONNX zero point of type u8; allow_partial=True "
        "(--allow-partial) keeps them in the result"
    )
    partial = quantgraph.lower(_unlowerable(), allow_partial=True)
    assert [s.node for s in partial.report.skipped] == ["node0"]


def test_the_cli_writes_nothing_unless_allow_partial(tmp_path: Path) -> None:
    source, out = tmp_path / "spec.onnx", tmp_path / "lowered.onnx"
    onnx.save(_unlowerable(), source)
    runner = CliRunner()
    refused = runner.invoke(main, ["lower", str(source), str(out)])
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines() == [
        f"quantgraph: error: {source}: 1 quantgraph op(s) cannot be lowered: node 'node0' "
        "(DynamicQuantize): zps of type s32 computed at run time cannot become an ONNX zero "
        "point of type u8; allow_partial=True (--allow-partial) keeps them in the result"
    ]
    assert not out.exists()
    allowed = runner.invoke(main, ["lower", str(source), str(out), "--allow-partial"])
    assert allowed.exit_code == 0, allowed.output
    assert "left unchanged 1 node(s)" in allowed.stdout and out.exists()


def _axis_at_opset_11() -> onnx.ModelProto:
    return dequantize_linear_model(
        numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.int8), "w"),
        np.array([0.5, 0.25], np.float32),
        np.array([0, 0], np.int8),
        opset=11,
        axis=0,
        check=False,
    )


def test_an_input_onnxruntime_rejects_is_an_error_that_says_so(tmp_path: Path) -> None:
    """ai.onnx DequantizeLinear with axis at opset 11: onnx.checker and onnxruntime refuse the
    model ("Unrecognized attribute: axis"); converting it would hide that."""
    model = _axis_at_opset_11()
    with pytest.raises(Exception, match="Unrecognized attribute: axis"):
        run_ort(model)
    expected = (
        "node 'dq0': DequantizeLinear has attribute axis, which opset 11 does not define (ONNX "
        "has it from opset 13), so onnx.checker and onnxruntime refuse this model: convert it to "
        "opset 13 (onnx.version_converter.convert_version(model, 13)) or quantize it with "
        "com.microsoft Q/DQ (quantize_static extra_options UseQDQContribOps)"
    )
    with pytest.raises(ModelError) as error:
        quantgraph.convert(model)
    assert str(error.value) == expected
    source = tmp_path / "axis11.onnx"
    onnx.save(model, source)
    for command in ("convert", "inspect"):
        args = [command, str(source)] + (["--dry-run"] if command == "convert" else [])
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [f"quantgraph: error: {source}: {expected}"]


def test_one_d_scale_without_axis_at_opset_11_converts_as_onnxruntime_runs_it() -> None:
    """Without an axis attribute onnxruntime accepts a 1-D scale at opset 11 (per axis 1);
    the conversion computes the same."""
    model = dequantize_linear_model(
        numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.int8), "w"),
        np.array([0.5, 0.25], np.float32),
        np.array([0, 0], np.int8),
        opset=11,
        check=False,
    )
    result = quantgraph.convert(model)
    assert result.report.skipped == []
    assert quantgraph.validate(model, result.proto, backend="python").agree
