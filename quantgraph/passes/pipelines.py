"""The pass pipelines of quantgraph's jobs, each an onnx-ir PassManager of small passes."""

from __future__ import annotations

import onnx_ir as ir

from .full_check import FullCheckPass
from .node_rewrite import Progress
from .qdq_to_spec import QdqToSpecPass
from .report import RewriteReport
from .spec_to_qdq import SpecToQdqPass
from .unknown_dims import UnknownDimsPass


def conversion(
    report: RewriteReport,
    *,
    static: bool = False,
    contrib: bool = True,
    check: bool = True,
    progress: Progress | None = None,
) -> ir.passes.PassManager:
    """Q/DQ -> spec ops, then onnx's full check (schemas and shape inference included)."""
    rewrite = QdqToSpecPass(static=static, contrib=contrib, report=report, progress=progress)
    return _with_check([UnknownDimsPass(), rewrite], check)


def lowering(report: RewriteReport, *, check: bool = True) -> ir.passes.PassManager:
    """Spec ops -> standard Q/DQ, then onnx's full check."""
    return _with_check([UnknownDimsPass(), SpecToQdqPass(report=report)], check)


def _with_check(passes: list[ir.passes.PassBase], check: bool) -> ir.passes.PassManager:
    if check:
        passes.append(FullCheckPass())
    return ir.passes.PassManager(passes, steps=1)


def run(manager: ir.passes.PassManager, model: ir.Model) -> ir.passes.PassResult:
    """Run ``manager`` on ``model``; a failing pass raises its own error, not onnx-ir's
    PassError wrappers (which name the pipeline, not the node or rule at fault)."""
    try:
        return manager(model)
    except ir.passes.PassError as error:
        cause: BaseException = error
        while isinstance(cause, ir.passes.PassError) and cause.__cause__ is not None:
            cause = cause.__cause__
        raise cause from None
