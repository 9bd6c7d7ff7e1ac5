"""Fusion "auto"'s candidate ``original``: the original's own form.

Every spec op is lowered back to the original's nodes in the session's private copy, in memory,
as ``quantgraph lower`` writes them (:func:`quantgraph.passes.pipelines.lowering`: Q/DQ,
DynamicQuantizeLinear, MatMulNBits, GatherBlockQuantized, integer ops and QOperator nodes
folded back), so that onnxruntime runs what it runs for the original model, at the session's
optimization level: auto's worst case is the original's speed, and where this plan wins the
session computes what the original computes. Nothing is written to disk and no weight is
copied that lowering does not rewrite (the copy shares the caller's tensors). A spec op that
has no standard form (lowering skips it, with the reason) stays and runs on the session's
backend.
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.walk import all_graphs
from ...passes import pipelines
from ...passes.report import RewriteReport
from ..plan import AUTO, GIVEN_BACK, ONNXRUNTIME, FusionPlan, LeftAlone, Unit

QDQ = ("QuantizeLinear", "DequantizeLinear")
WHAT = (
    "every spec op lowered back to the original's nodes (as quantgraph lower writes them), "
    "run by onnxruntime as the original is"
)


def plan(model: ir.Model, why: str) -> FusionPlan:
    """The original's own form, carried out on ``model`` in place: a unit per original node
    lowering gave back (its kernel: that node), the spec ops lowering cannot express alone;
    ``why`` (the decision's sentence) begins each unit's reason."""
    report = RewriteReport()
    pipelines.run(pipelines.lowering(report, check=False), model)
    present = {node.name for graph in all_graphs(model) for node in graph}
    last: dict[tuple[str, str], tuple[str, str]] = {}  # (graph, node) -> (op_type, new op)
    for entry in report.converted_nodes:  # a node lowered, then folded into an original node
        last[(entry.graph, entry.node)] = (entry.op_type, entry.new_op_type)
    units = []
    for (graph, node), (op_type, made) in last.items():
        if made in QDQ and node not in present:  # folded into a QOperator node given back
            continue
        units.append(
            Unit(
                compute="",
                op_type=op_type,
                nodes=(node,),
                engine=ONNXRUNTIME,
                kernel=made,
                graph=graph,
                reason=f"{why}: {GIVEN_BACK}{made}, {WHAT}",
            )
        )
    alone = [
        LeftAlone(s.node, s.op_type, f"no standard form to lower it to: {s.reason}", s.graph)
        for s in report.skipped
    ]
    return FusionPlan(AUTO, units=units, alone=alone)


__all__ = ["WHAT", "plan"]
