"""Tolerances: how far apart two outputs may be where the comparison is not exact, and how far
a quantized model's outputs may be from its float original's (their SQNR)."""

from __future__ import annotations

import dataclasses

import click

from .base import ArgGroup, group_option, stacked

OWNER = "ToleranceArgs"
DEFAULT_MIN_SQNR = 20.0  # quantgraph.validation.report's (the CLI does not import onnxruntime)

TOLERANCE_OPTIONS = stacked(
    group_option(
        OWNER,
        "--atol",
        type=float,
        default=0.0,
        show_default=True,
        help="Absolute tolerance (--optimized; and the verdict when the rewritten side computes "
        "oneDNN's arithmetic).",
    ),
    group_option(
        OWNER,
        "--rtol",
        type=float,
        default=0.0,
        show_default=True,
        help="Relative tolerance (as --atol).",
    ),
    group_option(
        OWNER,
        "--min-sqnr",
        type=click.FloatRange(min=0, max=1000),
        default=None,
        metavar="DB",
        help="A float ORIGINAL against its quantized form: the SQNR every output must reach, "
        f"over all samples (default {DEFAULT_MIN_SQNR:g} dB: noise energy at most 1% of the "
        "signal's; with --atol/--rtol and no --min-sqnr, they alone judge, element by element).",
    ),
)


@dataclasses.dataclass(frozen=True)
class ToleranceArgs(ArgGroup):
    atol: float = 0.0
    rtol: float = 0.0
    min_sqnr: float | None = None
