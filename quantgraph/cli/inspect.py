"""quantgraph inspect: what convert would rewrite into what, what not and why; which spec ops a
backend runs; the fusion plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .common import errors_are_one_line, print_json, quiet_onnxruntime
from .options import ARITHMETIC_OPTION, BACKEND_OPTION, FUSION_OPTION, JSON_OPTION
from .render_text import print_conversion, print_plan, print_support


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--static", is_flag=True, help="Plan as `convert --static` would.")
@BACKEND_OPTION
@ARITHMETIC_OPTION
@click.option(
    "--keep-contrib",
    is_flag=True,
    help="Leave com.microsoft QuantizeLinear/DequantizeLinear unchanged (listed).",
)
@FUSION_OPTION
@JSON_OPTION
@errors_are_one_line
def inspect(
    model: Path,
    static: bool,
    keep_contrib: bool,
    backend: str | None,
    arithmetic: str | None,
    fusion: str,
    as_json: bool,
) -> None:
    """List MODEL's Q/DQ nodes: what would be rewritten into what, and what not and why;
    name quantized nodes of other formats (QOperator, MatMulNBits, ...) and what to do.

    With --backend, also try every spec op of the result alone on that backend and say which
    ones it runs (e.g. --backend onednn: which nodes oneDNN refuses, and why). With --fusion,
    also the fusion plan a session would make: each unit, its nodes and kernel, and why each
    other spec op runs alone.
    """
    from ..converter import convert as run_convert

    result = run_convert(model, static=static, contrib=not keep_contrib, check=False)
    payload: dict[str, Any] = result.report.to_dict()
    support = None
    if backend is not None:
        from ..backends.support import node_support

        quiet_onnxruntime()
        support = node_support(result.model, backend, arithmetic)
        payload["backend_support"] = {
            "backend": backend,
            "onednn": _engine(backend),
            "nodes": [s.to_dict() for s in support],
        }
    plan = None
    if fusion != "none":
        from ..session import InferenceSession

        quiet_onnxruntime()
        plan = InferenceSession(result.model, backend, arithmetic=arithmetic, fusion=fusion)
        payload["fusion_plan"] = plan.fusion_plan.to_dict()
    if as_json:
        print_json(payload)
        return
    print_conversion(result.report, True, None)
    if support is not None:
        print_support(backend or "", _engine(backend), support)
    if plan is not None:
        print_plan(plan.fusion_plan)


def _engine(backend: str | None) -> str | None:
    if backend != "onednn":
        return None
    from ..backends import onednn

    return onednn.version()
