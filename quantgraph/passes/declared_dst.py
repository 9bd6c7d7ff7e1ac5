"""The seed's dst rule made explicit: "the target quantized data type is specified via the data
type of output logical tensor".

A quantize op whose dst neither ``output_dtype`` nor s8/u8 zps decide takes the type the model
declares for its output (graph output or value_info). Kernels in onnxruntime and ONNX's shape
inference cannot see a declared type (onnxruntime infers the output's type before comparing it
with the declaration, and ONNX's inference context hides it), so this pass writes the declared
type as ``output_dtype``: the same dst, now visible to every backend and to the schemas.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.rewrite import ConstantFactory
from ..ir.values import optional_input
from ..ir.walk import GraphLike, all_graphs, spec_op
from ..spec import dst_type
from .node_rewrite import NodeRewritePass


def declared_output_dtype(node: ir.Node) -> int | None:
    """The ``output_dtype`` a quantize op needs because only its declared output type decides
    its dst; None when it needs none (the attribute is there, zps or the default decide, or
    nothing is declared)."""
    op = spec_op(node)
    if op is None or not op.is_quantize or "output_dtype" in node.attributes:
        return None
    declared = node.outputs[0].dtype
    if declared is None:
        return None
    zps = None if op.is_static else optional_input(node, 2)
    zps_type = int(zps.dtype) if zps is not None and zps.dtype is not None else None
    if dst_type(op, zps=zps_type, declared=int(declared)) == dst_type(op, zps=zps_type):
        return None  # zps decide it, or the declaration says what the default says
    return int(declared)


def needs_declared_dst(model: ir.Model) -> bool:
    """Whether :class:`DeclaredDstPass` would change ``model`` (no copy needed otherwise)."""
    return any(declared_output_dtype(n) is not None for g in all_graphs(model) for n in g)


class DeclaredDstPass(NodeRewritePass):
    """Quantize ops whose output type only the model's declaration decides get it as
    ``output_dtype``."""

    def matches(self, node: ir.Node) -> bool:
        return declared_output_dtype(node) is not None

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        declared = declared_output_dtype(node)
        if declared is None:
            return None
        node.attributes["output_dtype"] = ir.AttrInt64("output_dtype", declared)
        name = ir.DataType(declared).name
        return node.op_type, f"output_dtype={name} (the declared dst type)"
