"""The click options several quantgraph commands share (the command modules apply them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..backends import ARITHMETICS, BACKENDS
from ..fusion.plan import MODES as FUSION_MODES

F = TypeVar("F", bound=Callable[..., Any])


class DimType(click.ParamType[tuple[str, int]]):
    """``NAME=V`` or ``INPUT:AXIS=V`` -> (key, V); the syntax only (the model checks the rest)."""

    name = "NAME=VALUE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        from ..validation.options import parse_dim  # imported when used: numpy, onnxruntime

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
        from ..validation.options import parse_val_range

        try:
            return parse_val_range(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


BACKEND_OPTION = click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    help="Kernel backend for the spec ops: native (C++ library, fastest), python "
    "(onnxruntime-extensions) or onednn (oneDNN's Graph API: what oneDNN computes). Default: "
    "native when built, else python.",
)
ARITHMETIC_OPTION = click.option(
    "--arithmetic",
    type=click.Choice(ARITHMETICS),
    help="Where the spec leaves rounding open: onnx (bit-exact with onnxruntime's "
    "QuantizeLinear; default on native and python) or onednn (oneDNN's: x * (1/s) + zp rounded "
    "once, float8 unsaturated; native and onednn backends).",
)
DIM_OPTION = click.option(
    "--dim",
    "dims",
    multiple=True,
    type=DimType(),
    metavar="NAME=VALUE|INPUT:AXIS=VALUE",
    help="Size of a dimension the model leaves open (symbolic NAME, or axis AXIS of input "
    "INPUT, also for unnamed and -1 dims) in the generated inputs (repeatable). Unbound: the "
    "model's metadata, 224 for the spatial dims of image-like inputs, else 1; other sizes are "
    "tried when the original refuses them.",
)
VAL_RANGE_OPTION = click.option(
    "--val-range",
    "val_ranges",
    multiple=True,
    type=ValRangeType(),
    metavar="NAME:LOW,HIGH",
    help="Draw input NAME's values from [LOW, HIGH] (finite, inside NAME's type; repeatable). "
    "Unset: integer indices stay inside what they index, floats are standard normal.",
)
SEED_OPTION = click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs."
)
ITERATIONS_OPTION = click.option(
    "--iterations",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Input samples to generate (seeds SEED, SEED+1, ...); the report aggregates them.",
)
INPUTS_HELP = (
    "An .npz of input arrays by name (np.savez), or a .npy (np.save) for a model with one input"
)
JSON_OPTION = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as JSON (docs/json.md); an error as {error, exit_code}.",
)


class IntList(click.ParamType):  # type: ignore[type-arg]  # generic since click 8.5 only
    """``1000,65536``: comma-separated integers of at least ``minimum``; empty for none."""

    name = "N[,N...]"

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        numbers = []
        for item in (s.strip() for s in text.split(",")) if text else ():
            if not _digits(item) or int(item) < self.minimum:
                self.fail(
                    f"{_which(item, text)}: expected comma-separated integers >= {self.minimum}",
                    param,
                    ctx,
                )
            numbers.append(int(item))
        return tuple(numbers)


class ShapeList(click.ParamType):  # type: ignore[type-arg]  # generic since click 8.5 only
    """``4096x4096,128x256``: comma-separated KxN shapes, K and N positive multiples of
    ``multiple``; empty for none."""

    name = "KxN[,KxN...]"

    def __init__(self, multiple: int) -> None:
        self.multiple = multiple

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[tuple[int, int], ...]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        shapes = []
        for item in (s.strip() for s in text.split(",")) if text else ():
            k, _, n = item.lower().partition("x")
            if not (_digits(k) and _digits(n)) or any(
                int(d) == 0 or int(d) % self.multiple for d in (k, n)
            ):
                self.fail(
                    f"{_which(item, text)}: expected KxN with K and N positive multiples of "
                    f"{self.multiple}",
                    param,
                    ctx,
                )
            shapes.append((int(k), int(n)))
        return tuple(shapes)


def _digits(text: str) -> bool:
    return re.fullmatch(r"[0-9]+", text) is not None  # str.isdigit takes "²", which int() refuses


def _which(item: str, text: str) -> str:
    if item == text:
        return repr(text)
    return f"{item!r} in {text!r}" if item else f"an empty item in {text!r}"


# convert's options that only --validate uses; the options that only shape generated inputs.
VALIDATE_OPTIONS = (
    "backend",
    "arithmetic",
    "dims",
    "val_ranges",
    "seed",
    "iterations",
    "report_path",
)
GENERATION_OPTIONS = ("dims", "val_ranges", "seed", "iterations")


def refuse_given(names: tuple[str, ...], rule: str) -> None:
    """A usage error when any of the options ``names`` was given on the command line (an option
    that would be ignored is an error, never silence)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name in names
        and ctx.get_parameter_source(param.name) not in (None, ParameterSource.DEFAULT)
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise click.UsageError(f"{', '.join(given)} {verb} {rule}")


def bench_options(function: F) -> F:
    """bench's options: parsed and checked by their types (IntList, ShapeList, IntRange)."""
    for option in reversed(_BENCH_OPTIONS):
        function = option(function)
    return function


_BENCH_OPTIONS = [
    click.option(
        "--sizes",
        type=IntList(minimum=1),
        default="1000,65536,1048576,16777216",
        show_default=True,
        help="Comma-separated element counts (each >= 1).",
    ),
    click.option(
        "--repeat",
        type=click.IntRange(min=1),
        default=20,
        show_default=True,
        help="Timed runs per case.",
    ),
    click.option(
        "--columns",
        type=IntList(minimum=1),
        default="16,64,384",
        show_default=True,
        help="Column counts of the narrow innermost-axis per-channel layouts ([n // C, C], axis 1; "
        "each at most the smallest of --sizes); empty for none.",
    ),
    click.option(
        "--threads",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="onnxruntime intra-op threads for every session (0: onnxruntime's default).",
    ),
    click.option(
        "--weights",
        type=ShapeList(multiple=32),
        metavar="KxN[,KxN...]",
        default="4096x4096",
        show_default=True,
        help="Comma-separated KxN shapes of the 4-bit weight rows (K and N positive multiples of "
        "32); empty for none.",
    ),
    click.option(
        "--no-spinning",
        is_flag=True,
        help="Intra-op threads sleep after a run instead of spin-waiting (onnxruntime's default).",
    ),
]


FUSION_OPTION = click.option(
    "--fusion",
    type=click.Choice(FUSION_MODES),
    default="none",
    show_default=True,
    help="none: each spec op alone (the spec's exact composition). onnxruntime: units of spec "
    "ops and their compute (DQ -> Conv -> Q, int4 weight -> MatMul, ...) run as onnxruntime's "
    "fused kernels at ORT_ENABLE_ALL, as for the original QDQ model; the rest on --backend.",
)
