"""Whether fusion "onnxruntime" gave every converted integer op and QOperator node back to
onnxruntime as the original's node (quantgraph.fusion.ort.ort_engine): then both sides run the same
kernels on the same integers and must be identical, where unfused they compute another
arithmetic (:mod:`.integer_sums`, :mod:`.qoperator`).

A chain lowering could not fold back (exposed intermediate outputs, an edited model) goes to
onnxruntime as Q/DQ or runs alone: it stays judged by the bound.
"""

from __future__ import annotations

import onnx_ir as ir

from ...fusion.plan import GIVEN_BACK, ONNXRUNTIME, FusionPlan
from ...ir.walk import all_graphs, spec_op
from ...passes.integer.integer_ops import RECORD as INTEGER_RECORD
from ...passes.integer.qoperator import RECORD as QOPERATOR_RECORD


def all_given_back(model: ir.Model, fusion: str, plan: FusionPlan | None) -> bool:
    """True when ``model`` holds converted integer ops or QOperator nodes and the fusion
    ``plan`` (mode "onnxruntime") gave each one's spec ops back in the original's node."""
    if fusion != ONNXRUNTIME or plan is None:
        return False
    back = {name for u in plan.units if u.reason.startswith(GIVEN_BACK) for name in u.nodes}
    chains = [_chain(node) for g in all_graphs(model) for node in g if _recorded(node)]
    return bool(chains) and all(name in back for chain in chains for name in chain)


def _recorded(node: ir.Node) -> bool:
    return INTEGER_RECORD in node.metadata_props or QOPERATOR_RECORD in node.metadata_props


def _chain(node: ir.Node) -> list[str]:
    """The spec ops dequantizing ``node``'s inputs, and for a QOperator the one quantizing its
    output (an int32 bias stays a standard DequantizeLinear: no spec op)."""
    found = [v.producer() for v in node.inputs if v is not None]
    if QOPERATOR_RECORD in node.metadata_props and node.outputs:
        found += [use.node for use in node.outputs[0].uses()]
    return [n.name or _key(n) for n in found if n is not None and spec_op(n) is not None]


def _key(node: ir.Node) -> str:
    return node.outputs[0].name or "" if node.outputs else ""
