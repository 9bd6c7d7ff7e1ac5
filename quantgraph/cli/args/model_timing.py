"""Whole-model timing: bench's --model and its schedule (rounds, live processes per variant, or
a fresh process per round); quantgraph.bench.models says why the schedule is what it is."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from ...bench.models import DEFAULT_TURN_TIMEOUT, MAX_TURN_TIMEOUT
from .base import ArgGroup, group_option, refuse_given, stacked

OWNER = "ModelTimingArgs"

MODEL_TIMING_OPTIONS = stacked(
    group_option(
        OWNER,
        "--model",
        "models",
        nargs=2,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        metavar="ORIGINAL REWRITTEN",
        help="Time whole models instead of kernels: ORIGINAL at ORT_ENABLE_ALL (the baseline) "
        "and ORT_DISABLE_ALL, REWRITTEN per --backends and --fusions; each variant in "
        "processes of its own, the processes taking turns round by round.",
    ),
    group_option(
        OWNER,
        "--rounds",
        type=click.IntRange(min=1),
        default=5,
        show_default=True,
        help="With --model: rounds; each gives every variant --repeat calls, in a rotated order.",
    ),
    group_option(
        OWNER,
        "--processes",
        type=click.IntRange(min=1),
        default=3,
        show_default=True,
        help="With --model: processes per variant, the rounds going round-robin over them.",
    ),
    group_option(
        OWNER,
        "--turn-timeout",
        type=click.FloatRange(min=0, min_open=True, max=MAX_TURN_TIMEOUT),
        default=DEFAULT_TURN_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="With --model: how long a timed process may take to build its session or to "
        "answer one turn; past it the process is killed and its variant reported as failed.",
    ),
    group_option(
        OWNER,
        "--fresh-processes",
        is_flag=True,
        help="With --model: a new process per variant per round instead of live processes "
        "that build their sessions once and take turns (slower; each round then lasts seconds, "
        "and the machine's drift over them enters the ratios).",
    ),
)

# What kernel timing reads and whole-model timing would ignore.
KERNELS_ONLY = ("sizes", "columns", "weights", "no_spinning")
# What whole-model timing reads and kernel timing would ignore (--backends, --fusions and
# the inputs' options are other groups', which bench gives to --model alone).
MODELS_ONLY = (
    "rounds",
    "processes",
    "turn_timeout",
    "fresh_processes",
    "backends",
    "fusions",
    "inputs",
    "dims",
    "val_ranges",
    "seed",
    "memory_budget",
    "search_timeout",
)


@dataclasses.dataclass(frozen=True)
class ModelTimingArgs(ArgGroup):
    models: tuple[Path, Path] | None = None
    rounds: int = 5
    processes: int = 3
    turn_timeout: float = DEFAULT_TURN_TIMEOUT
    fresh_processes: bool = False

    @classmethod
    def parse(cls, values: dict[str, Any]) -> ModelTimingArgs:
        """Options of one kind of timing given for the other are usage errors."""
        found = cls(**values)
        if not found.models:
            refuse_given(MODELS_ONLY, "only with --model")
            return cls(models=None)
        refuse_given(KERNELS_ONLY, "only to kernel timing, not with --model")
        if found.fresh_processes:
            refuse_given(("processes",), "only to live processes, not with --fresh-processes")
        return found
