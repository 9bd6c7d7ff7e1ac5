"""The page's "Where error is introduced" section (float original vs its QDQ form): the ranking
of :mod:`.debugger` first, then every quantized tensor's parameters and what they did to the
float values, then the keep-in-float list of --sensitivity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from .debugger import QuantizationDebug


def _n(value: float | None) -> str:
    if value is None:
        return ""
    if math.isinf(value) or math.isnan(value):
        return "identical" if value == math.inf else str(value)
    return f"{value:.4g}"


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    top = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<div class='wide'><table>{top}{body}</table></div>"


def section(debug: QuantizationDebug | None) -> str:
    if debug is None:
        return ""
    parts = ["<h2>Where error is introduced</h2>"]
    headline = debug.headline()
    if headline:
        parts.append(f"<p><b>{escape(headline)}</b></p>")
    parts.append(
        "<p class='muted'>Each place fed the float model's values, so nothing upstream is "
        "inherited: a tensor's row is its own Q/DQ (DQ(Q(x)) vs x), a node's row its DQ'd "
        "weights (the node fed float inputs vs the float output, both after the output's "
        "Q/DQ). Lowest SQNR first. Reasons: clipping (over 1% saturates), coarse scale (under "
        "16 steps span the values), rounding (over 25% become 0).</p>"
    )
    parts.append(
        _table(
            ("#", "kind", "name", "op", "SQNR dB", "reason"),
            [
                (str(i), r.kind, escape(r.name), escape(r.op_type), _n(r.sqnr_db), r.reason or "")
                for i, r in enumerate(debug.worst, 1)
            ],
        )
    )
    if debug.sensitivity is not None:
        parts.append(
            f"<h3>Keep in float</h3><p>Output SQNR as quantized (worst output): "
            f"{_n(debug.baseline_sqnr_db)} dB; each tensor below kept in float alone "
            "(<code>convert --keep-float NAME</code> writes it).</p>"
        )
        parts.append(
            _table(
                ("tensor", "output SQNR dB", "gain dB"),
                [(escape(s.name), _n(s.output_sqnr_db), _n(s.gain_db)) for s in debug.sensitivity],
            )
        )
    parts.append("<h3>Quantized tensors</h3>")
    rows = []
    for t in sorted(debug.tensors, key=lambda t: t.sqnr_db):
        observed = f"[{_n(t.observed_min)}, {_n(t.observed_max)}]" if t.elements else ""
        channel = f" (channel {t.worst_channel} of {t.channels})" if t.per_channel else ""
        rows.append(
            (
                escape(t.tensor),
                t.dtype,
                _n(t.scale) + channel,
                str(t.zero_point),
                observed,
                f"[{_n(t.representable_min)}, {_n(t.representable_max)}]",
                f"{t.clipped_low_fraction:.2%} / {t.clipped_high_fraction:.2%}",
                f"{t.rounded_to_zero_fraction:.2%}",
                _n(t.levels),
                _n(t.sqnr_db),
                t.reason or "",
            )
        )
    head = (
        "tensor",
        "dtype",
        "scale",
        "zero point",
        "float range",
        "representable range",
        "clipped low / high",
        "rounded to 0",
        "steps used",
        "SQNR dB",
        "reason",
    )
    parts.append(_table(head, rows))
    if debug.nodes_error:
        parts.append(f"<p class='muted'>node figures unavailable: {escape(debug.nodes_error)}</p>")
    return "".join(parts)
