"""Blocked DequantizeLinear whose last block is short, in a form the spec's per_group can take.

ONNX lets the last block along ``axis`` be short (onnxruntime's MatMulNBitsQuantizer writes
K = 56 with blocks of 16: scales have ceil(K/B) rows); oneDNN's per_group needs groups that tile
src exactly. For a constant src the padding is free and exact:

DequantizeLinear(w[K], s, zp, block_size=B)
    ->  DequantizeLinear(w_padded[ceil(K/B)*B], s, zp, block_size=B) -> Slice(0:K on axis)

The padding is zeros (dequantized, then sliced away), scales and zero points are unchanged (they
already have ceil(K/B) rows). The Slice carries a marker in its metadata; :class:`TrimPaddedBlocks
Pass` folds a marked pair back into the original node (lowering, and nodes the rewrite skipped).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array
from ...ir.walk import GraphLike, is_standard
from ...spec import resolve_axis
from ..node_rewrite import NodeRewritePass
from .qdq_to_spec import ONNX_DEFAULT_AXIS, PADDED_META

PADDED = "quantgraph.padded_block"  # Slice metadata: "<original extent>"
_SUFFIX = "_padded"


def _blocked(node: ir.Node) -> bool:
    return (
        node.op_type == "DequantizeLinear"
        and is_standard(node)
        and node.attributes.get_int("block_size", 0) > 0
    )


def _copy(node: ir.Node) -> list[ir.Attr]:
    return [ir.Attr(a.name, a.type, a.value) for a in node.attributes.values()]


class PadShortBlocksPass(NodeRewritePass):
    """Pads a constant src with a short last block to whole blocks, then slices the result."""

    op_types = frozenset({"DequantizeLinear"})

    def matches(self, node: ir.Node) -> bool:
        return _blocked(node)

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        source = node.inputs[0]
        array = constant_array(source)
        if source is None or array is None or len(node.inputs) < 2:
            return None  # the rewrite says why it cannot take a fed src
        block = node.attributes.get_int("block_size", 0)
        axis = resolve_axis(node.attributes.get_int("axis", ONNX_DEFAULT_AXIS), array.ndim)
        if axis is None or array.shape[axis] % block == 0:
            return None
        extent = array.shape[axis]
        padded_extent = -(-extent // block) * block
        widths = [(0, padded_extent - extent if d == axis else 0) for d in range(array.ndim)]
        padded_array = np.pad(array, widths)
        padded = factory.constant(f"{source.name}{_SUFFIX}", padded_array, node)

        output = node.outputs[0]
        name = node.name or factory.unique_name("DequantizeLinear")
        dequantize = ir.Node(
            node.domain,
            node.op_type,
            [padded, *node.inputs[1:]],
            _copy(node),
            name=name,
            version=node.version,
            doc_string=node.doc_string,
            metadata_props=dict(node.metadata_props),
            num_outputs=1,
        )
        dequantize.meta[PADDED_META] = (extent, padded_extent)
        result = dequantize.outputs[0]
        result.name = factory.unique_name(f"{output.name or name}{_SUFFIX}")
        if output.type is not None:
            result.type = output.type
            result.shape = ir.Shape(padded_array.shape)
        graph.insert_before(node, dequantize)

        # The node itself becomes the Slice: its output (name, users, value_info) stays.
        ends = [extent]
        inputs: list[ir.Value | None] = [
            result,
            factory.constant("quantgraph_zero_1", np.zeros(1, np.int64), node),
            factory.constant(f"quantgraph_ends_{extent}", np.array(ends, np.int64), node),
            factory.constant(f"quantgraph_axes_{axis}", np.array([axis], np.int64), node),
        ]
        scale_type = node.inputs[1].dtype if node.inputs[1] is not None else None
        self.stale += replace_node(
            node, ("", "Slice", None), inputs, [], scale_type or ir.DataType.FLOAT
        )
        node.name = factory.unique_name(f"{name}_unpad")
        node.doc_string = None
        node.metadata_props.clear()
        node.metadata_props[PADDED] = str(extent)
        return None  # not a conversion: the rewrite that follows reports the node


class TrimPaddedBlocksPass(NodeRewritePass):
    """Folds ``DequantizeLinear(padded) -> marked Slice`` back into the original node."""

    op_types = frozenset({"Slice"})

    def matches(self, node: ir.Node) -> bool:
        return node.op_type == "Slice" and is_standard(node) and PADDED in node.metadata_props

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        sliced = node.inputs[0]
        dequantize = sliced.producer() if sliced is not None else None
        if (
            sliced is None
            or dequantize is None
            or not _blocked(dequantize)
            or len(sliced.uses()) != 1
            or sliced.is_graph_output()
        ):
            return None  # still a spec op (a partial lowering) or changed by someone else
        source = dequantize.inputs[0]
        array = constant_array(source)
        extent_text = node.metadata_props[PADDED]
        if source is None or array is None or not extent_text.isdigit():
            return None
        extent = int(extent_text)
        axis = resolve_axis(dequantize.attributes.get_int("axis", ONNX_DEFAULT_AXIS), array.ndim)
        if axis is None or array.shape[axis] < extent:
            return None
        trimmed = np.take(array, np.arange(extent), axis=axis)
        base = source.name or "weight"
        base = base[: -len(_SUFFIX)] if base.endswith(_SUFFIX) else base
        original = factory.constant(base, trimmed, node)
        name, doc = dequantize.name, dequantize.doc_string
        attributes = _copy(dequantize)
        metadata = dict(dequantize.metadata_props)
        rest = list(dequantize.inputs[1:])
        self.stale += [source, *node.inputs[1:]]
        replace_node(
            node,
            (dequantize.domain, "DequantizeLinear", dequantize.version),
            [original, *rest],
            attributes,
            ir.DataType.FLOAT,
        )
        graph.remove(dequantize, safe=True)
        node.name, node.doc_string = name, doc
        node.metadata_props.clear()
        node.metadata_props.update(metadata)
        return None  # the lowering reports the node
