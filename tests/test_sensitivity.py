"""validate FLOAT QDQ --sensitivity gives answers a user can act on, on models built where the
culprit is known (a clipped input, a coarse weight scale, a coarse scale shared by a chain of
aliases, a model quantized by NNCF): the places are the fallback's candidates (a chain once,
a node's weights), only measured gains are suggested, and each suggestion, written by
``convert --keep-float`` (``--float-model`` for weights) and measured by validate, gains what
the ranking predicted within 0.5 dB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from quantgraph.cli import main
from quantgraph.passes.floating.keep_float import keep_float
from quantgraph.schemas_json import schema
from quantgraph.validation import make_inputs, validate
from quantgraph.validation.debug.sensitivity import GAIN_NOISE_DB
from tests.fallback.models import aliased_mlp, qdq, samples

ITERATIONS = 4  # validate's samples, the same for the ranking and the check
HELD_DB = 0.5  # a suggestion written and measured gains what was predicted within this


def _rescaled(model: onnx.ModelProto, codes: str | None, scale: str, factor: int) -> None:
    """``scale`` times ``factor``, and ``codes`` (a weight's) divided by it: a coarse scale."""
    by_name = {t.name: t for t in model.graph.initializer}
    if codes is not None:
        array = numpy_helper.to_array(by_name[codes])
        rounded = np.round(array / factor).astype(array.dtype)
        by_name[codes].CopyFrom(numpy_helper.from_array(rounded, codes))
    array = numpy_helper.to_array(by_name[scale])
    by_name[scale].CopyFrom(numpy_helper.from_array((array * factor).astype(array.dtype), scale))


def _clipped() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Calibrated on inputs five times smaller than validate feeds: x's Q clips."""
    floating = aliased_mlp()
    return floating, qdq(floating, samples(scale=0.2))


def _coarse_weight() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """fc2's weight scale 8x coarser than quantize_static chose (its codes rescaled)."""
    floating = aliased_mlp()
    quantized = qdq(floating, samples(32))
    _rescaled(quantized, "w2_quantized", "w2_scale", 8)
    return floating, quantized


def _coarse_chain() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """hb's scale 16x coarser: the Q/DQ after the Add and after Reshape, Transpose, Reshape
    share it (quantize_static gives the aliases the Add's parameters)."""
    floating = aliased_mlp()
    quantized = qdq(floating, samples(32))
    _rescaled(quantized, None, "hb_scale", 16)
    return floating, quantized


def _nncf_cnn() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """A small CNN quantized by NNCF (its own naming, bias correction) on inputs five times
    smaller than validate feeds."""
    nncf = pytest.importorskip("nncf")
    rng = np.random.default_rng(2)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
            helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
            helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="gap"),
            helper.make_node("Flatten", ["p"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1),
        ],
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            weight("w1", [8, 3, 3, 3]),
            weight("b1", [8]),
            weight("w2", [16, 8, 3, 3]),
            weight("b2", [16]),
            weight("w3", [10, 16]),
            weight("b3", [10]),
        ],
    )
    floating = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    data = [{"x": (0.2 * rng.standard_normal((1, 3, 8, 8))).astype(np.float32)} for _ in range(8)]
    return floating, nncf.quantize(floating, nncf.Dataset(data), subset_size=len(data))


def _saved(folder: Path, pair: tuple[onnx.ModelProto, onnx.ModelProto]) -> tuple[Path, Path]:
    paths = folder / "float.onnx", folder / "qdq.onnx"
    for model, path in zip(pair, paths, strict=True):
        onnx.save(model, path)
    return paths


def _output_sqnr(float_path: Path, model: Path) -> float:
    """The worst output's SQNR as validate measures it (on its ITERATIONS samples)."""
    report = validate(float_path, model, iterations=ITERATIONS, atol=1e9)
    return min(report.error_stats[o.name].sqnr_db for o in report.outputs)


def _sensitivity(float_path: Path, qdq_path: Path) -> tuple[float, list[dict[str, Any]]]:
    """validate --sensitivity 8 --json: (the quantized model's output SQNR, the entries)."""
    args = ["validate", str(float_path), str(qdq_path), "--sensitivity", "8",
            "--iterations", str(ITERATIONS), "--atol", "1e9", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema("validate")).validate(payload)
    debug = payload["debug"]
    return float(debug["baseline_sqnr_db"]), list(debug["sensitivity"])


