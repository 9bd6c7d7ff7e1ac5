"""Kernel timing: bench's element counts, layouts, 4-bit weight shapes, runs and threads (the
threads and runs also time whole models under --model)."""

from __future__ import annotations

import dataclasses
import re

import click

from .base import ArgGroup, group_option, stacked

OWNER = "KernelArgs"


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


# onnxruntime's intra-op threads: bench's sessions, and those tune decides for.
THREADS_OPTION = group_option(
    OWNER,
    "--threads",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="onnxruntime intra-op threads for every session (0: onnxruntime's default).",
)

KERNEL_OPTIONS = stacked(
    group_option(
        OWNER,
        "--sizes",
        comma_list=True,
        type=IntList(minimum=1),
        default="1000,65536,1048576,16777216",
        show_default=True,
        help="Comma-separated element counts (each >= 1).",
    ),
    group_option(
        OWNER,
        "--repeat",
        type=click.IntRange(min=1),
        default=20,
        show_default=True,
        help="Timed runs per case.",
    ),
    group_option(
        OWNER,
        "--columns",
        comma_list=True,
        type=IntList(minimum=1),
        default="16,64,384",
        show_default=True,
        help="Column counts of the narrow innermost-axis per-channel layouts ([n // C, C], axis 1; "
        "each at most the smallest of --sizes); empty for none.",
    ),
    THREADS_OPTION,
    group_option(
        OWNER,
        "--weights",
        comma_list=True,
        type=ShapeList(multiple=32),
        metavar="KxN[,KxN...]",
        default="4096x4096",
        show_default=True,
        help="Comma-separated KxN shapes of the 4-bit weight rows (K and N positive multiples of "
        "32); empty for none.",
    ),
    group_option(
        OWNER,
        "--no-spinning",
        is_flag=True,
        help="Intra-op threads sleep after a run instead of spin-waiting (onnxruntime's default).",
    ),
)


@dataclasses.dataclass(frozen=True)
class KernelArgs(ArgGroup):
    sizes: tuple[int, ...] = ()
    repeat: int = 20
    columns: tuple[int, ...] = ()
    threads: int = 0
    weights: tuple[tuple[int, int], ...] = ()
    no_spinning: bool = False

    def narrow_columns(self) -> tuple[int, ...]:
        """--columns, each checked against --sizes (only kernel timing reads either)."""
        if self.sizes and self.columns and max(self.columns) > min(self.sizes):
            raise click.BadParameter(
                f"{max(self.columns)} columns leave no row for a size of {min(self.sizes)} "
                "elements (each column count must be at most the smallest of --sizes)",
                param_hint="'--columns'",
            )
        return self.columns
