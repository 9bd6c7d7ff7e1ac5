"""Validation on the models people bring: inputs that run, several samples, where models part.

Each model here is built for one situation of issue #14: symbolic spatial dims behind a
strided Conv, token ids into a small embedding table (directly and through an Add), a count
input, a boolean mask, a model only one image size runs, and a rewritten model with one scale
edited, which --intermediate must trace to its node.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph.cli import main
from quantgraph.errors import ModelError
from quantgraph.validation import parse_val_range, plan_inputs
from tests.builders import BACKENDS, make_model, tensor_info

F, U8, I64, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT64, TensorProto.INT32


def _qdq(prefix: str, source: str, out: str) -> list[onnx.NodeProto]:
    """QuantizeLinear -> DequantizeLinear with the scalar scale/zp initializers 's' and 'z'."""
    return [
        helper.make_node("QuantizeLinear", [source, "s", "z"], [f"{prefix}_q"], name=f"{prefix}_q"),
        helper.make_node("DequantizeLinear", [f"{prefix}_q", "s", "z"], [out], name=f"{prefix}_dq"),
    ]


SCALE = [numpy_helper.from_array(np.array(0.05, np.float32), "s")]
SCALE.append(numpy_helper.from_array(np.array(128, np.uint8), "z"))


def detector() -> onnx.ModelProto:
    """images [batch, 3, height, width] -> strided 3x3 Conv -> QDQ: a 1x1 image cannot run."""
    weight = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, np.float32), "w")
    nodes = [
        *_qdq("in", "images", "x"),
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2]),
        *_qdq("out", "c", "y"),
    ]
    return make_model(
        nodes,
        [tensor_info("images", F, ["batch", 3, "height", "width"])],
        [tensor_info("y", F, ["batch", 4, "h", "w"])],
        [*SCALE, weight],
    )


def only_256() -> onnx.ModelProto:
    """An image model whose Reshape needs height * width == 65536: 224 fails, 256 runs."""
    shape = numpy_helper.from_array(np.array([1, 3, 65536], np.int64), "shape")
    nodes = [
        helper.make_node("Reshape", ["images", "shape"], ["r"], name="flatten"),
        *_qdq("q", "r", "y"),
    ]
    return make_model(
        nodes,
        [tensor_info("images", F, [1, 3, "height", "width"])],
        [tensor_info("y", F, [1, 3, 65536])],
        [*SCALE, shape],
    )


def language_model() -> onnx.ModelProto:
    """int64 token ids into Gather of a 16-row table, ids + 1 into a second table; a TopK
    count; a boolean mask picking between the two embeddings."""
    table = numpy_helper.from_array(
        np.linspace(-1, 1, 16 * 8, dtype=np.float32).reshape(16, 8), "t"
    )
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes = [
        helper.make_node("Gather", ["t", "ids"], ["e"], name="embed"),
        helper.make_node("Add", ["ids", "one"], ["next_ids"], name="shift"),
        helper.make_node("Gather", ["t", "next_ids"], ["e2"], name="embed_next"),
        helper.make_node("Where", ["mask", "e", "e2"], ["m"], name="pick"),
        *_qdq("h", "m", "h"),
        helper.make_node("TopK", ["h", "k"], ["top", "top_i"], name="topk"),
    ]
    return make_model(
        nodes,
        [
            tensor_info("ids", I64, ["batch", "seq"]),
            tensor_info("mask", TensorProto.BOOL, ["batch", "seq", 8]),
            tensor_info("k", I64, [1]),
        ],
        [
            tensor_info("top", F, ["batch", "seq", "k"]),
            tensor_info("top_i", I64, ["batch", "seq", "k"]),
        ],
        [*SCALE, table, one],
    )


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# -- inputs that run ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_image_model_with_symbolic_spatial_dims_runs_at_224(backend: str) -> None:
    model = detector()
    report = quantgraph.validate(model, quantgraph.convert(model).proto, backend=backend)
    assert report.agree
    assert report.inputs["images"]["shape"] == [1, 3, 224, 224]


def test_a_size_the_original_refuses_is_replaced_by_one_it_runs() -> None:
    model = only_256()
    report = quantgraph.validate(model, quantgraph.convert(model).proto, backend="python")
    assert report.agree and report.inputs["images"]["shape"] == [1, 3, 256, 256]


def test_token_ids_stay_inside_the_table_and_through_an_add() -> None:
    plans = {p.name: p for p in plan_inputs(quantgraph.ir.model_files.load_model(language_model()))}
    ids, mask, k = plans["ids"], plans["mask"], plans["k"]
    assert (ids.low, ids.high) == (0, 14)  # embed: [0, 15]; embed_next reads ids + 1: [-1, 14]
    assert "'embed' (Gather), axis 0 of size 16" in ids.why and "'embed_next'" in ids.why
    assert mask.why == "a mask: named like one; 0 or 1, at least one 1 a row" and mask.mask
    assert (k.low, k.high) == (1, 8)
    assert "'topk' (TopK)" in k.why


@pytest.mark.parametrize("backend", BACKENDS)
def test_language_model_validates_over_several_samples(backend: str) -> None:
    model = language_model()
    report = quantgraph.validate(
        model,
        quantgraph.convert(model).proto,
        backend=backend,
        iterations=4,
        dims={"seq": 5},
        val_ranges={"k": (6, 6)},
    )
    assert report.agree and report.samples == 4
    top = next(o for o in report.outputs if o.name == "top")
    assert top.elements == 4 * 1 * 5 * top.shape[-1]
    assert report.inputs["ids"]["range"] == [0, 14]
    assert report.inputs["ids"]["shape"] == [1, 5]


def test_val_range_overrides_and_is_checked() -> None:
    model = quantgraph.ir.model_files.load_model(language_model())
    (ids,) = [p for p in plan_inputs(model, val_ranges={"ids": (3, 4)}) if p.name == "ids"]
    assert (ids.low, ids.high, ids.why) == (3, 4, "--val-range")
    with pytest.raises(ModelError, match="names no input of the model: nope"):
        plan_inputs(model, val_ranges={"nope": (0, 1)})
    assert parse_val_range("input_ids:0,15") == ("input_ids", (0.0, 15.0))
    for bad in ("x", "x:1", "x:a,b", "x:2,1"):
        with pytest.raises(ValueError):
            parse_val_range(bad)


def test_metadata_pins_a_symbolic_dim() -> None:
    model = detector()
    helper.set_model_props(model, {"height": "64", "width": "96"})
    report = quantgraph.validate(model, quantgraph.convert(model).proto, backend="python")
    assert report.inputs["images"]["shape"] == [1, 3, 64, 96]


def test_an_original_that_fails_on_generated_inputs_says_so_in_one_line(tmp_path: Path) -> None:
    """Ids forced outside the table: the original fails; the message names the model, the
    inputs used, onnxruntime's reason and the options; no onnxruntime log line is printed."""
    model = _save(language_model(), tmp_path / "lm.onnx")
    out = tmp_path / "lm_qg.onnx"
    quantgraph.convert(model).save(out)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "quantgraph",
            "validate",
            str(model),
            str(out),
            "--val-range",
            "ids:100,200",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    (line,) = lines
    assert line.startswith(f"quantgraph: error: {model}: the original model fails on the")
    assert "ids: int64[1,128]" in line and "indices element out of data bounds" in line
    assert "--dim" in line and "--val-range" in line and "--inputs" in line
    assert run.stdout == ""


