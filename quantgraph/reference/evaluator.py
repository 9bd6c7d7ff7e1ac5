"""The spec's operators for ``onnx.reference.ReferenceEvaluator(model, new_ops=REFERENCE_OPS)``.

One OpRun class per spec op, made from the spec: each hands its inputs and the node's
attributes to :func:`.operators.run`, which applies the spec's defaults and rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference.op_run import OpRun

from ..spec import DOMAIN, OPS, OpSpec
from .operators import run


def _op_run(op: OpSpec) -> type[OpRun]:
    def _run(self: OpRun, *inputs: np.ndarray | None, **attributes: Any) -> tuple[np.ndarray]:
        node = str(getattr(self.onnx_node, "name", "") or "")
        return (run(op, inputs, attributes, node=node),)

    return type(op.name, (OpRun,), {"op_domain": DOMAIN, "_run": _run})


REFERENCE_OPS: list[type[OpRun]] = [_op_run(op) for op in OPS.values()]
