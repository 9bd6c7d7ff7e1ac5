"""The click options several quantgraph commands share (cli.py applies them)."""

from __future__ import annotations

import click

from .backends import ARITHMETICS, BACKENDS
from .fusion.plan import MODES as FUSION_MODES

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
    metavar="NAME=VALUE",
    help="Bind a symbolic input dimension of the generated inputs (repeatable). Unbound: pinned "
    "by the model's metadata, 224 for the spatial dims of image-like inputs, else 1.",
)
VAL_RANGE_OPTION = click.option(
    "--val-range",
    "val_ranges",
    multiple=True,
    metavar="NAME:LOW,HIGH",
    help="Draw input NAME's values from [LOW, HIGH] (repeatable). Unset: integer indices stay "
    "inside what they index, floats are standard normal.",
)
ITERATIONS_OPTION = click.option(
    "--iterations",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Input samples to generate (seeds SEED, SEED+1, ...); the report aggregates them.",
)
FUSION_OPTION = click.option(
    "--fusion",
    type=click.Choice(FUSION_MODES),
    default="none",
    show_default=True,
    help="none: each spec op alone (the spec's exact composition). onnxruntime: units of spec "
    "ops and their compute (DQ -> Conv -> Q, int4 weight -> MatMul, ...) run as onnxruntime's "
    "fused kernels at ORT_ENABLE_ALL, as for the original QDQ model; the rest on --backend.",
)
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
