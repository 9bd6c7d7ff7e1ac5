"""The validation page at scale (issue #35 item 4): a float chain of 1,000+ tensors and its QDQ
form (quantize_static), rendered by headless Chromium at an 800 px window: the page does not
overflow sideways, every plotted point has a tooltip, the ranking comes right after the
verdict, no ulp figure against a float model, every tensor's dtype is filled."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantgraph.validation import validate
from quantgraph.validation.compare.error_stats import ErrorStats
from quantgraph.validation.page.html_page import render
from tests.browser import dom

BLOCKS = 350  # MatMul, Add, Tanh each: 1,050 tensors


def _chain() -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    nodes, inits = [], []
    last = "x"
    for i in range(BLOCKS):
        w = (rng.standard_normal((8, 8)) * 0.5).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(w[0], f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            helper.make_node("Tanh", [f"a{i}"], [f"t{i}"], name=f"tanh{i}"),
        ]
        last = f"t{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [4, 8])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Calibration(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.it = iter([{"x": rng.standard_normal((4, 8)).astype(np.float32)}])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    folder = tmp_path_factory.mktemp("scale")
    float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
    onnx.save(_chain(), float_path)
    quantize_static(float_path, qdq_path, Calibration(), quant_format=QuantFormat.QDQ)
    report = validate(float_path, qdq_path, intermediate=True, iterations=1, atol=1e9)
    assert report.intermediate is not None and len(report.intermediate.order) > 1000
    html = render(report, original=str(float_path), rewritten=str(qdq_path))
    # the browser writes what it measured into the DOM that --dump-dom prints
    probe = (
        "<script>window.addEventListener('load',function(){var p=document.createElement('pre');"
        "p.id='probe';p.textContent=JSON.stringify({scroll:document.documentElement.scrollWidth,"
        "body:document.body.scrollWidth,view:window.innerWidth});document.body.appendChild(p)})"
        "</script></body>"
    )
    path = folder / "report.html"
    path.write_text(html.replace("</body>", probe))
    return path, html


def test_the_page_fits_800_px_and_every_point_has_a_title(page: tuple[Path, str]) -> None:
    path, html = page
    assert len(html.encode()) < 1_500_000, len(html.encode())
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    text, seconds = dom(path, "--window-size=800,900")
    assert seconds < 60
    found = re.search(r'<pre id="probe">(.*?)</pre>', text)
    assert found is not None
    sizes = json.loads(found.group(1).replace("&quot;", '"'))
    assert sizes["view"] == 800, sizes
    assert sizes["body"] <= sizes["view"] and sizes["scroll"] <= sizes["view"], sizes
    # every plotted point carries its figures (binned: 1,050 tensors, at most 300 points)
    charts = text.split('id="intermediate-charts"')[1].split("</div>")[0]
    circles = re.findall(r"<circle[^>]*>(.*?)</circle>", charts)
    assert 100 < len(circles) <= 2 * 300
    assert all(c.startswith("<title>") and "SQNR" in c and "introduced" in c for c in circles)
    assert all(re.search(r"\((MatMul|Add|Tanh|input)", c) for c in circles)


def test_the_ranking_comes_first_and_no_ulps_against_float(page: tuple[Path, str]) -> None:
    _, html = page
    assert html.index("Where error is introduced") < html.index("<h2>Run</h2>")
    assert html.index("id='verdict'") < html.index("Where error is introduced")
    shown = re.sub(r"<script>.*?</script>", "", html, flags=re.S)  # the table's script knows it
    assert "ulp" not in shown  # no column, no figure
    data = json.loads(html.split("id='tensor-data'>")[1].split("</script>")[0])
    keys = json.loads(html.split("id='tensor-keys'>")[1].split("</script>")[0])
    dtype = keys.index("dtype")
    assert len(data) > 1000 and all(row[dtype] == "float32" for row in data)


def test_step_histogram_reaches_the_largest_difference() -> None:
    stats = ErrorStats("t", step=0.5)
    expected = np.linspace(-1, 1, 100)
    stats.add(expected, expected - np.r_[np.zeros(90), np.full(10, 36 * 0.5)])  # 36 steps
    bins = stats.step_bins()
    assert bins is not None
    labels, counts = bins
    assert len(labels) <= 17 and sum(counts) == 100
    assert labels[-1].endswith("36") and counts[-1] == 10
    assert labels[0].startswith("0") and counts[0] == 90  # from 0: nothing was below
    same = ErrorStats("same", step=0.5)
    same.add(expected, expected)
    assert same.step_bins() == (["0"], [100])
