"""A validation report as one self-contained HTML page (``validate --report FILE.html``).

Everything is inline: CSS, SVG charts drawn here (:mod:`.svg`), the tensor table's data as
JSON and the few lines of script that sort and filter it. The page fetches nothing, so it opens
offline, from a mail attachment or a CI artifact. Numbers are printed with four significant
digits, and nothing in the page depends on the time or the machine beyond what the run found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from ...reference.compare import TensorComparison
from ..compare.error_stats import ErrorStats, abs_bin_labels, abs_bin_ranges
from . import svg
from .html_debug import section as debug_section
from .html_generation import section as generation_section
from .html_tensors import section as tensors_section
from .report_view import ReportView

# The page's style and its one script live beside this module (package data).
CSS = resources.files(__package__).joinpath("html_page.css").read_text()


def render(
    report: ReportView,
    *,
    original: str,
    rewritten: str,
    conversion: Any = None,
    fusion_plan: Any = None,
) -> str:
    """The whole page. ``conversion``: the RewriteReport of ``convert`` (what was rewritten and
    what was left and why); ``fusion_plan``: an object with ``to_dict()`` when fusion was used."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>quantgraph validation: {escape(rewritten)}</title><style>{CSS}</style></head>",
        "<body>",
        _verdict(report),
        debug_section(report.debug, original, rewritten),  # where it hurts: right after
        _header(report, original, rewritten),
        _inputs(report),
        _outputs(report),
        _as_run(report),
        generation_section(report.generation),
        _optimized(report),
        _onnx_arithmetic(report),
        tensors_section(report),
        _conversion(conversion),
        _fusion(fusion_plan if fusion_plan is not None else report.fusion_plan),
        "<p class='muted'>Written by quantgraph. Every figure is also in "
        "<code>quantgraph validate --json</code>.</p></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _verdict(report: ReportView) -> str:
    agree = report.agree
    verdict = "the models agree" if agree else "the models DISAGREE"
    return (
        "<h1>quantgraph validation report</h1>"
        f"<p><span id='verdict' class='verdict {'agree' if agree else 'disagree'}'>"
        f"{escape(verdict)}</span></p>"
    )


def _header(report: ReportView, original: str, rewritten: str) -> str:
    atol, rtol = report.tolerance
    like = report.like_reference
    rows = [
        ("original", original),
        ("compared with", rewritten),
        ("comparison", report.comparison),
        ("verdict rule", _rule(report)),
        ("backend", report.backend),
        ("arithmetic", report.arithmetic),
        ("oneDNN", report.engine or "not used"),
        ("fusion", report.fusion if report.fusion != "none" else "none (each spec op alone)"),
        *([] if like is None else [("reference", like.describe())]),
        ("tolerance", _tolerance(report, atol, rtol) if report.judged_by_tolerance else "none"),
        ("samples", _samples(report)),
    ]
    return "<h2>Run</h2>" + _table(
        ("", ""), [(f"<b>{escape(k)}</b>", escape(str(v))) for k, v in rows], head=False
    )


def _tolerance(report: ReportView, atol: float, rtol: float) -> str:
    if report.exact_expected:
        return "exact"
    if report.bound is not None:
        return f"a bound the model gives: {report.bound.rule()}"
    return f"atol={atol:g} rtol={rtol:g}"


def _rule(report: ReportView) -> str:
    few = f"; {report.few_values}" if report.few_values else ""
    return report.criterion + few


def _samples(report: ReportView) -> str:
    if report.cases:  # a decoder: each sample named by its step
        return f"{report.samples}: " + "; ".join(report.sample_names)
    return f"{report.samples}" + ("" if report.seed is None else f", seed {report.seed}")


def _inputs(report: ReportView) -> str:
    rows = []
    for case, inputs in (report.cases or {"": report.inputs}).items():
        for name, spec in inputs.items():
            dims: Any = spec.get("shape", [])
            shape = "x".join(map(str, dims)) or "scalar"
            span: Any = spec.get("range")
            shown = "" if not span else f"[{_num(span[0])}, {_num(span[1])}]"
            why = spec.get("why") or spec.get("from", "")
            named = f"{case}: {name}" if case else name
            rows.append(
                (escape(named), escape(str(spec.get("dtype", ""))), shape, shown, escape(str(why)))
            )
    return "<h2>Inputs</h2>" + _table(("input", "dtype", "shape", "range", "why"), rows)


def _outputs(report: ReportView) -> str:
    rows = []
    charts = []
    ulps = not report.float_reference  # a float's ulps against its quantized form mean nothing
    for output in report.outputs:
        stats = report.error_stats.get(output.name)
        good = report.output_agrees(output)
        judge = "tolerance" if report.bound is None else "bound"
        within = f"within {judge}" if report.min_sqnr is None else "meets the criterion"
        verdict = "identical" if output.agree else (within if good else "DIFFERENT")
        rows.append(
            (
                escape(output.name),
                escape(output.dtype),
                f"<span class='{'ok' if good else 'bad'}'>{verdict}</span>",
                f"{output.mismatches:,} / {output.elements:,}",
                _num(output.max_abs_diff),
                *(() if report.bound is None else _bound_cells(report, output.name)),
                *((str(output.max_ulp_diff),) if ulps else ()),
                "&ndash;" if stats is None else _sqnr(stats),
            )
        )
        if stats is not None and (stats.noise or stats.nonfinite):  # nothing to draw if equal
            charts.append(_histograms(stats))
    head: tuple[str, ...] = ("output", "dtype", "verdict", "mismatches", "max abs diff")
    head += () if report.bound is None else ("bound", "spread")
    head += ("max ulp diff", "SQNR dB") if ulps else ("SQNR dB",)
    return (
        "<h2>Outputs</h2>"
        + _table(head, rows, numeric=tuple(range(3, len(head))))
        + "<div class='charts' id='output-charts'>"
        + "".join(charts)
        + "</div>"
    )