def _written_and_measured(folder: Path, name: str) -> list[dict[str, Any]]:
    """Every suggestion written with convert --keep-float and measured: it holds."""
    float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
    baseline, found = _sensitivity(float_path, qdq_path)
    suggested = [s for s in found if s["suggested"]]
    assert suggested, f"{name}: nothing suggested"
    for entry in found:  # a suggestion gains more than noise; no other is one
        gain = entry["gain_db"]
        assert entry["suggested"] == (gain is not None and gain > GAIN_NOISE_DB)
    for index, entry in enumerate(suggested):
        out = folder / f"kept{index}.onnx"
        args = ["convert", str(qdq_path), str(out), "--keep-float", entry["keep_float"]]
        if entry["float_model"]:
            args += ["--float-model", str(float_path)]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        measured = _output_sqnr(float_path, out)
        predicted = float(entry["output_sqnr_db"])
        assert abs(measured - predicted) <= HELD_DB, (name, entry["label"], measured, predicted)
        assert measured - baseline > GAIN_NOISE_DB
    return found


MODELS = {
    "clipped input": _clipped,
    "coarse weight": _coarse_weight,
    "coarse chain": _coarse_chain,
    "nncf": _nncf_cnn,
}
# The culprit each model was built with, first among the suggestions it must be in.
CULPRITS = {
    "clipped input": ("chain", ["x"]),
    "coarse weight": ("weights", ["fc2"]),
    "coarse chain": ("chain", ["hb", "r1", "t1", "r2"]),
    "nncf": ("chain", ["x"]),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_suggestion_written_gains_what_was_predicted(name: str, tmp_path: Path) -> None:
    _saved(tmp_path, MODELS[name]())
    found = _written_and_measured(tmp_path, name)
    kind, names = CULPRITS[name]
    culprit = next(s for s in found if s["names"] == names)
    assert culprit["kind"] == kind and culprit["suggested"]
    # a weight's suggestion needs the float model; a chain's names every alias
    assert culprit["float_model"] == (kind == "weights")
    assert culprit["keep_float"] == ",".join(names)
    # each place once: no tensor in two entries
    every = [n for s in found for n in s["names"]]
    assert len(every) == len(set(every))


def test_aliases_count_once_because_one_alone_gains_nothing(tmp_path: Path) -> None:
    """The chain's tensors kept in float one at a time change (almost) nothing: the next Q
    re-quantizes with the same coarse scale; --sensitivity lists the chain once, not them."""
    floating, quantized = _coarse_chain()
    float_path, qdq_path = _saved(tmp_path, (floating, quantized))
    feeds = [make_inputs(float_path, seed=s) for s in range(ITERATIONS)]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def sqnr(model: onnx.ModelProto) -> float:
        want = ort.InferenceSession(floating.SerializeToString(), options)
        got = ort.InferenceSession(model.SerializeToString(), options)
        a = np.concatenate([want.run(None, f)[0].reshape(-1) for f in feeds]).astype(np.float64)
        b = np.concatenate([got.run(None, f)[0].reshape(-1) for f in feeds]).astype(np.float64)
        return float(10 * np.log10(np.sum(a * a) / np.sum((a - b) ** 2)))

    base = sqnr(quantized)
    chain = ["hb", "r1", "t1", "r2"]
    for alias in chain:
        alone = keep_float(ir.from_proto(quantized), [alias])
        assert sqnr(ir.to_proto(alone)) - base < 1.0, alias
    whole = sqnr(ir.to_proto(keep_float(ir.from_proto(quantized), chain)))
    assert whole - base > 5.0
    _, found = _sensitivity(float_path, qdq_path)
    assert [s["names"] for s in found if set(s["names"]) & set(chain)] == [chain]


def test_a_weight_name_needs_the_float_model(tmp_path: Path) -> None:
    float_path, qdq_path = _saved(tmp_path, _coarse_weight())
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(main, ["convert", str(qdq_path), str(out), "--keep-float", "fc2"])
    assert result.exit_code == 2
    message = result.output.strip()
    assert "'fc2'" in message and "--float-model" in message and "\n" not in message
    assert not out.exists()
    result = CliRunner().invoke(
        main, ["convert", str(qdq_path), str(out), "--float-model", str(float_path)]
    )
    assert result.exit_code == 2 and "only with --keep-float" in result.output
    before = float_path.read_bytes()  # OUT is never the float model, even with --force
    result = CliRunner().invoke(
        main,
        ["convert", str(qdq_path), str(float_path), "--keep-float", "fc2", "--float-model",
         str(float_path), "--force"],
    )  # fmt: skip
    assert result.exit_code == 2 and float_path.read_bytes() == before
