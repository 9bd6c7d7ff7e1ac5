"""validate --backend onednn: the ONNX original against the model as oneDNN computes it; not
expected to be exact, said so, and measured per output."""

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


def test_the_report_says_the_comparison_is_not_exact(cnn: tuple[Path, Path]) -> None:
    report = validate(*cnn, backend="onednn", iterations=30)
    assert not report.exact_expected
    assert report.arithmetic == "onednn"
    assert report.engine is not None and report.engine.startswith("oneDNN v3.")
    assert "not expected to be exact" in report.comparison
    assert report.engine in report.comparison
    (output,) = report.outputs
    # Measured: 30 samples of the bundled CNN, a few outputs one quantization step apart.
    assert 0 < output.mismatches < output.elements
    assert output.max_abs_diff > 0 and output.max_ulp_diff > 0
    assert output.beyond_tolerance == output.mismatches
    assert not report.agree  # atol = rtol = 0


def test_the_tolerance_judges_it(cnn: tuple[Path, Path]) -> None:
    report = validate(*cnn, backend="onednn", iterations=30, atol=0.05)
    assert report.agree
    assert report.outputs[0].mismatches > 0


def test_native_onednn_arithmetic_reports_the_same(cnn: tuple[Path, Path]) -> None:
    native = validate(*cnn, backend="native", arithmetic="onednn", iterations=30)
    onednn = validate(*cnn, backend="onednn", iterations=30)
    assert native.engine is None and not native.exact_expected
    assert native.outputs[0].mismatches == onednn.outputs[0].mismatches
    assert native.outputs[0].max_abs_diff == onednn.outputs[0].max_abs_diff


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
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["exact_expected"] is False
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
    assert not onednn.exact_expected and "both at ORT_ENABLE_ALL" in onednn.comparison
    assert onednn.outputs[0].mismatches == native.outputs[0].mismatches
    assert onednn.outputs[0].max_abs_diff == native.outputs[0].max_abs_diff
