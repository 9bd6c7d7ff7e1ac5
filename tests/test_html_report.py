"""The HTML validation page (issue #25): what it holds, drawn in a real headless browser.

The statistics behind it are held to numpy and to onnxruntime run independently; the page is
checked as a person sees it: Chromium renders it (scripts run), the DOM holds the verdict, the
named outputs, the first divergence and a drawn table, and a screenshot is not blank.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import quantgraph
from quantgraph.cli import main
from quantgraph.ir.model_files import load_model
from quantgraph.reference.compare import TensorComparison
from quantgraph.validation import validate
from quantgraph.validation.compare.error_stats import ErrorStats, quantization_steps
from quantgraph.validation.page.html_page import render
from quantgraph.validation.report import Divergence, IntermediateReport, ValidationReport
from tests.browser import dom, screenshot

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"

floats = hnp.arrays(
    np.float32,
    st.integers(1, 64),
    elements=st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False),
)


# -- the statistics ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(floats, st.integers(0, 2**31 - 1), st.sampled_from([None, 0.05, 1.0]))
def test_error_stats_match_numpy(expected: np.ndarray, seed: int, step: float | None) -> None:
    noise = np.random.default_rng(seed).normal(0, 0.1, expected.shape).astype(np.float32)
    actual = np.where(np.arange(expected.size) % 3 == 0, expected, expected + noise)
    half = expected.size // 2
    stats = ErrorStats("t", step=step)
    stats.add(expected[:half], actual[:half])  # two samples merge into one distribution
    stats.add(expected[half:], actual[half:])

    e, a = expected.astype(np.float64), actual.astype(np.float64)
    diff = e - a
    assert stats.elements == expected.size
    assert sum(stats.abs_histogram) == expected.size
    assert stats.abs_histogram[0] == int(np.sum(diff == 0))
    assert stats.max_abs == pytest.approx(float(np.max(np.abs(diff))))
    noise_energy, signal = float(np.sum(diff**2)), float(np.sum(e**2))
    if noise_energy == 0:
        assert stats.sqnr_db == math.inf
    elif signal > 0:
        assert stats.sqnr_db == pytest.approx(10 * math.log10(signal / noise_energy), rel=1e-9)
    if step is None:
        assert stats.step_histogram is None
    else:
        assert stats.step_histogram is not None
        assert sum(stats.step_histogram) == expected.size
        steps = np.clip(np.rint(diff / step), -4, 4)
        assert stats.step_histogram[4] == int(np.sum(steps == 0))


def test_error_stats_count_nan_and_infinity_apart() -> None:
    stats = ErrorStats("t")
    stats.add(np.array([np.nan, np.inf, 1.0, np.nan]), np.array([np.nan, 5.0, 1.0, 2.0]))
    assert stats.nonfinite == 2  # inf vs 5 and NaN vs 2; NaN vs NaN is no difference
    assert stats.abs_histogram[0] == 2
    assert stats.sqnr_db == math.inf  # the finite pairs agree


def test_steps_come_from_the_graph() -> None:
    model = load_model(MODELS / "cnn_u8.onnx")
    steps = quantization_steps(model.graph)
    output_scale = next(
        float(onnx.numpy_helper.to_array(i))
        for i in onnx.load(MODELS / "cnn_u8.onnx").graph.initializer
        if i.name == "output_scale"
    )
    assert steps["output"] == pytest.approx(output_scale)
    assert steps["output_QuantizeLinear_Output"] == 1.0  # an integer tensor: one step is 1
    assert "conv1_w_DequantizeLinear_Output" not in steps  # per-channel: no single step


# -- float vs quantized: where quantization hurts --------------------------------------------


def test_float_vs_quantized_pairs_each_activation_with_what_the_next_layer_reads() -> None:
    report = validate(
        MODELS / "cnn_float.onnx", MODELS / "cnn_u8.onnx", intermediate=True, atol=1.0
    )
    assert report.float_reference and not report.exact_expected
    assert "quantization error" in report.comparison
    assert report.agree  # judged by the tolerance asked for
    assert report.intermediate is not None and "relu1" in report.intermediate.order

    # Independently: onnxruntime runs both models; the float Relu's output is paired with the
    # dequantized value after the Q/DQ pair (quantize_static folds the Relu into the clamp).
    inputs = quantgraph.validation.make_inputs(MODELS / "cnn_float.onnx", seed=0)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    float_model = onnx.load(MODELS / "cnn_float.onnx")
    float_model.graph.output.append(onnx.helper.make_value_info("relu1", onnx.TypeProto()))
    float_model.graph.output[-1].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    quant_model = onnx.load(MODELS / "cnn_u8.onnx")
    dq = next(n for n in quant_model.graph.node if n.name == "relu1_DequantizeLinear")
    quant_model.graph.output.append(onnx.helper.make_value_info(dq.output[0], onnx.TypeProto()))
    quant_model.graph.output[-1].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    want = ort.InferenceSession(float_model.SerializeToString(), options).run(["relu1"], inputs)
    got = ort.InferenceSession(quant_model.SerializeToString(), options).run([dq.output[0]], inputs)
    e, a = want[0].astype(np.float64), got[0].astype(np.float64)
    sqnr = 10 * math.log10(float(np.sum(e**2)) / float(np.sum((e - a) ** 2)))
    assert report.error_stats["relu1"].sqnr_db == pytest.approx(sqnr, rel=1e-9)
    assert report.error_stats["relu1"].max_abs == pytest.approx(float(np.max(np.abs(e - a))))


# -- the page --------------------------------------------------------------------------------


def _edited(scale: float) -> onnx.ModelProto:
    """The bundled CNN converted (static), with relu2's quantize scale changed."""
    rewritten = quantgraph.convert(MODELS / "cnn_u8.onnx", static=True).proto
    node = next(n for n in rewritten.graph.node if n.name == "relu2_QuantizeLinear")
    next(a for a in node.attribute if a.name == "scales").floats[:] = [scale]
    return rewritten


