"""The text of a float-vs-QDQ debug (quantgraph.validation.debug.debugger): where error is
introduced, why, and what keeping a place in float gains (the suggestions, and the command
that writes one)."""

from __future__ import annotations

import math
import shlex
from typing import Any

import click

SHOWN = 5  # rows of the ranking printed (the JSON and the page hold all)


def print_debug(debug: Any, float_label: str = "FLOAT", quantized_label: str = "QUANTIZED") -> None:
    headline = debug.headline()
    if headline is not None:
        click.echo(f"  {headline}")
    for tensor in sorted(debug.tensors, key=lambda t: t.sqnr_db)[:SHOWN]:
        if tensor.sqnr_db == math.inf:
            continue
        low, high = tensor.observed_min, tensor.observed_max
        click.echo(
            f"    tensor '{tensor.tensor}': {tensor.dtype} scale={tensor.scale:.4g} "
            f"zp={tensor.zero_point} float [{low:.4g}, {high:.4g}] vs representable "
            f"[{tensor.representable_min:.4g}, {tensor.representable_max:.4g}], clipped "
            f"{tensor.clipped_low_fraction:.2%} low {tensor.clipped_high_fraction:.2%} high, "
            f"{tensor.rounded_to_zero_fraction:.2%} rounded to 0, SQNR {tensor.sqnr_db:.1f} dB"
        )
    if debug.nodes_error:
        click.echo(f"    node figures unavailable: {debug.nodes_error}")
    if debug.sensitivity is not None:
        _print_sensitivity(debug, float_label, quantized_label)


def _print_sensitivity(debug: Any, float_label: str, quantized_label: str) -> None:
    from ..validation.debug.sensitivity import GAIN_NOISE_DB

    base = debug.baseline_sqnr_db
    found = debug.sensitivity
    click.echo(
        f"  keep in float (output SQNR {base:.1f} dB as quantized; each of the {len(found)} "
        "worst places kept in float alone):"
    )
    suggested = [s for s in found if s.suggested]
    for one in suggested:
        weights = " --float-model FLOAT" if one.needs_float_model else ""
        click.echo(
            f"    {one.gain_db:+.1f} dB -> {one.output_sqnr_db:.1f} dB: {one.candidate.label}, "
            f"--keep-float {one.keep_float}{weights}"
        )
    others = [s for s in found if not s.suggested]
    if others:
        listed = ", ".join(f"{s.candidate.label} {_gain(s.gain_db)}" for s in others)
        click.echo(f"    no gain (at most {GAIN_NOISE_DB} dB): {listed}")
    if suggested:
        best = suggested[0]
        command = ["quantgraph", "convert", quantized_label, "OUT", "--keep-float", best.keep_float]
        if best.needs_float_model:
            command += ["--float-model", float_label]
        click.echo(f"  write the best: {shlex.join(command)}")
    elif found:
        click.echo(
            "  no place gains alone: `quantgraph fallback FLOAT QUANTIZED OUT --target-sqnr DB` "
            "tries them together"
        )


def _gain(gain: float) -> str:
    return "(not measurable)" if math.isnan(gain) else f"({gain:+.2f} dB)"
