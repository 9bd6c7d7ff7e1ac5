"""The compute nodes onnxruntime reads a Q/DQ node with when it rewrites them, though it may
leave that Q/DQ node itself as it is.

onnxruntime's optimizer changes some float nodes by the Q/DQ around them without fusing or
changing those Q/DQ: its WeightBiasQuantization quantizes the float bias (and a float weight)
of a Conv, ConvTranspose or Gemm whose input comes from a DequantizeLinear and whose output
goes to a QuantizeLinear (directly or through Relu/Clip), and where no integer kernel takes the
unit (s8 activations on x86, u8 in and s8 out: NNCF's mixed preset writes both) the Conv stays
a float Conv with an int32-rounded bias. A custom op in such a DequantizeLinear's place hides
it: the Conv keeps its float bias and every value it writes differs. So a Q/DQ node stays a
spec op only if its neighbours here come out of the optimizer unchanged too.

The layout transformer (NhwcTransformer, the transpose optimizer) decides where its Transposes
go by the op types around them too. After a channels-last QLinearConv it writes the
channels-first tensor through a Transpose, and pushes that Transpose on through the
DequantizeLinear reading it in the original; a custom op there stopped it, and the QLinearMul of
a squeeze-excite block then ran channels-first with a Transpose after it, where the original's
ran channels-last. So a Q/DQ node that reads what one of those Transposes writes goes to
onnxruntime in its Q/DQ form too.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from ...ir.walk import all_graphs, proto_graphs

QDQ = ("QuantizeLinear", "DequantizeLinear")
# What onnxruntime's node units allow between a compute node and the QuantizeLinear of its
# output (NodeGroupSelector::GetQDQSelection, WeightBiasQuantization's path check).
THROUGH = ("Relu", "Clip")


def neighbours(node: ir.Node) -> list[ir.Node]:
    """The compute nodes a Q/DQ ``node`` (in Q/DQ form) belongs to as onnxruntime groups
    them: a DequantizeLinear's readers; a QuantizeLinear's producer and, through a chain of
    Relu/Clip with one reader each, the node before them."""
    if node.op_type == "DequantizeLinear":
        return [use.node for use in node.outputs[0].uses() if use.node.op_type not in QDQ]
    found: list[ir.Node] = []
    value = node.inputs[0] if node.inputs else None
    while value is not None:
        source = value.producer()
        if source is None or source.op_type in QDQ:
            break
        found.append(source)
        if source.op_type not in THROUGH or not source.inputs:
            break
        value = source.inputs[0]
        if value is None or len(value.uses()) != 1:
            break
    return found


def by_layout(optimized: onnx.ModelProto, lowered: ir.Model) -> set[str]:
    """Names of the values the Transposes the optimizer inserted write (a Transpose whose
    output no Transpose of ``lowered`` writes), in every graph."""
    own = {
        v.name
        for g in all_graphs(lowered)
        for n in g
        if n.op_type == "Transpose"
        for v in n.outputs
        if v.name
    }
    return {
        node.output[0]
        for graph in proto_graphs(optimized.graph)
        for node in graph.node
        if node.op_type == "Transpose" and node.output and node.output[0] not in own
    }
