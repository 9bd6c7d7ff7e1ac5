"""Inline SVG charts for the HTML report: bars and a line along a sequence, nothing else.

Drawn in Python so the page needs no script and no network to show them; each chart is one
``<svg>`` element with a ``<title>`` per bar or point group for the exact figures on hover.
They know nothing of models or reports: labels and numbers in, markup out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = 'font-family="system-ui, sans-serif" font-size="11"'
MAX_POINTS = 300  # points along a chart before neighbours share a bin (900 px: 3 px apart)


def bars(
    labels: Sequence[str],
    counts: Sequence[int],
    *,
    title: str,
    tips: Sequence[str] | None = None,
    color: str = "#3b6fb6",
    highlight: int | None = None,
    width: int = 420,
    height: int = 170,
) -> str:
    """A bar per label on a log10(1 + count) axis (counts span 1 to millions)."""
    left, right, top, bottom = 34, 22, 34, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((math.log10(1 + c) for c in counts), default=0.0) or 1.0
    slot = plot_w / max(1, len(counts))
    parts = [_open(width, height, title)]
    parts.append(f'<text x="{left}" y="14" {FONT} font-weight="600">{escape(title)}</text>')
    parts.append(_axis_line(left, top + plot_h, left + plot_w, top + plot_h))
    for index, (label, count) in enumerate(zip(labels, counts, strict=True)):
        tip = label if tips is None else tips[index]
        x = left + index * slot
        bar_h = plot_h * math.log10(1 + count) / peak
        fill = "#c0392b" if index == highlight and count else color
        parts.append(
            f'<rect class="bar" x="{x + 1.5:.1f}" y="{top + plot_h - bar_h:.1f}" '
            f'width="{max(1.0, slot - 3):.1f}" height="{bar_h:.1f}" fill="{fill}">'
            f"<title>{escape(tip)}: {count:,}</title></rect>"
        )
        if count:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{top + plot_h - bar_h - 3:.1f}" '
                f'text-anchor="middle" {FONT} font-size="9">{_short(count)}</text>'
            )
        parts.append(
            f'<text transform="translate({x + slot / 2:.1f},{top + plot_h + 8}) rotate(35)" '
            f'{FONT} font-size="9">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Series:
    """Values along the x positions 0..n-1; None where the value is undefined (not drawn),
    +inf / -inf drawn on a band above / below the axis range and named by ``top_band`` etc."""

    name: str
    values: Sequence[float | None]
    color: str
    log: bool = False  # log10 axis; values <= 0 go to the bottom band


def along(
    series: Series,
    *,
    title: str,
    x_label: str,
    names: Sequence[str],
    tips: Sequence[str] | None = None,
    top_band: str,
    bottom_band: str,
    mark: int | None = None,
    mark_label: str = "",
    worst_low: bool = True,
    width: int = 900,
    height: int = 220,
) -> str:
    """A line of one series along a sequence (tensors in node order), with a vertical mark.

    Every drawn point has a ``<title>`` (``tips[i]``, else the name, then the value). Past
    :data:`MAX_POINTS` positions, consecutive ones share a bin: a bar spans the bin's range and
    the point is its worst value (``worst_low``: the lowest, else the highest), titled with the
    bin's extent and that position's tip, so a thousand tensors stay a readable chart."""
    left, right, top, bottom = 56, 12, 34, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    band = 12.0
    finite = [_scaled(v, series.log) for v in series.values]
    shown = [v for v in finite if v is not None and math.isfinite(v)]
    low, high = (min(shown), max(shown)) if shown else (0.0, 1.0)
    if high - low < 1e-9:
        low, high = low - 1.0, high + 1.0
    n = len(series.values)

    def x_at(i: int) -> float:
        return left + (plot_w * (i + 0.5) / n if n else 0.0)

    def y_at(v: float) -> float:
        if v == math.inf:
            return top + band / 2
        if v == -math.inf:
            return top + plot_h - band / 2
        inner = plot_h - 2 * band
        return top + band + inner * (1 - (v - low) / (high - low))

    parts = [_open(width, height, title)]
    parts.append(f'<text x="{left}" y="14" {FONT} font-weight="600">{escape(title)}</text>')
    parts.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{band}" fill="#eef6ee"/>'
        f'<rect x="{left}" y="{top + plot_h - band}" width="{plot_w}" height="{band}" '
        f'fill="#f6eeee"/>'
        f'<text x="{left + 4}" y="{top + 9}" {FONT} font-size="9" fill="#555">'
        f"{escape(top_band)}</text>"
        f'<text x="{left + 4}" y="{top + plot_h - 3}" {FONT} font-size="9" fill="#555">'
        f"{escape(bottom_band)}</text>"
    )
    for fraction in (0.0, 0.5, 1.0):
        value = low + (high - low) * fraction
        y = y_at(value)
        shown_value = f"1e{value:.0f}" if series.log else f"{value:.3g}"
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
            f'stroke="#ddd"/><text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" {FONT} '
            f'font-size="9">{shown_value}</text>'
        )
    parts.append(_axis_line(left, top + plot_h, left + plot_w, top + plot_h))
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" {FONT}>'
        f"{escape(x_label)} (0 .. {max(0, n - 1)})</text>"
    )
    if mark is not None and 0 <= mark < n:
        x = x_at(mark)
        anchor = "end" if x > width / 2 else "start"
        parts.append(
            f'<line class="mark" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
            f'stroke="#c0392b" stroke-dasharray="4 3"/><text x="{x + 4:.1f}" y="{top - 4}" '
            f'{FONT} fill="#c0392b" text-anchor="{anchor}">{escape(mark_label)}</text>'
        )
    size = max(1, math.ceil(n / MAX_POINTS))
    points, dots = [], []
    for start in range(0, n, size):
        members = [i for i in range(start, min(n, start + size)) if finite[i] is not None]
        if not members:
            continue
        pick = min if worst_low else max
        worst = pick(members, key=lambda i: _order_key(finite[i]))
        values = [finite[i] for i in members]
        x, y = x_at(worst), y_at(_given(finite[worst]))
        points.append(f"{x:.1f},{y:.1f}")
        tip = f"{worst}: {names[worst]}" if tips is None else tips[worst]
        tip += f": {_figure(series.values[worst])}"
        if size > 1:
            x = left + plot_w * (start + min(size, n - start) / 2) / n
            points[-1] = f"{x:.1f},{y:.1f}"
            ys = [y_at(_given(v)) for v in values]
            tip = f"tensors {start}..{min(n, start + size) - 1}, worst {tip}"
            dots.append(
                f'<line x1="{x:.1f}" y1="{min(ys):.1f}" x2="{x:.1f}" y2="{max(ys):.1f}" '
                f'stroke="{series.color}" stroke-opacity="0.35" stroke-width="2"/>'
            )
        dots.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="{series.color}">'
            f"<title>{escape(tip)}</title></circle>"
        )
    if points:
        parts.append(
            f'<polyline class="series" fill="none" stroke="{series.color}" stroke-width="1.5" '
            f'points="{" ".join(points)}"><title>{escape(series.name)}</title></polyline>'
        )
    parts.extend(dots)
    parts.append("</svg>")
    return "".join(parts)


def _given(value: float | None) -> float:
    assert value is not None  # drawn points have a value
    return value


def _order_key(value: float | None) -> float:
    return -math.inf if value is None else value


def _scaled(value: float | None, log: bool) -> float | None:
    if value is None or math.isnan(value):
        return None
    if not log:
        return value
    if value <= 0:
        return -math.inf
    return math.inf if math.isinf(value) else math.log10(value)


def _open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(title)}">'
    )


def _axis_line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#888"/>'


def _short(count: int) -> str:
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if count >= size:
            return f"{count / size:.3g}{suffix}"
    return str(count)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