def test_cli_writes_a_page_for_a_disagreement(tmp_path: Path) -> None:
    rewritten = tmp_path / "edited.onnx"
    onnx.save(_edited(0.5), rewritten)
    page = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        [
            "validate",
            str(MODELS / "cnn_u8.onnx"),
            str(rewritten),
            "--intermediate",
            "--iterations",
            "2",
            "--report",
            str(page),
        ],
    )
    assert result.exit_code == 1, result.output  # they disagree, and the page says where
    assert f"wrote {page}" in result.output
    html = page.read_text()
    assert "the models DISAGREE" in html and "relu2_QuantizeLinear" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing fetched
    assert "https://" not in html
    assert {p.name for p in tmp_path.iterdir()} == {"edited.onnx", "report.html"}  # no temp

    text, seconds = dom(page)
    assert "the models DISAGREE" in text
    assert 'id="first-divergence"' in text and "relu2_QuantizeLinear" in text
    assert text.count("<polyline") == 2  # SQNR and max abs along the graph
    assert 'class="bar"' in text  # histograms of the output's differences
    rows = _tensor_rows(text)
    assert rows.count("<tr") >= 1 and "relu2_QuantizeLinear" in rows  # built by the script
    assert seconds < 30

    png = screenshot(page, tmp_path / "report.png")
    _assert_drawn(png)


