"""Tolerances: how far apart two outputs may be where the comparison is not exact."""

from __future__ import annotations

import dataclasses

from .base import ArgGroup, group_option, stacked

OWNER = "ToleranceArgs"

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
)


@dataclasses.dataclass(frozen=True)
class ToleranceArgs(ArgGroup):
    atol: float = 0.0
    rtol: float = 0.0
