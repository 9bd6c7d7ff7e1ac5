"""quantgraph inspect: what convert would rewrite into what, what not and why; which spec ops a
backend runs; the fusion plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .args import BackendArgs, ConversionArgs, parsed
from .args.backend import BACKEND_OPTIONS, FUSION_OPTION
from .args.conversion import KEEP_CONTRIB_OPTION, static_option
from .process import errors_are_one_line, quiet_onnxruntime
from .render_json import JSON_OPTION, print_json
from .render_text import VERBOSE_OPTION, print_conversion, print_plan, print_support


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@static_option(planning=True)
@BACKEND_OPTIONS
@KEEP_CONTRIB_OPTION
@FUSION_OPTION
@VERBOSE_OPTION
@JSON_OPTION
@errors_are_one_line
@parsed(conversion=ConversionArgs, engine=BackendArgs)
def inspect(
    model: Path, verbose: bool, as_json: bool, conversion: ConversionArgs, engine: BackendArgs
) -> None:
    """List MODEL's Q/DQ nodes: what would be rewritten into what, and what not and why;
    name quantized nodes of other formats (QOperator, MatMulNBits, ...) and what to do.

    With --backend, also try every spec op of the result alone on that backend and say which
    ones it runs (e.g. --backend onednn: which nodes oneDNN refuses, and why). With --fusion,
    also the fusion plan a session would make: each unit, its nodes and kernel, and why each
    other spec op runs alone.
    """
    from ..converter import convert as run_convert

    result = run_convert(model, static=conversion.static, contrib=conversion.contrib, check=False)
    payload: dict[str, Any] = result.report.to_dict()
    support = None
    if engine.backend is not None:
        from ..runtime.support import node_support

        quiet_onnxruntime()
        support = node_support(result.model, engine.backend, engine.arithmetic)
        payload["backend_support"] = {
            "backend": engine.backend,
            "onednn": engine.engine_version(),
            "nodes": [s.to_dict() for s in support],
        }
    plan = None
    if engine.fusion != "none":
        from ..runtime.session import InferenceSession

        quiet_onnxruntime()
        tune_inputs = None
        if engine.fusion == "auto":  # auto measures its candidates on generated inputs
            from ..validation import make_inputs

            tune_inputs = make_inputs(result.model)
        plan = InferenceSession(
            result.model,
            engine.backend,
            arithmetic=engine.arithmetic,
            fusion=engine.fusion,
            tune_inputs=tune_inputs,
        )
        payload["fusion_plan"] = plan.fusion_plan.to_dict()
    if as_json:
        print_json(payload)
        return
    print_conversion(result.report, True, None, verbose=verbose)
    if support is not None:
        print_support(engine.backend or "", engine.engine_version(), support)
    if plan is not None:
        print_plan(plan.fusion_plan)
