"""QOperator models (issue #34): quantize_static(..., quant_format=QOperator) writes QLinearConv,
QLinearMatMul, QGemm and the com.microsoft QLinear* ops. Each converts into the spec's
DynamicDequantize -> float op -> DynamicQuantize (the int32 bias as a standard DequantizeLinear
with scale s_x * s_w), the report lists it, validation says it compares another arithmetic, and
lower gives back the same nodes and initializers (``--to-qdq``: the Q/DQ form).

What holds, measured on the models below (seeded inputs, 20 samples):
- ORT_ENABLE_ALL with fusion "onnxruntime": each QOperator node goes back to onnxruntime as the
  original's node, so identical to the original (exact_expected), u8 and s8 activations,
  per-channel and per-tensor weights, also on a CPU without VNNI where the u8 x s8 kernels
  saturate (both sides run the same kernel).
- ORT_DISABLE_ALL: s8 activations identical (onnxruntime's s8 x s8 kernels requantize to what
  the float composition gives, here); u8 activations on a CPU without VNNI up to 41 steps apart
  (its u8 x s8 kernels saturate int16 pair sums: 49 steps at the first QLinearConv already).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.cpu import cpu
from quantgraph.reference.compare import TensorComparison
from quantgraph.testing import ort_session, quiet_session_options
from quantgraph.validation import ValidationReport
from tests.builders import requires_native
from tests.qoperator_models import FLOAT_OPS, QOPERATOR_OPS, qoperator

pytestmark = requires_native

FORMS = [("u8", True), ("u8", False), ("s8", True), ("s8", False)]
FORM_IDS = [f"{a}-{'per-channel' if pc else 'per-tensor'}" for a, pc in FORMS]
SAMPLES = 20


def _initializers(model: onnx.ModelProto) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """name -> (dtype, shape, bytes of the values); the TensorProtos themselves are compared in
    tests/test_lowered_bytes.py."""
    found = {}
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        found[tensor.name] = (str(array.dtype), array.shape, array.tobytes())
    return found


def attributes(node: onnx.NodeProto) -> list[bytes]:
    return [a.SerializeToString() for a in node.attribute]


def _nodes(model: onnx.ModelProto) -> list[tuple[object, ...]]:
    """Each node's op, domain, name, inputs, outputs and attributes (bytes); the protos
    themselves are compared in test_restored_nodes_are_the_original_protos."""
    return [
        (n.op_type, n.domain, n.name, list(n.input), list(n.output), *attributes(n))
        for n in model.graph.node
    ]


@pytest.mark.parametrize(("activation", "per_channel"), FORMS, ids=FORM_IDS)
def test_every_form_converts_and_the_report_lists_it(activation: str, per_channel: bool) -> None:
    original = qoperator(activation, per_channel)
    assert {n.op_type: 0 for n in original.graph.node if n.op_type in QOPERATOR_OPS}.keys() == (
        QOPERATOR_OPS.keys()
    )
    result = quantgraph.convert(original)
    report = result.report
    assert report.other_quantized == []
    converted = {k: v for k, v in report.converted.items() if k in QOPERATOR_OPS}
    assert converted == QOPERATOR_OPS
    for node in report.converted_nodes:
        if node.op_type in QOPERATOR_OPS:
            assert node.new_op_type == FLOAT_OPS[node.op_type]
    weights = [n for n in report.converted_nodes if n.op_type in ("QLinearConv", "QGemm")]
    assert all(("per-channel weight" in n.detail) == per_channel for n in weights)
    # the int32 biases (QLinearConv's 9th input, QGemm's C) stay standard DequantizeLinear
    assert [(s.node, s.code) for s in report.skipped] == [
        ("conv_quant_bias", "quantized-type"),
        ("gemm_quant_bias", "quantized-type"),
    ]
    kinds = [n.op_type for n in result.proto.graph.node]
    assert not set(kinds) & set(QOPERATOR_OPS)
    assert kinds.count("DequantizeLinear") == 2
    assert kinds.count("DynamicQuantize") == 1 + sum(QOPERATOR_OPS.values())
    as_dict = report.to_dict()
    assert as_dict["converted"]["QLinearConv"] == 2  # type: ignore[index]


@pytest.mark.parametrize(("activation", "per_channel"), FORMS, ids=FORM_IDS)
def test_lower_gives_back_the_qoperator_nodes(activation: str, per_channel: bool) -> None:
    original = qoperator(activation, per_channel)
    converted = quantgraph.convert(original).proto
    lowered = quantgraph.lower(converted)
    assert lowered.report.skipped == []
    assert {k: v for k, v in lowered.report.emitted.items() if k in QOPERATOR_OPS} == QOPERATOR_OPS
    back = lowered.proto
    assert _nodes(back) == _nodes(original)
    assert _initializers(back) == _initializers(original)
    assert list(back.opset_import) == list(original.opset_import)
    qdq = quantgraph.lower(converted, to_qdq=True).proto
    kinds = {n.op_type for n in qdq.graph.node}
    assert not kinds & set(QOPERATOR_OPS) and {"Conv", "Gemm", "Softmax"} <= kinds


@pytest.mark.parametrize(("activation", "per_channel"), FORMS, ids=FORM_IDS)
def test_restored_nodes_are_the_original_protos(activation: str, per_channel: bool) -> None:
    """Byte for byte, the domain field too: quantize_static writes ``domain: ""`` on its
    QLinearMatMul (onnx-ir cannot hold that; the record keeps it), nothing on QLinearConv."""
    original = qoperator(activation, per_channel)
    explicit = [n.name for n in original.graph.node if n.HasField("domain") and not n.domain]
    assert explicit == ["mm_quant"], "quantize_static no longer writes domain '' there"
    back = quantgraph.lower(quantgraph.convert(original).proto).proto
    by_name = {n.name: n.SerializeToString() for n in back.graph.node}
    for node in original.graph.node:
        if node.op_type in QOPERATOR_OPS:
            assert by_name[node.name] == node.SerializeToString(), node.name
    [matmul] = [n for n in back.graph.node if n.name == "mm_quant"]
    assert matmul.HasField("domain")
    unset = [n for n in back.graph.node if n.name == "conv_quant"]
    assert unset and not unset[0].HasField("domain")


def _validate(activation: str, per_channel: bool, fusion: str) -> quantgraph.ValidationReport:
    original = qoperator(activation, per_channel)
    converted = quantgraph.convert(original).proto
    return quantgraph.validate(original, converted, fusion=fusion, iterations=SAMPLES)


@pytest.mark.parametrize(("activation", "per_channel"), FORMS, ids=FORM_IDS)
def test_fused_by_onnxruntime_the_conversion_is_identical(
    activation: str, per_channel: bool
) -> None:
    """Each QOperator node goes back to onnxruntime as the original's (one unit: its
    dequantizes and quantize), so both sides run the same kernels: bit for bit the original at
    ORT_ENABLE_ALL, and validation expects it exactly."""
    original = qoperator(activation, per_channel)
    converted = quantgraph.convert(original).proto
    session = quantgraph.InferenceSession(converted, "native", fusion="onnxruntime")
    units = {u.compute: u for u in session.fusion_plan.units}
    for node in original.graph.node:
        if node.op_type in QOPERATOR_OPS:
            unit = units[node.name]
            assert unit.op_type == node.op_type and unit.reason.startswith("the original's ")
            assert unit.kernel.split(".")[-1] == node.op_type, unit
            assert unit.nodes[-1] == node.name  # its quantize, after its dequantizes
    assert all(
        a.op_type != "DynamicQuantize" or a.node == "x_QuantizeLinear"
        for a in (session.fusion_plan.alone)
    )
    enabled = ort_session(original, quiet_session_options(optimize=True))
    for seed in range(SAMPLES):
        x = {"x": np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)}
        for want, got in zip(enabled.run(None, x), session.run(None, x), strict=True):
            np.testing.assert_array_equal(got, want)
    report = _validate(activation, per_channel, "onnxruntime")
    assert report.exact_expected and report.agree, report.to_dict()
    assert report.qoperator == []  # no node computes the spec's composition any more
    assert report.comparison.endswith("both at ORT_ENABLE_ALL: must be identical")
    assert all(o.mismatches == 0 for o in report.outputs), report.to_dict()["outputs"]


@pytest.mark.parametrize("activation", ["u8", "s8"])
def test_unfused_the_comparison_states_another_arithmetic(activation: str) -> None:
    """Unfused, the QOperator kernels are another arithmetic, judged by a bound the model gives
    (its own spread under rounding noise, at least a step of each output). Where onnxruntime's
    u8 x s8 kernels saturate int16 pair sums (x86 without VNNI), the reference is the original
    with its int8 weights as uint8 +128 (the same integers, summed exactly): then identical on
    these samples, and the saturating original is shown beside the verdict (up to 41 steps)."""
    report = _validate(activation, True, "none")
    assert not report.exact_expected
    saturates = activation == "u8" and cpu().int8_products_saturate
    start = "original [a copy in memory: int8 weights as uint8 +128" if saturates else "original ("
    assert report.comparison.startswith(start), report.comparison
    assert "(QOperator integer kernels: QGemm, QLinearAdd" in report.comparison
    assert "ORT_DISABLE_ALL: not expected to be exact" in report.comparison
    assert "judged per output by a bound the model gives" in report.comparison
    steps = {o.name: report.error_stats[o.name].max_steps for o in report.outputs}
    assert steps == {"y": 0.0, "z": 0.0}  # measured: identical to the like-with-like reference
    assert report.agree, report.to_dict()
    payload = report.to_dict()
    assert payload["exact_expected"] is False and payload["qoperator"] == sorted(QOPERATOR_OPS)
    assert "QLinearConv/QLinearMatMul/QGemm sum in int32" in str(payload["comparison_note"])
    bound = payload["bound"]
    assert isinstance(bound, dict) and {s["kind"] for s in bound["sites"]} == {"requantization"}
    assert len(bound["sites"]) == sum(QOPERATOR_OPS.values())
    for name, row in bound["outputs"].items():  # at least one step of each output's quantizer
        assert row["atol"] >= row["step"] > 0, (name, row)
    reference = payload["reference"]
    if not saturates:
        assert reference is None
        return
    assert isinstance(reference, dict)
    changed = {(c["op_type"], c["node"]) for c in reference["changed_nodes"]}
    assert {op for op, _ in changed} == {"QLinearConv", "QLinearMatMul", "QGemm"}
    as_run = reference["original"]
    assert as_run["part_of_verdict"] is False
    apart = [_steps(report, o) for o in report.as_run]
    assert 0 < max(apart) <= 41.0 + 1e-4, apart


def _steps(report: ValidationReport, output: TensorComparison) -> float:
    step = report.bound.steps[output.name] if report.bound else 1.0
    return output.max_abs_diff / step


def test_cli_convert_lists_and_lower_restores(tmp_path: Path) -> None:
    source, converted, lowered = tmp_path / "q.onnx", tmp_path / "c.onnx", tmp_path / "l.onnx"
    original = qoperator("u8", True)
    onnx.save(original, source)
    runner = CliRunner()
    done = runner.invoke(main, ["convert", str(source), str(converted), "--json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["other_quantized"] == []
    assert {k: payload["converted"][k] for k in QOPERATOR_OPS} == QOPERATOR_OPS
    assert ["conv_quant", "QLinearConv", "Conv"] in [
        [n["node"], n["op_type"], n["new_op_type"]] for n in payload["nodes"]
    ]
    text = runner.invoke(main, ["convert", str(source), str(tmp_path / "t.onnx")])
    assert "QLinearConv" in text.stdout and "QGemm" in text.stdout, text.stdout
    back = runner.invoke(main, ["lower", str(converted), str(lowered), "--json"])
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["emitted"]["QLinearConv"] == 2
    assert _initializers(onnx.load(lowered)) == _initializers(original)
    assert _nodes(onnx.load(lowered)) == _nodes(original)
