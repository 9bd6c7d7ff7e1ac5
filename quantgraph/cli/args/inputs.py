"""Inputs: the files a command reads as input samples (--inputs), or how it generates them
(--dim, --val-range, --seed, --iterations) and within which budgets the original is tried on
them (--memory-budget, --search-timeout). The syntax is checked as the command line is read;
the model checks the rest (quantgraph.validation.options)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from .base import ArgGroup, group_option, refuse_given

OWNER = "InputArgs"
F = TypeVar("F", bound=Callable[..., Any])
FILES_HELP = (
    "An .npz of input arrays by name (np.savez), or a .npy (np.save) for a model with one input"
)
_INPUTS_HELP = {
    "samples": f"{FILES_HELP}, or a directory of them; repeatable: each file is one sample "
    "(default: generated from --seed).",
    "sample": f"{FILES_HELP}: one sample (validate takes several; default: generated from --seed).",
    "bench": f"With --model: the one sample every variant is timed on. {FILES_HELP} "
    "(default: generated as validate plans them, from --dim, --val-range and --seed).",
}


def inputs_option(kind: Literal["samples", "sample", "bench"]) -> Callable[[F], F]:
    """--inputs: several files or directories (``samples``, validate), or one file."""
    many = kind == "samples"
    return group_option(
        OWNER,
        "--inputs",
        multiple=many,
        type=click.Path(exists=True, dir_okay=many, path_type=Path),
        help=_INPUTS_HELP[kind],
    )


class DimType(click.ParamType[tuple[str, int]]):
    """``NAME=V`` or ``INPUT:AXIS=V`` -> (key, V); the syntax only (the model checks the rest)."""

    name = "NAME=VALUE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        from ...validation.options import parse_dim  # imported when used: numpy, onnxruntime

        try:
            return parse_dim(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


class ValRangeType(click.ParamType[tuple[str, tuple[float, float]]]):
    """``NAME:LOW,HIGH`` -> (NAME, (LOW, HIGH)) with finite LOW <= HIGH."""

    name = "NAME:LOW,HIGH"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, tuple[float, float]]:
        if isinstance(value, tuple):
            return value
        from ...validation.options import parse_val_range

        try:
            return parse_val_range(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


class SizeType(click.ParamType[int]):
    """``2GiB``, ``512MiB``, ``1.5GB`` or bytes -> bytes (at least 1)."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        if value == MEMORY_BUDGET_DEFAULT:
            # click converts the default of every command with the option, convert without
            # --validate too: known without parse_size, whose import (the whole validation
            # package, onnxruntime's session layer) costs ~0.25 s
            return MEMORY_BUDGET_DEFAULT_BYTES
        from ...validation.options import parse_size

        try:
            return parse_size(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


# quantgraph.validation.inputs.search's defaults (tests/test_validation_budget.py checks they
# agree).
MEMORY_BUDGET_DEFAULT = "2GiB"
MEMORY_BUDGET_DEFAULT_BYTES = 2 << 30
SEARCH_TIMEOUT_DEFAULT = 60.0

DIM_OPTION = group_option(
    OWNER,
    "--dim",
    "dims",
    multiple=True,
    type=DimType(),
    metavar="NAME=VALUE|INPUT:AXIS=VALUE",
    help="Size of a dimension the model leaves open (symbolic NAME, or axis AXIS of input "
    "INPUT, also for unnamed and -1 dims) in the generated inputs (repeatable; a size is >= 1). "
    "Unbound: the model's metadata, 224 for the spatial dims of image-like inputs, 128 for "
    "sequence-like dims, else 1 (validate tries other sizes when the original refuses them).",
)
VAL_RANGE_OPTION = group_option(
    OWNER,
    "--val-range",
    "val_ranges",
    multiple=True,
    type=ValRangeType(),
    metavar="NAME:LOW,HIGH",
    help="Draw input NAME's values from [LOW, HIGH] (finite, inside NAME's type; repeatable). "
    "Unset: integer indices stay inside what they index, floats are standard normal.",
)
SEED_OPTION = group_option(
    OWNER, "--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs."
)
MEMORY_BUDGET_OPTION = group_option(
    OWNER,
    "--memory-budget",
    type=SizeType(),
    default=MEMORY_BUDGET_DEFAULT,
    show_default=True,
    help="Run no plan of generated inputs whose memory beside the model's weights (held whatever "
    "the inputs), estimated from its shapes, exceeds SIZE (2GiB, 512MiB, 1.5GB or bytes).",
)
SEARCH_TIMEOUT_OPTION = group_option(
    OWNER,
    "--search-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=SEARCH_TIMEOUT_DEFAULT,
    show_default=True,
    metavar="SECONDS",
    help="Stop trying other plans of generated inputs after SECONDS (checked between attempts).",
)
ITERATIONS_OPTION = group_option(
    OWNER,
    "--iterations",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Input samples to generate (seeds SEED, SEED+1, ...); the report aggregates them.",
)


@dataclasses.dataclass(frozen=True)
class InputArgs(ArgGroup):
    inputs: tuple[Path, ...] = ()
    dims: dict[str, int] = dataclasses.field(default_factory=dict)
    val_ranges: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    seed: int = 0
    iterations: int = 1
    memory_budget: int = MEMORY_BUDGET_DEFAULT_BYTES
    search_timeout: float = SEARCH_TIMEOUT_DEFAULT

    # The options that only shape generated inputs.
    GENERATION = ("dims", "val_ranges", "seed", "iterations", "memory_budget", "search_timeout")

    @classmethod
    def parse(cls, values: dict[str, Any]) -> InputArgs:
        files = values.pop("inputs", None)
        files = tuple(files) if isinstance(files, tuple) else ((files,) if files else ())
        if files:
            refuse_given(cls.GENERATION, "only to generated inputs, not with --inputs")
        values["dims"] = dict(values.get("dims", ()))
        values["val_ranges"] = dict(values.get("val_ranges", ()))
        return cls(inputs=files, **values)

    @property
    def file(self) -> Path | None:
        """The one --inputs file of a command that takes one."""
        return self.inputs[0] if self.inputs else None
