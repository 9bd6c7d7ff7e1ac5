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

from .._ir import ConstantFactory, GraphLike, optional_input, spec_op
from ..spec import dst_type
from .node_rewrite import NodeRewritePass


class DeclaredDstPass(NodeRewritePass):
    """Quantize ops whose output type only the model's declaration decides get it as
    ``output_dtype``."""

    def matches(self, node: ir.Node) -> bool:
        op = spec_op(node)
        return op is not None and op.is_quantize and "output_dtype" not in node.attributes

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        op = spec_op(node)
        assert op is not None
        output = node.outputs[0]
        declared = output.dtype
        if declared is None:
            return None
        zps = None if op.is_static else optional_input(node, 2)
        zps_type = int(zps.dtype) if zps is not None and zps.dtype is not None else None
        undecided = dst_type(op, zps=zps_type)
        if dst_type(op, zps=zps_type, declared=int(declared)) == undecided:
            return None  # zps decide it, or the declaration says what the default says
        node.attributes["output_dtype"] = ir.AttrInt64("output_dtype", int(declared))
        return node.op_type, f"output_dtype={declared.name} (the declared dst type)"
