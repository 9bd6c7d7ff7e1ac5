"""Writes docs/report-example.html: the HTML validation page of a bundled model.

``python -m tools.gen_report_example --write`` writes it (without ``--write``: prints it).
The page compares the bundled float transformer with its u8 QDQ form, tensor by tensor (where
quantization hurts), on the native backend with fixed seeds, so the page is reproducible; a
test (tests/test_html_report.py) fails while the committed page differs from what this prints.
"""

from __future__ import annotations

from pathlib import Path

from quantgraph.validation import validate
from quantgraph.validation.page.html_page import render as render_page

from .generated import ROOT, write_or_print

DOC_PATH = Path("docs/report-example.html")
ORIGINAL = Path("models/transformer_float.onnx")
QUANTIZED = Path("models/transformer_u8.onnx")


def render() -> str:
    report = validate(
        ROOT / ORIGINAL, ROOT / QUANTIZED, backend="native", iterations=3, intermediate=True
    )
    return render_page(report, original=str(ORIGINAL), rewritten=str(QUANTIZED))


def main(argv: list[str] | None = None) -> int:
    return write_or_print(render, DOC_PATH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
