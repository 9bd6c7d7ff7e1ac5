"""Backend and arithmetic: which kernels run the spec ops, where their rounding is open, and the
fusion mode. The one place the command line names backends (bench's lists included)."""

from __future__ import annotations

import dataclasses

import click

from ...backends import ARITHMETIC_SUMMARIES, ARITHMETICS, BACKENDS, get
from ...fusion.plan import MODE_SUMMARIES
from ...fusion.plan import MODES as FUSION_MODES
from .base import ArgGroup, group_option, stacked

OWNER = "BackendArgs"


# The help texts name every choice from the registries (a new backend, arithmetic or fusion
# mode is listed without editing them; tests/test_cli_help.py checks every --help).
def _backend_help() -> str:
    each = "; ".join(f"{name}: {get(name).engine}" for name in BACKENDS)
    picked = [name for name in BACKENDS if get(name).by_default]
    default = ", else ".join([f"{name} when it can run here" for name in picked[:-1]] + picked[-1:])
    return f"Kernel backend for the spec ops. {each}. Default: {default}."


def _arithmetic_help() -> str:
    def computing(arithmetic: str) -> str:
        return ", ".join(b for b in BACKENDS if arithmetic in get(b).arithmetics)

    each = "; ".join(
        f"{name}: {summary} (backends {computing(name)})"
        for name, summary in ARITHMETIC_SUMMARIES.items()
    )
    default = "; ".join(f"{b}: {get(b).arithmetics[0]}" for b in BACKENDS)
    return f"Where the spec leaves rounding open. {each}. Default: the backend's own ({default})."


def _fusion_help() -> str:
    return "; ".join(f"{mode}: {summary}" for mode, summary in MODE_SUMMARIES.items()) + "."


# --backend and --arithmetic (commands take both, in this order).
BACKEND_OPTIONS = stacked(
    group_option(OWNER, "--backend", type=click.Choice(BACKENDS), help=_backend_help()),
    group_option(OWNER, "--arithmetic", type=click.Choice(ARITHMETICS), help=_arithmetic_help()),
)
FUSION_OPTION = group_option(
    OWNER,
    "--fusion",
    type=click.Choice(FUSION_MODES),
    default="none",
    show_default=True,
    help=_fusion_help(),
)
# bench --model's lists (checked only when --model is given: see BackendArgs.bench_lists).
BENCH_LIST_OPTIONS = stacked(
    group_option(
        OWNER,
        "--backends",
        comma_list=True,
        default="native",
        show_default=True,
        help=f"With --model: comma-separated backends for REWRITTEN ({', '.join(BACKENDS)}).",
    ),
    group_option(
        OWNER,
        "--fusions",
        comma_list=True,
        default="none,onnxruntime",
        show_default=True,
        help="With --model: comma-separated fusion modes for REWRITTEN "
        f"({', '.join(FUSION_MODES)}).",
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
