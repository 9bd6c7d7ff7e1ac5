"""The way back for :mod:`.gather_block_quantized`: Gather(q), Gather(scales)[, Gather(zps)] ->
DynamicDequantize [-> Slice] with the conversion's record  ->  the original com.microsoft
GatherBlockQuantized (same attributes, initializer names and bytes).

Runs before :class:`.spec_to_qdq.SpecToQdqPass`; ``lower(to_qdq=True)`` leaves it out (the
Gathers then feed a blocked DequantizeLinear). A chain someone changed since (another user of a
gathered value, other indices per Gather) is not the record's any more: it is left to the Q/DQ
lowering.
"""

from __future__ import annotations

import json
from typing import Any

import ml_dtypes
import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory
from ...ir.values import constant_array, optional_input
from ...ir.walk import GraphLike, is_standard, only_user
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE
from ..node_rewrite import NodeRewritePass
from . import nbits_layout as layout
from .gather_block_quantized import DEFAULTS, RECORD
from .restore_nbits import restore_contrib_node


class RestoreGatherBlockQuantizedPass(NodeRewritePass):
    """Folds each recorded chain back into its GatherBlockQuantized."""

    op_types = frozenset({DYNAMIC_DEQUANTIZE.name, "Slice"})

    def matches(self, node: ir.Node) -> bool:
        return RECORD in node.metadata_props and (
            (node.domain == DOMAIN and node.op_type == DYNAMIC_DEQUANTIZE.name)
            or (node.op_type == "Slice" and is_standard(node))
        )

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        chain = _chain(node)
        if chain is None:
            return None
        dequantize, gathers = chain
        record: dict[str, Any] = json.loads(node.metadata_props[RECORD])
        attrs: dict[str, int] = record["attributes"]
        bits = attrs.get("bits", DEFAULTS["bits"])
        d_name, d_type, d_shape = record["data"]
        rank = len(d_shape)
        axis = attrs.get("quantize_axis", DEFAULTS["quantize_axis"]) % rank
        table = constant_array(gathers[0].inputs[0])
        zps = constant_array(gathers[2].inputs[0]) if len(gathers) > 2 else None
        if table is None or (bool(record["zero_points"]) != (zps is not None)):
            return None
        values = np.take(table.astype(np.int16), np.arange(record["extent"]), axis=axis)
        packed = d_type == int(ir.DataType.UINT8)
        if packed and zps is None:
            values = values + layout.default_zero_point(bits)
        inputs: list[ir.Value | None] = [
            factory.constant(d_name, _stored(values, d_type, bits, d_shape), node),
            gathers[0].inputs[1],  # indices
            gathers[1].inputs[0],  # the scales initializer, never changed
        ]
        if zps is not None:
            z_name, z_type, z_shape = record["zero_points"]
            if packed:  # the last byte's unused bits, as the original had them
                padding = record.get("zero_point_padding", [])
                extra = z_shape[-1] * 8 // bits - zps.shape[-1]
                if extra:
                    fill = np.broadcast_to(np.asarray(padding, np.uint8), (*zps.shape[:-1], extra))
                    zps = np.concatenate([zps.astype(np.uint8), fill], axis=-1)
            inputs.append(factory.constant(z_name, _stored(zps, z_type, bits, z_shape), node))

        self.stale += [v for g in gathers for v in g.inputs]
        dead = [*gathers, *([dequantize] if dequantize is not node else [])]
        self.stale += restore_contrib_node(
            model, graph, node, "GatherBlockQuantized", record, inputs, attrs
        )
        node.metadata_props.pop(RECORD)
        for gone in reversed(dead):  # users first
            graph.remove(gone, safe=True)
        node.name = record["node"] or node.name
        return "GatherBlockQuantized", (
            f"{ir.DataType(d_type).name.lower()} data, {bits}-bit, block_size "
            f"{attrs.get('block_size', DEFAULTS['block_size'])}"
            + (", zero points" if zps is not None else "")
        )


def _stored(values: np.ndarray, dtype: int, bits: int, shape: list[int]) -> np.ndarray:
    """Plain values -> the original initializer's array (uint8 packs ``bits`` per element)."""
    if dtype == int(ir.DataType.UINT8):
        return layout.pack(values.astype(np.uint8), bits, shape[-1]).reshape(shape)
    kind = ml_dtypes.int4 if dtype == int(ir.DataType.INT4) else ml_dtypes.uint4
    return np.asarray(values).astype(kind).reshape(shape)


def _chain(last: ir.Node) -> tuple[ir.Node, list[ir.Node]] | None:
    """(the DynamicDequantize, its Gathers of q, scales[, zps]) ending at ``last``, or None."""
    dequantize = last
    if last.op_type == "Slice":
        source = last.inputs[0].producer() if last.inputs[0] is not None else None
        if source is None or source.op_type != DYNAMIC_DEQUANTIZE.name or source.domain != DOMAIN:
            return None
        if only_user(source.outputs[0]) is not last:
            return None
        dequantize = source
    gathers = []
    for index in range(len(dequantize.inputs)):
        value = optional_input(dequantize, index)
        producer = value.producer() if value is not None else None
        if (
            value is None
            or producer is None
            or producer.op_type != "Gather"
            or not is_standard(producer)
            or only_user(value) is not dequantize
        ):
            return None
        gathers.append(producer)
    if len(gathers) < 2 or len({id(g.inputs[1]) for g in gathers}) != 1:
        return None
    return dequantize, gathers
