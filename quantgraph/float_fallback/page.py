"""The fallback search as one self-contained HTML page: what was kept, the Pareto front of
quality against the number kept and against latency (each point with its figures on hover),
every point on the way, and the ranking the search started from. No script, no network."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape
from typing import TYPE_CHECKING

from .search import Point

if TYPE_CHECKING:
    from .find import FallbackResult

FONT = 'font-family="system-ui, sans-serif" font-size="11"'
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; max-width: 980px; color: #1d232b }
h1 { font-size: 20px } h2 { font-size: 16px; margin-top: 28px }
table { border-collapse: collapse; font-size: 13px } td, th { padding: 3px 10px;
  border-bottom: 1px solid #e3e6ea; text-align: left } .num { text-align: right }
.verdict { padding: 8px 12px; border-radius: 6px; display: inline-block }
.ok { background: #e5f4ea } .no { background: #fbe9e7 }
svg { max-width: 100%; height: auto } .charts { display: flex; flex-wrap: wrap; gap: 16px }
"""


def scatter(
    points: Sequence[Point],
    x: Callable[[Point], float | None],
    *,
    title: str,
    x_label: str,
    y_label: str,
    chosen: Point,
    target: float,
    width: int = 460,
    height: int = 260,
) -> str:
    """Quality (y) against ``x`` of each point; the Pareto front along ``x`` (no point both
    smaller and better) joined by a line, the target dashed, the chosen point ringed; a
    <title> per point with its figures."""
    placed = [(p, float(v)) for p in points if (v := x(p)) is not None and math.isfinite(p.quality)]
    if not placed:
        return ""
    left, right, top, bottom = 48, 16, 30, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [v for _, v in placed]
    ys = [p.quality for p, _ in placed] + ([target] if math.isfinite(target) else [])
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)

    def px(value: float) -> float:
        return left + (value - x0) / (x1 - x0) * plot_w

    def py(value: float) -> float:
        return top + plot_h - (value - y0) / (y1 - y0) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img"><title>{escape(title)}</title>',
        f'<text x="{left}" y="16" {FONT} font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="{left + plot_w / 2}" y="{height - 6}" {FONT} text-anchor="middle">'
        f"{escape(x_label)}</text>",
        f'<text x="12" y="{top + plot_h / 2}" {FONT} text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2})">{escape(y_label)}</text>',
    ]
    for value, anchor, y in ((x0, "start", top + plot_h + 14), (x1, "end", top + plot_h + 14)):
        parts.append(
            f'<text x="{px(value):.1f}" y="{y}" {FONT} text-anchor="{anchor}">{value:g}</text>'
        )
    for value in (y0, y1):
        parts.append(
            f'<text x="{left - 4}" y="{py(value) + 4:.1f}" {FONT} text-anchor="end">'
            f"{value:.1f}</text>"
        )
    if math.isfinite(target) and y0 <= target <= y1:
        parts.append(
            f'<line x1="{left}" y1="{py(target):.1f}" x2="{left + plot_w}" y2="{py(target):.1f}" '
            'stroke="#c0392b" stroke-dasharray="4 3"><title>target '
            f"{target:g}</title></line>"
        )
    front: list[Point] = []
    line: list[tuple[float, float]] = []
    for point, value in sorted(placed, key=lambda pv: (pv[1], -pv[0].quality)):
        if not line or point.quality > line[-1][1]:
            front.append(point)
            line.append((value, point.quality))
    if len(line) > 1:
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in line)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#3b6fb6"/>')
    for point, value in placed:
        ring = ' stroke="#111" stroke-width="2"' if point.kept == chosen.kept else ""
        fill = "#3b6fb6" if point in front else "#9fb4d3"
        tip = _tip(point)
        parts.append(
            f'<circle cx="{px(value):.1f}" cy="{py(point.quality):.1f}" r="5" '
            f'fill="{fill}"{ring}><title>{escape(tip)}</title></circle>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _tip(point: Point) -> str:
    kept = ", ".join(sorted(point.kept)) or "nothing (the quantized model)"
    ms = "" if point.ms is None else f"; {point.ms:.3f} ms"
    return f"{point.quality:.2f}; {len(point.kept)} kept{ms}: {kept}"


def render(result: FallbackResult, float_label: str, quantized_label: str) -> str:
    search = result.search
    front = search.pareto()
    verdict = (
        f"reached: {search.best.quality:.2f} with {len(search.kept)} kept in float"
        if search.reached
        else f"not reached: the best found is {search.best.quality:.2f} "
        f"({len(search.best.kept)} kept in float)"
    )
    charts = [
        scatter(search.points, lambda p: float(len(p.kept)), title="quality against kept count",
                x_label="kept in float", y_label=result.metric.split(" (")[0],
                chosen=search.best, target=search.target.value),
        scatter(search.points, lambda p: p.ms, title="quality against latency (fusion auto)",
                x_label="ms per run", y_label=result.metric.split(" (")[0],
                chosen=search.best, target=search.target.value),
    ]  # fmt: skip
    rows = "".join(
        f"<tr><td class=num>{i}</td><td>{escape(', '.join(sorted(p.kept)) or '(none)')}</td>"
        f"<td class=num>{len(p.kept)}</td><td class=num>{p.quality:.3f}</td>"
        f"<td class=num>{'' if p.ms is None else f'{p.ms:.3f}'}</td>"
        f"<td>{'front' if p in front else ''}</td></tr>"
        for i, p in enumerate(search.points)
    )
    ranking = "".join(
        f"<tr><td>{escape(r.candidate.label)}</td><td class=num>"
        f"{'inf' if math.isinf(r.sqnr_db) else f'{r.sqnr_db:.2f}'}</td>"
        f"<td>{'kept' if r.candidate.name in search.kept else ''}</td></tr>"
        for r in result.ranking
    )
    kept = "".join(f"<li>{escape(c.label)}</li>" for c in result.kept) or "<li>nothing</li>"
    notes = "".join(f"<p>{escape(n)}</p>" for n in result.notes)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>quantgraph fallback: {escape(quantized_label)}</title><style>{STYLE}</style>"
        f"</head><body><h1>Float fallback of {escape(quantized_label)}</h1>"
        f"<p>against {escape(float_label)}; target {escape(result.metric)} "
        f"{'&ge;' if search.target.higher_is_better else '&le;'} {search.target.value:g}; "
        f"{search.evaluations} evaluations ({escape(result.runner)})</p>"
        f"<p class='verdict {'ok' if search.reached else 'no'}'>{escape(verdict)}</p>{notes}"
        f"<h2>Kept in float</h2><ul>{kept}</ul>"
        f"<h2>What each point costs</h2><div class=charts>{''.join(charts)}</div>"
        "<h2>Every point</h2><table><tr><th>#</th><th>kept in float</th><th>count</th>"
        f"<th>quality</th><th>ms (fusion auto)</th><th></th></tr>{rows}</table>"
        "<h2>Candidates, worst introduced error first</h2><table><tr><th>candidate</th>"
        f"<th>SQNR introduced (dB)</th><th></th></tr>{ranking}</table></body></html>"
    )
