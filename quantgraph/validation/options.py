"""``--dim``, ``--val-range`` and ``--memory-budget``: their syntax, and the checks only the model
can answer.

The syntax is checked as the command line is read (quantgraph/cli/args/inputs.py's ParamTypes call
:func:`parse_dim` and :func:`parse_val_range`); what the model must confirm (the dim or input
exists, the axis is inside the input, the range fits the input's type) is checked as inputs are
planned and raised as :class:`InputOptionError`: a ``ModelError`` for the Python API and a
click usage error (exit 2, naming the option) for the command line.
"""

from __future__ import annotations

import math
import re

import click
import numpy as np
import onnx_ir as ir

from ..errors import ModelError


class InputOptionError(click.BadParameter, ModelError):
    """A ``--dim`` or ``--val-range`` value the model cannot take (the message says why)."""

    def __init__(self, option: str, message: str) -> None:
        context = click.get_current_context(silent=True)
        super().__init__(message, ctx=context, param_hint=f"'{option}'")
        self.option = option

    def __str__(self) -> str:  # the API's message names the option as the CLI's does
        return f"{self.option}: {self.message}"


def parse_dim(text: str) -> tuple[str, int]:
    """``NAME=V`` (a symbolic dim) or ``INPUT:AXIS=V`` (one axis of an input) -> (key, V);
    ValueError with the rule broken. Whether the key names something is the model's to say."""
    key, sep, number = text.rpartition("=")
    if not sep:
        raise ValueError(f"{text!r}: expected NAME=VALUE or INPUT:AXIS=VALUE")
    if not key.strip():
        raise ValueError(f"{text!r}: the dim NAME (or INPUT:AXIS) before '=' is empty")
    if not re.fullmatch(r"[+-]?\d+", number.strip()):
        raise ValueError(f"{text!r}: VALUE must be an integer")
    value = int(number)
    if value < 1:  # a size of 0 makes empty inputs: nothing would be validated or timed
        raise ValueError(f"{text!r}: a size must be >= 1")
    return key, value


def parse_val_range(text: str) -> tuple[str, tuple[float, float]]:
    """``NAME:LOW,HIGH`` -> (NAME, (LOW, HIGH)); ValueError with what is wrong."""
    match = re.fullmatch(r"(.+):([^,:]+),([^,:]+)", text)
    if match is None:
        raise ValueError(f"{text!r}: expected NAME:LOW,HIGH")
    try:
        low, high = float(match.group(2)), float(match.group(3))
    except ValueError:
        raise ValueError(f"{text!r}: LOW and HIGH must be numbers") from None
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"{text!r}: NaN is not allowed as LOW or HIGH")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{text!r}: LOW and HIGH must be finite numbers")
    if not low <= high:
        raise ValueError(f"{text!r}: LOW must not exceed HIGH")
    return match.group(1), (low, high)


def type_range(dtype: ir.DataType) -> tuple[float, float]:
    """The finite values an input of ``dtype`` holds."""
    np_type = dtype.numpy()
    if np_type.kind == "b":
        return 0.0, 1.0
    if np_type.kind in "iu":
        info = np.iinfo(np_type)
        return float(info.min), float(info.max)
    finfo = np.finfo(np_type)
    return float(finfo.min), float(finfo.max)


def check_val_range(name: str, dtype: ir.DataType, low: float, high: float) -> tuple[float, float]:
    """``--val-range name:low,high`` against the input's type: inside its values and, for an
    integer type, holding at least one integer. The range to draw from."""
    text = f"{name}:{low:g},{high:g}"
    type_low, type_high = type_range(dtype)
    type_name = dtype.numpy().name
    if low < type_low or high > type_high:
        raise InputOptionError(
            "--val-range",
            f"{text!r}: input '{name}' is {type_name}, whose values lie in "
            f"[{type_low:g}, {type_high:g}]",
        )
    if dtype.numpy().kind in "biu":
        low, high = float(math.ceil(low)), float(math.floor(high))
        if low > high:
            raise InputOptionError(
                "--val-range", f"{text!r}: input '{name}' is {type_name} and no integer lies there"
            )
    return low, high


# --memory-budget units: binary (KiB ...) and decimal (kB ...), case-insensitive; B or none: bytes.
_UNITS = {
    "": 1,
    "b": 1,
    **{f"{p}ib": 1 << (10 * (i + 1)) for i, p in enumerate("kmgt")},
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
}


def parse_size(text: str) -> int:
    """``2GiB``, ``512MiB``, ``1.5 GB``, ``1000000`` (bytes) -> bytes (> 0); ValueError saying
    the rule broken."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*", text)
    if match is None:
        raise ValueError(f"{text!r}: expected a size such as 2GiB, 512MiB, 1.5GB or bytes")
    unit = match.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(
            f"{text!r}: unknown unit {match.group(2)!r} (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
        )
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < 1:
        raise ValueError(f"{text!r}: the size must be at least 1 byte")
    return size


def size_text(count: int) -> str:
    """``1.5 GiB``, ``300 bytes``: a byte count for people."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def memory_budget_bytes(memory_budget: int | str | None) -> int | None:
    """``--memory-budget`` in bytes: an int, or a size such as "2GiB" (:func:`parse_size`)."""
    if memory_budget is None:
        return None
    if isinstance(memory_budget, str):
        try:
            return parse_size(memory_budget)
        except ValueError as error:
            raise InputOptionError("--memory-budget", str(error)) from None
    if memory_budget < 1:
        raise InputOptionError("--memory-budget", f"{memory_budget}: must be at least 1 byte")
    return int(memory_budget)
