"""The click options several quantgraph commands share (cli.py applies them)."""

from __future__ import annotations

import click

from .backends import ARITHMETICS, BACKENDS


class DimType(click.ParamType[tuple[str, int]]):
    """``NAME=V`` or ``INPUT:AXIS=V`` -> (key, V); the syntax only (the model checks the rest)."""

    name = "NAME=VALUE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int]:
        if isinstance(value, tuple):
            return value
        from .validation.options import parse_dim  # imported when used: numpy, onnxruntime

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
        from .validation.options import parse_val_range

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
ITERATIONS_OPTION = click.option(
    "--iterations",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Input samples to generate (seeds SEED, SEED+1, ...); the report aggregates them.",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