def _histograms(stats: ErrorStats) -> str:
    charts = [
        svg.bars(
            abs_bin_labels(),
            stats.abs_histogram,
            title=f"{stats.name}: |expected - actual| by decade (own units)",
            tips=abs_bin_ranges(),
        )
    ]
    steps = stats.step_bins()
    if steps is not None and stats.step is not None:
        charts.append(
            svg.bars(
                steps[0],
                steps[1],
                title=f"{stats.name}: difference in steps of {stats.step:.4g}",
                tips=[f"{label} steps" for label in steps[0]],
                color="#7a5cb3",
            )
        )
    return "".join(charts)


def _bound_cells(report: ReportView, name: str) -> tuple[str, str]:
    assert report.bound is not None
    return _num(report.bound.atol(name)), _num(report.bound.spread.get(name, 0.0))


def _as_run(report: ReportView) -> str:
    like = report.like_reference
    if like is None:
        return ""
    return _informational(
        "The original as onnxruntime runs it (informational)",
        f"The verdict compares {like.describe()}: {like.why()}. This is how far "
        f"{like.original_note()} is, judged as the verdict is.",
        report.as_run,
    )


def _optimized(report: ReportView) -> str:
    return _informational(
        "Original at ORT_ENABLE_ALL (informational)",
        "onnxruntime's fused integer kernels round differently; this comparison is not part of "
        "the verdict.",
        report.optimized,
    )


def _onnx_arithmetic(report: ReportView) -> str:
    return _informational(
        "Original in ONNX's arithmetic (informational)",
        "The verdict compares the original evaluated in oneDNN's arithmetic; this is how far the "
        "original as onnxruntime runs it is, in its own rounding: ties land a step apart.",
        report.onnx_arithmetic,
        report.onnx_arithmetic_steps,
    )


def _informational(
    title: str,
    why: str,
    comparisons: list[TensorComparison],
    steps: dict[str, float | None] | None = None,
) -> str:
    if not comparisons:
        return ""
    rows: list[tuple[str, ...]] = [
        (
            escape(o.name),
            "within tolerance" if o.within_tolerance else "<span class='bad'>beyond</span>",
            f"{o.mismatches:,} / {o.elements:,}",
            _num(o.max_abs_diff),
            *(() if steps is None else (_steps(steps.get(o.name)),)),
        )
        for o in comparisons
    ]
    head: tuple[str, ...] = ("output", "tolerance", "mismatches", "max abs diff")
    if steps is not None:
        head += ("max diff in steps",)
    return f"<h2>{escape(title)}</h2><p class='muted'>{escape(why)}</p>" + _table(head, rows)


def _conversion(conversion: Any) -> str:
    if conversion is None:
        return ""
    counts = ", ".join(f"{n} {op}" for op, n in conversion.converted.items()) or "nothing"
    emitted = ", ".join(f"{n} {op}" for op, n in conversion.emitted.items()) or "nothing"
    rows = [
        (
            escape(n.node or "<unnamed>"),
            escape(n.graph or "main"),
            escape(n.op_type),
            escape(n.reason),
        )
        for n in conversion.skipped
    ]
    left = (
        _table(("node", "graph", "op", "why it was left"), rows)
        if rows
        else "<p>Every Q/DQ node was rewritten.</p>"
    )
    return (
        f"<h2>Conversion</h2><p>Rewrote {sum(conversion.converted.values()):,} node(s): "
        f"{escape(counts)}; emitted {escape(emitted)}.</p>" + left
    )


def _fusion(plan: Any) -> str:
    if plan is None:
        return ""
    text = json.dumps(plan.to_dict() if hasattr(plan, "to_dict") else plan, indent=1)
    return f"<h2>Fusion plan</h2><pre class='wide'>{escape(text)}</pre>"


def _table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    numeric: Sequence[int] = (),
    head: bool = True,
) -> str:
    out = ["<div class='wide'><table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in columns) + "</tr>")
    for row in rows:
        cells = "".join(
            f"<td class='num'>{cell}</td>" if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</table></div>")
    return "".join(out)


def _sqnr(stats: ErrorStats) -> str:
    value = stats.sqnr_db
    return "identical" if value == math.inf else _num(value)


def _num(value: float) -> str:
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return str(value)
    return f"{value:.4g}"


def _steps(value: float | None) -> str:
    return "no single step" if value is None else _num(value)


def write_page(
    path: Path,
    report: ReportView,
    original: Path | str,
    rewritten: Path | str,
    *,
    force: bool,
    conversion: Any = None,
    protect: tuple[Path, ...] = (),
) -> Path:
    """Write the page of ``report`` to ``path`` by quantgraph.ir.output_files's rules (never over
    either model nor a file of ``protect``; replaced only with ``force``)."""
    from ...ir.model_files import write_file

    page = render(report, original=str(original), rewritten=str(rewritten), conversion=conversion)
    models = (*(Path(m) for m in (original, rewritten)), *protect)  # never replaces a model
    return write_file(path, page.encode("utf-8"), force=force, protect=models, role="--report")
