"""The page's "Where error is introduced" section (float original vs its QDQ form): the ranking
of :mod:`quantgraph.validation.debug.debugger` first, then every quantized tensor's parameters and
what they did to the float values, then the keep-in-float list of --sensitivity (suggestions, with
the option that writes each, then what gained nothing)."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from html import escape

from ..debug.debugger import QuantizationDebug
from ..debug.sensitivity import GAIN_NOISE_DB, Sensitivity


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


def section(
    debug: QuantizationDebug | None, float_label: str = "FLOAT", quantized_label: str = "QUANTIZED"
) -> str:
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
        parts.append(_sensitivity(debug, debug.sensitivity, float_label, quantized_label))
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


def _sensitivity(
    debug: QuantizationDebug, found: Sequence[Sensitivity], float_label: str, quantized_label: str
) -> str:
    command = shlex.join(["quantgraph", "convert", quantized_label, "OUT", "--keep-float"])
    weights = shlex.join(["--float-model", float_label])
    parts = [
        "<h3>Keep in float</h3>",
        f"<p>Output SQNR as quantized (worst output): {_n(debug.baseline_sqnr_db)} dB. Each "
        "place below (a chain of Q/DQ aliases sharing one scale counts once; a node's weights "
        "come from the float model) kept in float alone and rerun on the same samples; the "
        f"suggestions gain more than {GAIN_NOISE_DB} dB. <code>{escape(command)} NAMES</code> "
        f"writes one (weights: with <code>{escape(weights)}</code>).</p>",
    ]
    rows = []
    for s in found:
        extra = ["--float-model", float_label] if s.needs_float_model else []
        option = shlex.join(["--keep-float", s.keep_float, *extra])
        rows.append(
            (
                escape(s.candidate.label),
                _n(s.sqnr_db),
                s.reason or "",
                _n(s.output_sqnr_db),
                _n(s.gain_db),
                f"<code>{escape(option)}</code>" if s.suggested else "no gain",
            )
        )
    head = ("place", "introduced SQNR dB", "reason", "output SQNR dB", "gain dB", "suggestion")
    parts.append(_table(head, rows))
    return "".join(parts)