def test_convert_validate_report_shows_the_conversion(tmp_path: Path) -> None:
    page = tmp_path / "convert.html"
    out = tmp_path / "cnn_qg.onnx"
    result = CliRunner().invoke(
        main,
        ["convert", str(MODELS / "cnn_u8.onnx"), str(out), "--validate", "--report", str(page)],
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "the models agree" in html and "<h2>Conversion</h2>" in html
    assert "conv1_b_DequantizeLinear" in html and "int32 input (a bias)" in html
    text, _ = dom(page)
    assert "the models agree" in text and "output" in text


def test_report_needs_validate_and_never_replaces_without_force(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "o.onnx"
    result = runner.invoke(
        main, ["convert", str(MODELS / "cnn_u8.onnx"), str(out), "--report", "r.html"]
    )
    assert result.exit_code == 2 and "--report applies only with --validate" in result.output
    page = tmp_path / "r.html"
    page.write_text("mine")
    result = runner.invoke(
        main,
        [
            "validate",
            str(MODELS / "cnn_u8.onnx"),
            str(MODELS / "cnn_u8.onnx"),
            "--report",
            str(page),
        ],
    )
    assert result.exit_code == 2 and "already exists" in result.output
    assert page.read_text() == "mine"


def _tensor_rows(text: str) -> str:
    """The rows the page's script built into the tensor table."""
    return text.split('id="tensors"')[1].split("<tbody>")[1].split("</tbody>")[0]


def _assert_drawn(png: Path) -> None:
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB")).astype(np.int32)
    not_white = np.any(image < 235, axis=2)
    assert not_white.mean() > 0.03, "the page looks blank"
    # the charts' blue (#3b6fb6) and the verdict's red (#c0392b) are on screen
    for rgb in ((0x3B, 0x6F, 0xB6), (0xC0, 0x39, 0x2B)):
        close = np.all(np.abs(image - np.array(rgb)) < 24, axis=2)
        assert close.sum() > 50, f"no pixels of colour {rgb}"


def _synthetic(tensors: int) -> ValidationReport:
    """A report with ``tensors`` intermediate tensors, as a large model gives."""
    rng = np.random.default_rng(0)
    names = [f"block{i // 12}/op{i % 12}/output_{i}" for i in range(tensors)]
    stats = {}
    differing = []
    for i, name in enumerate(names):
        s = ErrorStats(name, step=0.01)
        e = rng.normal(size=64)
        s.add(e, e + rng.normal(0, 1e-3 * (1 + i / 100), 64))
        stats[name] = s
        differing.append(TensorComparison(name, "float32", [64], 64, 64, s.max_abs, 10 + i))
    output = TensorComparison("logits", "float32", [1, 1000], 1000, 3, 0.01, 5)
    stats["logits"] = ErrorStats("logits", step=0.01)
    stats["logits"].add(np.ones(1000), np.ones(1000) + 0.01)
    first = Divergence("node0", "Conv", "Conv", names[0], 0.1, 3, 64, 64)
    return ValidationReport(
        comparison="synthetic",
        backend="native",
        outputs=[output],
        inputs={"x": {"dtype": "float32", "shape": [1, 3, 224, 224], "why": "test"}},
        seed=0,
        intermediate=IntermediateReport(
            tensors,
            tensors,
            first,
            differing,
            names,
            {n: (f"node{i}", "Conv") for i, n in enumerate(names)},
        ),
        error_stats=stats,
    )


def test_a_page_with_thousands_of_tensors_stays_small_and_opens_quickly(tmp_path: Path) -> None:
    page = tmp_path / "large.html"
    report = _synthetic(5000)
    html = render(report, original="big.onnx", rewritten="big_qg.onnx")
    # Clicking a column sorts: click "SQNR dB" (ascending), the worst tensor comes first.
    page.write_text(
        html.replace(
            "</body>",
            "<script>document.querySelector(\"#tensors th[data-key='sqnr_db']\").click()"
            "</script></body>",
        )
    )
    assert len(html.encode()) < 800_000  # ~570 kB: rows are arrays, numbers 4 digits
    text, seconds = dom(page)
    assert seconds < 20
    body = _tensor_rows(text)
    assert body.count("<tr") == 500  # the first 500 rows of the order are built
    assert "5000 tensors (first 500 shown)" in text
    worst = min(report.error_stats.values(), key=lambda s: s.sqnr_db).name
    assert body.split("</tr>")[0].count(f"<td>{worst}</td>") == 1  # worst SQNR first


def test_docs_example_is_current() -> None:
    from tools import gen_report_example as example

    page = ROOT / example.DOC_PATH
    assert page.exists(), "run: python -m tools.gen_report_example --write"
    assert page.read_text() == example.render(), (
        "docs/report-example.html is out of date: python -m tools.gen_report_example --write"
    )
