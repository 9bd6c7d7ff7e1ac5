"""Backend and arithmetic: which kernels run the spec ops, where their rounding is open, and the
fusion mode. The one place the command line names backends (bench's lists included)."""

from __future__ import annotations

import dataclasses

import click

from ...backends import ARITHMETICS, BACKENDS
from ...fusion.plan import MODES as FUSION_MODES
from .base import ArgGroup, group_option, stacked

OWNER = "BackendArgs"

# --backend and --arithmetic (commands take both, in this order).
BACKEND_OPTIONS = stacked(
    group_option(
        OWNER,
        "--backend",
        type=click.Choice(BACKENDS),
        help="Kernel backend for the spec ops: native (C++ library, fastest), python "
        "(onnxruntime-extensions) or onednn (oneDNN's Graph API: what oneDNN computes). Default: "
        "native when built, else python.",
    ),
    group_option(
        OWNER,
        "--arithmetic",
        type=click.Choice(ARITHMETICS),
        help="Where the spec leaves rounding open: onnx (bit-exact with onnxruntime's "
        "QuantizeLinear; default on native and python) or onednn (oneDNN's: x * (1/s) + zp "
        "rounded once, float8 unsaturated; native and onednn backends).",
    ),
)
FUSION_OPTION = group_option(
    OWNER,
    "--fusion",
    type=click.Choice(FUSION_MODES),
    default="none",
    show_default=True,
    help="none: each spec op alone (the spec's exact composition). onnxruntime: units of spec "
    "ops and their compute (DQ -> Conv -> Q, int4 weight -> MatMul, ...) run as onnxruntime's "
    "fused kernels at ORT_ENABLE_ALL, as for the original QDQ model; the rest on --backend.",
)
# bench --model's lists (checked only when --model is given: see BackendArgs.bench_lists).
BENCH_LIST_OPTIONS = stacked(
    group_option(
        OWNER,
        "--backends",
        default="native",
        show_default=True,
        help="With --model: comma-separated backends for REWRITTEN.",
    ),
    group_option(
        OWNER,
        "--fusions",
        default="none,onnxruntime",
        show_default=True,
        help="With --model: comma-separated fusion modes for REWRITTEN.",
    ),
)


@dataclasses.dataclass(frozen=True)
class BackendArgs(ArgGroup):
    backend: str | None = None
    arithmetic: str | None = None
    fusion: str = "none"
    backends: str = "native"
    fusions: str = "none,onnxruntime"

    def bench_lists(self) -> tuple[list[str], list[str]]:
        """--backends and --fusions as lists, each item checked (a usage error names it)."""
        chosen = _items(self.backends)
        modes = _items(self.fusions)
        for name, values, allowed in (
            ("--backends", chosen, BACKENDS),
            ("--fusions", modes, FUSION_MODES),
        ):
            for value in values:
                if value not in allowed:
                    raise click.BadParameter(
                        f"{value!r} is not one of {', '.join(allowed)}", param_hint=name
                    )
        return chosen, modes

    def engine_version(self) -> str | None:
        """The engine behind --backend, when it is a library with a version (oneDNN)."""
        if self.backend is None:
            return None
        from ...backends import get

        return get(self.backend).engine_version()


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
