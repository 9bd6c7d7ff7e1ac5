"""The text of a float-vs-QDQ debug (quantgraph.validation.debugger): where error is
introduced, why, and what keeping a tensor in float gains."""

from __future__ import annotations

import math
from typing import Any

import click

SHOWN = 5  # rows of the ranking printed (the JSON and the page hold all)


def print_debug(debug: Any) -> None:
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
        base = debug.baseline_sqnr_db
        click.echo(f"  keep in float (output SQNR {base:.1f} dB as quantized):")
        for found in debug.sensitivity:
            click.echo(f"    {found.name}: {found.output_sqnr_db:.1f} dB ({found.gain_db:+.1f} dB)")
