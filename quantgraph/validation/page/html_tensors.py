"""The page's "Tensors along the graph" section: two charts along the original's node order and
the sortable table of every compared tensor (its data as JSON, drawn by html_page.js).

Built for large models: the charts bin neighbours past :data:`.svg.MAX_POINTS` (every point
keeps a tooltip naming its tensor, op, SQNR and, against a float model, the error introduced
there), and the table builds only the rows it shows."""

from __future__ import annotations

import json
import math
from html import escape
from importlib import resources

from . import svg
from .report_view import ReportView

SCRIPT = resources.files(__package__).joinpath("html_page.js").read_text()

COLUMNS = (
    ("index", "#"),
    ("name", "tensor"),
    ("node", "node"),
    ("op_type", "op"),
    ("dtype", "dtype"),
    ("mismatches", "mismatches"),
    ("elements", "elements"),
    ("max_abs_diff", "max abs diff"),
    ("max_ulp_diff", "max ulp diff"),  # not against a float model: ulps of a quantized value
    ("sqnr_db", "SQNR dB"),
)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "identical" if value > 0 else str(value)
    return f"{value:.4g}"


def _json_num(value: float | None) -> float | None:
    if value is None or math.isinf(value) or math.isnan(value):
        return None
    return float(f"{value:.4g}")


def _introduced(report: ReportView) -> dict[str, str]:
    """Per tensor, the error introduced there (float vs QDQ): its own Q/DQ, the node's own."""
    debug = report.debug
    if debug is None:
        return {}
    found: dict[str, str] = {}
    for t in debug.tensors:
        found[t.tensor] = f"its Q/DQ {_num(t.sqnr_db)} dB"
    for n in debug.nodes:
        own = f"node {n.node or n.output}'s weights {_num(n.sqnr_db)} dB"
        found[n.output] = f"{found[n.output]}, {own}" if n.output in found else own
    return found


def section(report: ReportView) -> str:
    found = report.intermediate
    if found is None:
        return ""
    order = found.order
    stats = report.error_stats
    differing = {c.name: c for c in found.differing}
    first = found.first_divergence
    mark = order.index(first.tensor) if first is not None and first.tensor in order else None
    what = "first tensor that differs" if report.float_reference else "first divergence"
    mark_label = "" if first is None else f"{what}: {first.node} ({first.op_type})"
    introduced = _introduced(report)
    tips = []
    for index, name in enumerate(order):
        node, op_type = found.producers.get(name, ("", ""))
        tensor_stats = stats.get(name)
        tip = f"{index}: {name} ({op_type or 'input'}"
        tip += f" {node})" if node else ")"
        if tensor_stats is not None:
            tip += f"; SQNR {_num(tensor_stats.sqnr_db)} dB"
        if report.float_reference:
            tip += f"; introduced: {introduced.get(name, 'none here')}"
        tips.append(tip)
    sqnr_line = [stats[n].sqnr_db if n in stats else None for n in order]
    max_abs = [stats[n].max_abs if n in stats else None for n in order]
    common = {
        "x_label": "tensor in node order",
        "names": order,
        "tips": tips,
        "mark": mark,
        "mark_label": mark_label,
    }
    plots = svg.along(
        svg.Series("SQNR dB", sqnr_line, "#3b6fb6"),
        title="SQNR per tensor along the original's node order (higher is closer)",
        top_band="identical",
        bottom_band="no signal",
        **common,  # type: ignore[arg-type]
    ) + svg.along(
        svg.Series("max abs diff", max_abs, "#c0392b", log=True),
        title="Largest absolute difference per tensor (log scale)",
        top_band="inf / NaN",
        bottom_band="0",
        worst_low=False,
        **common,  # type: ignore[arg-type]
    )
    summary = (
        f"<p>{found.tensors_compared:,} tensors compared by name, "
        f"<b>{found.tensors_differing:,}</b> differ.</p>"
    )
    if first is not None:
        summary += (
            f"<p id='first-divergence' class='bad'>{what.capitalize()}: node "
            f"<code>{escape(first.node)}</code> ({escape(first.op_type)}, now "
            f"{escape(first.rewritten_op_type)}), tensor <code>{escape(first.tensor)}</code>: "
            f"{first.mismatches:,} of {first.elements:,} elements differ, max abs diff "
            f"{_num(first.max_abs_diff)}.</p>"
        )
    # ulps of a float value against its quantized form count the float's bits, not an error
    columns = [c for c in COLUMNS if not (report.float_reference and c[0] == "max_ulp_diff")]
    data = []  # one array a row, in ``columns`` order, then whether it is the first divergence
    for index, name in enumerate(order):
        node, op_type = found.producers.get(name, ("", ""))
        compared = differing.get(name)
        tensor_stats = stats.get(name)
        row = {
            "index": index,
            "name": name,
            "node": node,
            "op_type": op_type,
            "dtype": compared.dtype if compared else (tensor_stats.dtype if tensor_stats else ""),
            "mismatches": compared.mismatches if compared else 0,
            "elements": compared.elements
            if compared
            else (tensor_stats.elements if tensor_stats else None),
            "max_abs_diff": _json_num(compared.max_abs_diff) if compared else 0,
            "max_ulp_diff": compared.max_ulp_diff if compared else 0,
            "sqnr_db": None if tensor_stats is None else _json_num(tensor_stats.sqnr_db),
        }
        first_mark = 1 if first is not None and name == first.tensor else 0
        data.append([row[k] for k, _ in columns] + [first_mark])
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    keys = json.dumps([k for k, _ in columns])
    head = "".join(f"<th data-key='{k}'>{escape(label)}</th>" for k, label in columns)
    checked = " checked" if report.exact_expected else ""
    return (
        "<h2>Tensors along the graph</h2>"
        + summary
        + f"<div id='intermediate-charts'>{plots}</div>"
        + f"<p><label><input type='checkbox' id='only-differing'{checked}> only differing "
        "tensors</label> &middot; <span id='tensor-count'></span> &middot; click a column "
        "to sort</p>"
        + f"<div class='scroll'><table id='tensors'><thead><tr>{head}</tr></thead>"
        + "<tbody></tbody></table></div>"
        + f"<script type='application/json' id='tensor-keys'>{keys}</script>"
        + f"<script type='application/json' id='tensor-data'>{payload}</script>"
        + f"<script>{SCRIPT}</script>"
        + "<noscript><p>The table needs JavaScript; the charts above do not.</p></noscript>"
    )