# -- several samples, given inputs ----------------------------------------------------------


def test_inputs_from_files_and_a_directory(runner: CliRunner, tmp_path: Path) -> None:
    model = _save(detector(), tmp_path / "det.onnx")
    out = tmp_path / "det_qg.onnx"
    quantgraph.convert(model).save(out)
    folder = tmp_path / "samples"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for index in range(3):
        np.savez(
            folder / f"{index}.npz", images=rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
        )
    result = runner.invoke(
        main, ["validate", str(model), str(out), "--inputs", str(folder), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["samples"] == 3 and payload["seed"] is None
    assert payload["inputs"]["images"]["shape"] == [2, 3, 9, 9]
    result = runner.invoke(
        main,
        [
            "validate",
            str(model),
            str(out),
            "--inputs",
            str(folder / "0.npz"),
            "--inputs",
            str(folder / "1.npz"),
            "--json",
        ],
    )
    assert json.loads(result.stdout)["samples"] == 2


def test_cli_flags_for_dims_ranges_and_iterations(runner: CliRunner, tmp_path: Path) -> None:
    model = _save(language_model(), tmp_path / "lm.onnx")
    out = tmp_path / "lm_qg.onnx"
    result = runner.invoke(
        main,
        [
            "convert",
            str(model),
            str(out),
            "--validate",
            "--dim",
            "seq=3",
            "--val-range",
            "ids:2,5",
            "--iterations",
            "3",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    validation = json.loads(result.stdout)["validation"]
    assert validation["samples"] == 3 and validation["agree"]
    assert validation["inputs"]["ids"] == {
        "dtype": "int64",
        "shape": [1, 3],
        "range": [2.0, 5.0],
        "why": "--val-range",
        "shape_from": ["default 1", "--dim seq=3"],
    }
    text = runner.invoke(main, ["validate", str(model), str(out), "--dim", "seq=3"]).stdout
    assert "ids: int64[1x3] in [0, 14] (indices of 'embed' (Gather)" in text
    assert "inputs: 1 sample (seed 0)" in text
    bad = runner.invoke(main, ["validate", str(model), str(out), "--val-range", "ids=1"])
    assert bad.exit_code == 2 and "NAME:LOW,HIGH" in bad.output


# -- where the models part --------------------------------------------------------------------


def _edited(model: onnx.ModelProto, node: str, scale: float) -> onnx.ModelProto:
    """The static conversion of ``model`` with one node's scale changed: a diverging kernel."""
    rewritten = quantgraph.convert(model, static=True).proto
    for candidate in rewritten.graph.node:
        if candidate.name == node:
            for attribute in candidate.attribute:
                if attribute.name == "scales":
                    attribute.floats[:] = [scale]
            return rewritten
    raise AssertionError(f"no node {node}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_intermediate_finds_the_node_where_the_models_part(backend: str) -> None:
    model = detector()
    report = quantgraph.validate(
        model, _edited(model, "out_q", 0.07), backend=backend, intermediate=True
    )
    assert not report.agree
    found = report.intermediate
    assert found is not None and found.first_divergence is not None
    first = found.first_divergence
    assert (first.node, first.op_type, first.rewritten_op_type, first.tensor) == (
        "out_q",
        "QuantizeLinear",
        "Quantize",
        "out_q",
    )
    assert first.max_abs_diff > 0 and first.mismatches > 0
    # in_q, in_dq, conv agree; out_q and out_dq (the output) differ
    assert found.tensors_compared == 4 and found.tensors_differing == 1
    clean = quantgraph.validate(
        model, quantgraph.convert(model).proto, backend=backend, intermediate=True
    )
    assert clean.intermediate is not None and clean.intermediate.first_divergence is None
    assert clean.intermediate.tensors_differing == 0


def test_intermediate_in_the_cli_json(runner: CliRunner, tmp_path: Path) -> None:
    model = _save(detector(), tmp_path / "det.onnx")
    out = _save(_edited(detector(), "in_q", 0.08), tmp_path / "det_qg.onnx")
    result = runner.invoke(main, ["validate", str(model), str(out), "--intermediate", "--json"])
    assert result.exit_code == 1, result.output
    intermediate = json.loads(result.stdout)["intermediate"]
    first = intermediate["first_divergence"]
    assert (first["node"], first["op_type"], first["tensor"]) == (
        "in_q",
        "QuantizeLinear",
        "in_q",
    )
    assert intermediate["tensors_compared"] >= 3 and intermediate["tensors_differing"] >= 1
    text = runner.invoke(main, ["validate", str(model), str(out), "--intermediate"]).stdout
    assert "first divergence: node 'in_q' (QuantizeLinear, now Quantize) output 'in_q'" in text


def test_tolerances_judge_the_optimized_comparison_only(runner: CliRunner) -> None:
    root = Path(__file__).resolve().parent.parent / "models"
    model = root / "transformer_u8.onnx"
    rewritten = quantgraph.convert(model).proto
    exact = quantgraph.validate(
        model, rewritten, backend="python", optimized=True, dims={"batch": 2}
    )
    assert exact.agree  # the exact comparison is untouched by tolerances
    (fused,) = exact.optimized
    assert fused.mismatches > 0 and not fused.within_tolerance
    loose = quantgraph.validate(
        model, rewritten, backend="python", optimized=True, dims={"batch": 2}, atol=1.0
    )
    assert loose.agree and loose.optimized[0].within_tolerance
    assert loose.optimized[0].beyond_tolerance == 0
    payload = loose.to_dict()["optimized"]
    assert isinstance(payload, dict)
    assert payload["within_tolerance"] and payload["atol"] == 1.0


# -- broken inputs, the module entry point --------------------------------------------------


def test_an_input_that_already_fails_the_checker_is_named(
    runner: CliRunner, tmp_path: Path
) -> None:
    nodes = [*_qdq("a", "x", "y"), helper.make_node("Add", ["y"], ["w"], name="broken_add")]
    model = make_model(
        nodes, [tensor_info("x", F, [2])], [tensor_info("w", F, [2])], SCALE, check=False
    )
    path = _save(model, tmp_path / "broken.onnx")
    result = runner.invoke(main, ["convert", str(path), str(tmp_path / "out.onnx")])
    assert result.exit_code == 2
    assert "the input model fails onnx.checker (full_check), before any rewrite" in result.output
    assert "broken_add" in result.output


def test_python_dash_m_quantgraph_is_the_cli() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "quantgraph", "validate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0
    for flag in ("--iterations", "--val-range", "--intermediate", "--atol", "--rtol", "--dim"):
        assert flag in run.stdout


def recurrent_model() -> onnx.ModelProto:
    """Q/DQ of a [seq, batch, 4] input into an LSTM (hidden 3) with sequence_lens fed as an
    input: onnxruntime refuses lengths outside [1, seq]."""
    hidden, features = 3, 4
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(
        rng.standard_normal((1, 4 * hidden, features)).astype(np.float32), "w"
    )
    r = numpy_helper.from_array(
        rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32), "r"
    )
    nodes = [
        *_qdq("x", "x", "xd"),
        helper.make_node(
            "LSTM", ["xd", "w", "r", "", "lens"], ["y"], name="lstm", hidden_size=hidden
        ),
    ]
    return make_model(
        nodes,
        [tensor_info("x", F, ["seq", "batch", features]), tensor_info("lens", I32, ["batch"])],
        [tensor_info("y", F, ["seq", 1, "batch", hidden])],
        [*SCALE, w, r],
    )


def test_rnn_sequence_lens_stay_inside_the_sequence_end_to_end() -> None:
    model = recurrent_model()
    plans = {
        p.name: p for p in plan_inputs(quantgraph.ir.model_files.load_model(model), dims={"seq": 6})
    }
    lens = plans["lens"]
    assert (lens.low, lens.high) == (1, 6)
    assert "sequence_lens of 'lstm' (LSTM), sequence length 6" in lens.why
    report = quantgraph.validate(
        model,
        quantgraph.convert(model).proto,
        dims={"seq": 6, "batch": 5},
        iterations=4,
        backend="python",
    )
    assert report.agree, report.to_dict()
    assert report.inputs["lens"]["range"] == [1, 6]


def test_a_tolerance_an_exact_comparison_would_ignore_is_an_error() -> None:
    """--atol/--rtol judge --optimized, a float original and oneDNN's arithmetic; where the
    rewritten model must equal the original exactly, a tolerance would be silently unused."""
    original = Path(__file__).resolve().parent.parent / "models" / "cnn_u8.onnx"
    rewritten = quantgraph.convert(original).proto
    for fusion in ("none", "onnxruntime"):
        with pytest.raises(ModelError, match=r"--atol 0.1 / --rtol 0 would judge nothing"):
            quantgraph.validate(original, rewritten, fusion=fusion, atol=0.1)
    assert quantgraph.validate(original, rewritten, optimized=True, atol=0.1).agree
    onednn_arithmetic = quantgraph.validate(original, rewritten, arithmetic="onednn", atol=0.1)
    assert onednn_arithmetic.exact_expected  # against the original in oneDNN's arithmetic
    assert onednn_arithmetic.onnx_arithmetic  # which the tolerance judges, beside the verdict
