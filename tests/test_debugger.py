"""validate FLOAT QDQ as a quantization debugger (quantgraph.validation.debug.debugger): a QDQ model
calibrated on [0, 1] and fed standard-normal data clips its input (the known culprit), and a
layer given a deliberately coarse scale; the ranking, the figures (against numpy on the same
data), --sensitivity and convert --keep-float must say so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs, validate

ROOT = Path(__file__).resolve().parent.parent
COARSE_FACTOR = 32.0  # r1's scale times this: its values span ~8 quantization steps


def _float_model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
            helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
        ],
        "debug",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [
            weight("w1", [8, 3, 3, 3]),
            weight("b1", [8]),
            weight("w2", [4, 8, 3, 3]),
            weight("b2", [4]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(float model, its QDQ form calibrated on uniform [0, 1], r1's scale made coarse)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Narrow(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.samples = iter(
                [{"x": rng.uniform(0, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.samples, None)

    folder = tmp_path_factory.mktemp("debugger")
    float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
    onnx.save(_float_model(), float_path)
    quantize_static(
        float_path,
        qdq_path,
        Narrow(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        weight_type=QuantType.QInt8,
    )
    qdq = onnx.load(qdq_path)
    for init in qdq.graph.initializer:
        if init.name == "r1_scale":
            init.CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init) * COARSE_FACTOR, init.name)
            )
    onnx.save(qdq, qdq_path)
    return float_path, qdq_path


def _params(qdq_path: Path, tensor: str) -> tuple[float, int]:
    qdq = onnx.load(qdq_path)
    q = next(n for n in qdq.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    arrays = {t.name: numpy_helper.to_array(t) for t in qdq.graph.initializer}
    return float(arrays[q.input[1]]), int(arrays[q.input[2]])


def test_the_ranking_names_the_clipped_input_worst(models: tuple[Path, Path]) -> None:
    float_path, qdq_path = models
    report = validate(float_path, qdq_path, intermediate=True, iterations=2, atol=1e9)
    assert report.debug is not None
    worst = report.debug.worst
    assert (worst[0].kind, worst[0].name, worst[0].reason) == ("tensor", "x", "clipping")
    reasons = {t.tensor: t.reason for t in report.debug.tensors}
    assert reasons["r1"] == "coarse scale"
    headline = report.debug.headline()
    assert headline is not None and headline.startswith("worst introduced error: tensor 'x'")
    # the nodes' own error (their int8 weights) is measured, and smaller than x's
    nodes = {n.node: n for n in report.debug.nodes}
    assert set(nodes) == {"conv1", "conv2"}
    assert all(math.isfinite(n.sqnr_db) and n.sqnr_db > worst[0].sqnr_db for n in nodes.values())


def test_the_figures_are_numpy_s_on_the_same_data(models: tuple[Path, Path]) -> None:
    float_path, qdq_path = models
    report = validate(float_path, qdq_path, intermediate=True, iterations=3, atol=1e9)
    assert report.debug is not None
    x = np.concatenate([make_inputs(float_path, seed=s)["x"].reshape(-1) for s in range(3)])
    scale, zp = _params(qdq_path, "x")
    rounded = np.rint(x / np.float32(scale)).astype(np.float64) + zp
    q = np.clip(rounded, -128, 127)  # quantize_static's default activations: int8
    dq = ((q - zp) * scale).astype(np.float32)
    found = next(t for t in report.debug.tensors if t.tensor == "x")
    assert found.scale == pytest.approx(scale)
    assert (found.zero_point, found.dtype) == (zp, "int8")
    assert found.elements == x.size
    assert found.clipped_low_fraction == pytest.approx(np.mean(rounded < -128))
    assert found.clipped_high_fraction == pytest.approx(np.mean(rounded > 127))
    assert found.clipped_low_fraction > 0.3  # standard normal on a [0, 1] calibration
    assert found.rounded_to_zero_fraction == pytest.approx(np.mean((q == zp) & (x != 0)))
    assert (found.observed_min, found.observed_max) == (x.min(), x.max())
    assert found.representable_min == pytest.approx((-128 - zp) * scale)
    assert found.representable_max == pytest.approx((127 - zp) * scale)
    noise = np.sum((x.astype(np.float64) - dq) ** 2)
    assert found.sqnr_db == pytest.approx(10 * np.log10(np.sum(x.astype(np.float64) ** 2) / noise))


def test_sensitivity_and_keep_float_recover_the_output(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    float_path, qdq_path = models
    report = validate(float_path, qdq_path, iterations=2, atol=1e9, sensitivity=2)
    debug = report.debug
    assert debug is not None and debug.sensitivity is not None
    assert len(debug.sensitivity) == 2
    best = debug.sensitivity[0]
    assert best.name == "x" and best.gain_db > 10
    assert debug.baseline_sqnr_db == pytest.approx(report.error_stats["y"].sqnr_db)
    # the suggestion, written: its validate shows the same output SQNR
    out = tmp_path / "kept.onnx"
    quantgraph.convert(qdq_path, keep_float=["x"]).save(out)
    kept = validate(float_path, out, iterations=2, atol=1e9)
    assert kept.error_stats["y"].sqnr_db == pytest.approx(best.output_sqnr_db, abs=1e-3)
    assert kept.error_stats["y"].sqnr_db > report.error_stats["y"].sqnr_db + 10


def test_keep_float_names_a_missing_name(models: tuple[Path, Path], tmp_path: Path) -> None:
    _, qdq_path = models
    with pytest.raises(ModelError, match="no quantized tensor or node named 'nope'"):
        quantgraph.convert(qdq_path, keep_float=["x", "nope"])
    result = CliRunner().invoke(
        main, ["convert", str(qdq_path), str(tmp_path / "o.onnx"), "--keep-float", "nope"]
    )
    assert result.exit_code == 2 and "'nope'" in result.output
    assert not (tmp_path / "o.onnx").exists()


def test_keep_float_keeps_a_relu_folded_into_q() -> None:
    """cnn_u8's Conv writes relu1 with the Relu folded into Q's clamp (zp 0): keeping relu1 in
    float must keep the Relu. relu1 alone changes nothing (MaxPool then the same Q: the max
    commutes with the monotonic Q), so --sensitivity counts relu1 and pool1 as one chain; kept
    in float, relu1 and relu2 keep their Relu (lost, each costs ~10 dB)."""
    float_path, qdq_path = ROOT / "models" / "cnn_float.onnx", ROOT / "models" / "cnn_u8.onnx"
    feeds = make_inputs(float_path, seed=0)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def run(model: onnx.ModelProto) -> np.ndarray:
        session = ort.InferenceSession(model.SerializeToString(), options)
        return np.asarray(session.run(None, feeds)[0])

    alone = quantgraph.convert(qdq_path, keep_float=["relu1"]).original()
    np.testing.assert_array_equal(run(ir.to_proto(alone)), run(onnx.load(qdq_path)))
    report = validate(float_path, qdq_path, iterations=1, atol=1e9, sensitivity=8)
    assert report.debug is not None and report.debug.sensitivity is not None
    gains = {s.candidate.names: s.gain_db for s in report.debug.sensitivity}
    assert gains[("relu1", "pool1")] > -1 and gains[("relu2",)] > -1
    assert gains[("output_QuantizeLinear_Input",)] > 0  # a graph output's pair is removed too


def test_cli_json_validates_and_the_page_renders(models: tuple[Path, Path], tmp_path: Path) -> None:
    float_path, qdq_path = models
    page = tmp_path / "r.html"
    result = CliRunner().invoke(
        main,
        [
            "validate",
            str(float_path),
            str(qdq_path),
            "--sensitivity",
            "--atol",
            "1e9",
            "--report",
            str(page),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("validate")).validate(payload)
    debug = payload["debug"]
    assert debug["worst"][0]["name"] == "x" and debug["worst"][0]["reason"] == "clipping"
    # K 5 by default: three quantized tensors (each its own chain) and two nodes' weights
    kinds = sorted(s["kind"] for s in debug["sensitivity"])
    assert kinds == ["chain", "chain", "chain", "weights", "weights"]
    best = debug["sensitivity"][0]
    assert (best["name"], best["suggested"], best["keep_float"]) == ("x", True, "x")
    text = page.read_text()
    assert "Where error is introduced" in text and "clipping" in text
