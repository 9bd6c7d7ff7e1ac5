"""validate --backend onednn compares like with like: the model as oneDNN computes it against
the original evaluated in oneDNN's arithmetic, exactly; the distance to the original in ONNX's
arithmetic is information, in quantization steps (issue #32)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import quantgraph
from quantgraph.validation import validate
from tests.builders import requires_onednn

pytestmark = requires_onednn
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    original = ROOT / "models" / "cnn_u8.onnx"
    rewritten = tmp_path_factory.mktemp("onednn") / "cnn_u8.qg.onnx"
    quantgraph.convert(original).save(rewritten)
    return original, rewritten


def test_like_with_like_exact_against_the_original_in_onednns_arithmetic(
    cnn: tuple[Path, Path],
) -> None:
    """oneDNN itself against the original evaluated in oneDNN's arithmetic (converted, on the
    native backend's model of it): exact. The ONNX-arithmetic original is information."""
    report = validate(*cnn, backend="onednn", iterations=30)
    assert report.exact_expected and report.reference_arithmetic == "onednn"
    assert report.arithmetic == "onednn"
    assert report.engine is not None and report.engine.startswith("oneDNN v3.")
    assert "must be identical" in report.comparison and report.engine in report.comparison
    assert report.agree, report.to_dict()
    assert all(o.mismatches == 0 for o in report.outputs)
    (apart,) = report.onnx_arithmetic
    # Measured: 30 samples of the bundled CNN, ordinary data, a few outputs a step apart from
    # the ONNX-arithmetic original (ties the two arithmetics round their own ways).
    assert 0 < apart.mismatches < apart.elements
    steps = report.onnx_arithmetic_steps[apart.name]
    assert steps is not None and 0.5 <= steps <= 8
    assert not apart.within_tolerance  # atol = rtol = 0, and it does not decide the verdict


def test_the_tolerance_judges_the_onnx_arithmetic_comparison(cnn: tuple[Path, Path]) -> None:
    report = validate(*cnn, backend="onednn", iterations=30, atol=0.05)
    assert report.agree
    (apart,) = report.onnx_arithmetic
    assert apart.mismatches > 0 and apart.within_tolerance


def test_native_onednn_arithmetic_reports_the_same(cnn: tuple[Path, Path]) -> None:
    native = validate(*cnn, backend="native", arithmetic="onednn", iterations=30)
    onednn = validate(*cnn, backend="onednn", iterations=30)
    assert native.engine is None and native.exact_expected and native.agree
    assert native.onnx_arithmetic[0].mismatches == onednn.onnx_arithmetic[0].mismatches
    assert native.onnx_arithmetic[0].max_abs_diff == onednn.onnx_arithmetic[0].max_abs_diff


def test_intermediate_tensors_agree_in_onednns_arithmetic(cnn: tuple[Path, Path]) -> None:
    report = validate(*cnn, backend="onednn", iterations=5, intermediate=True)
    assert report.intermediate is not None
    assert report.intermediate.tensors_compared > 10
    assert report.intermediate.first_divergence is None, report.intermediate.to_dict()


def test_cli_json(cnn: tuple[Path, Path]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "quantgraph",
            "validate",
            *map(str, cnn),
            "--backend",
            "onednn",
            "--iterations",
            "30",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["exact_expected"] is True and payload["reference_arithmetic"] == "onednn"
    assert payload["onnx_arithmetic"]["part_of_verdict"] is False
    assert payload["onnx_arithmetic"]["max_abs_diff_steps"]["output"] >= 0.5
    assert payload["backend"] == "onednn" and payload["arithmetic"] == "onednn"
    assert payload["onednn"].startswith("oneDNN v3.")
    assert {"mismatches", "max_abs_diff", "max_ulp_diff"} <= payload["outputs"][0].keys()


def test_fusion_keeps_the_spec_ops_onnxruntime_leaves_on_onednn(cnn: tuple[Path, Path]) -> None:
    """With fusion='onnxruntime' the units run as onnxruntime's kernels on both sides and the
    spec ops it leaves alone (the input's quantize, the output's dequantize) run on oneDNN:
    the same arithmetic as the native backend in oneDNN's arithmetic, at ORT_ENABLE_ALL."""
    session = quantgraph.InferenceSession(cnn[1], "onednn", fusion="onnxruntime")
    assert {a.node for a in session.fusion_plan.alone} == {
        "input_QuantizeLinear",
        "output_DequantizeLinear",
    }
    onednn = validate(*cnn, backend="onednn", iterations=30, fusion="onnxruntime")
    native = validate(
        *cnn, backend="native", arithmetic="onednn", iterations=30, fusion="onnxruntime"
    )
    assert onednn.exact_expected and "ORT_ENABLE_ALL (fusion 'onnxruntime')" in onednn.comparison
    assert onednn.agree and native.agree
    assert onednn.onnx_arithmetic[0].mismatches == native.onnx_arithmetic[0].mismatches
    assert onednn.onnx_arithmetic[0].max_abs_diff == native.onnx_arithmetic[0].max_abs_diff
