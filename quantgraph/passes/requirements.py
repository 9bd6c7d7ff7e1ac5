"""What passes need of a model and of onnx, declared as onnx-ir's ``PassBase.requires`` /
``ensures`` hooks rather than checked by every caller before a pipeline runs.

A failing requirement raises :class:`ModelError` with the sentence users see; onnx-ir wraps it in
a PreconditionError, which :func:`quantgraph.passes.pipelines.run` unwraps again.
"""

from __future__ import annotations

import onnx_ir as ir

from ..errors import ModelError
from ..ir.onnx_schemas import register
from ..ir.opsets import default_opset, opset_problem
from ..spec import DOMAIN


def supported_opset(model: ir.Model) -> None:
    """The model's ONNX opset is one quantgraph's rewrites, schemas and lowering know
    (:data:`quantgraph.ir.opsets.MIN_OPSET`..``MAX_OPSET``), or the model imports none."""
    problem = opset_problem(default_opset(model))
    if problem is not None:
        raise ModelError(problem)


def schemas_registered() -> None:
    """quantgraph's op schemas are known to onnx: the checker and the shape inference a rewrite
    asks for meet spec ops (registering is idempotent, so the requirement establishes itself)."""
    register()


def spec_domain_imported(model: ir.Model) -> None:
    """Every graph and function holding a spec op imports quantgraph's domain (what a rewrite
    into spec ops ensures)."""
    scopes: list[tuple[str, ir.Graph | ir.Function]] = [("the model", model.graph)]
    scopes += [(f"function '{f.name}'", f) for f in model.functions.values()]
    for label, scope in scopes:
        imports = model.opset_imports if isinstance(scope, ir.Graph) else scope.opset_imports
        if DOMAIN not in imports and any(n.domain == DOMAIN for n in scope.all_nodes()):
            raise ModelError(f"{label} holds {DOMAIN} ops but does not import {DOMAIN}")
