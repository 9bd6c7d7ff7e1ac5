"""The way back for :mod:`.integer_ops`: DynamicDequantize x2 -> MatMul/Conv with the conversion's
record  ->  MatMulInteger/ConvInteger -> Cast -> Mul(Mul(sa, sw)), as quantize_dynamic wrote them.

Runs before :class:`.dynamic_quantize_linear.RestoreDynamicQuantizeLinearPass` (which gives the
DynamicQuantizeLinear back and rewires its scale and zero point to the restored Mul and integer
op) and before :class:`.spec_to_qdq.SpecToQdqPass`. The weight initializer is the original one
(never copied); its scale and zero point get their names and shapes back. A chain someone
changed since (a dequantize whose scale is not a reshaped run-time value, an unknown op) is left
to the Q/DQ lowering.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array, optional_input
from ...ir.walk import GraphLike, is_standard
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE
from ..node_rewrite import NodeRewritePass
from .integer_ops import RECORD, restored


class RestoreIntegerOpsPass(NodeRewritePass):
    """Folds each recorded MatMul/Conv back into quantize_dynamic's integer op and chain."""

    def matches(self, node: ir.Node) -> bool:
        return is_standard(node) and RECORD in node.metadata_props

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        record: dict[str, Any] = json.loads(node.metadata_props[RECORD])
        found = [_operand(node, i, record, factory) for i in (0, 1)]
        if any(f is None for f in found):
            return None
        (qa, sa, za, deq_a), (qb, sb, zb, deq_b) = found  # type: ignore[misc]
        zero_a, zero_b = record["zero_points"]
        inputs: list[ir.Value | None] = [qa, qb]
        if zero_a or zero_b:
            inputs += [za if zero_a else None, zb if zero_b else None]
        while inputs and inputs[-1] is None:
            inputs.pop()
        op: str = record["op"]
        integer = ir.Node(
            "",
            op,
            inputs,
            list(node.attributes.values()),
            name=record["node"],
            version=record.get("version"),
            num_outputs=1,
        )
        integer.outputs[0].name = record["integer"]
        integer.outputs[0].type = ir.TensorType(ir.DataType.INT32)
        cast_name, cast_out = record["cast"]
        cast = ir.Node(
            "", "Cast", [integer.outputs[0]], [ir.AttrInt64("to", 1)], name=cast_name, num_outputs=1
        )
        cast.outputs[0].name = cast_out
        cast.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        scales_name, product_name, a_first = record["scales"]
        pair = [sa, sb] if a_first[0] else [sb, sa]
        scales = ir.Node("", "Mul", pair, name=scales_name, num_outputs=1)
        scales.outputs[0].name = product_name
        scales.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
        _, cast_index = record["final"]
        final_inputs: list[ir.Value | None] = [cast.outputs[0], scales.outputs[0]]
        if cast_index == 1:
            final_inputs.reverse()
        for new in (scales, integer, cast):
            graph.insert_before(node, new)
        self.stale += list(node.inputs)
        replace_node(node, ("", "Mul", None), final_inputs, [], ir.DataType.FLOAT)
        node.metadata_props.pop(RECORD)
        for dead in {id(deq_a): deq_a, id(deq_b): deq_b}.values():
            _remove_unused(graph, dead, self.stale)
        return op, "restored with its Cast and scale Muls"


def _operand(
    node: ir.Node, index: int, record: dict[str, Any], factory: ConstantFactory
) -> tuple[ir.Value, ir.Value, ir.Value | None, ir.Node] | None:
    """(q, scale, zero point, the DynamicDequantize) of input ``index``, as the original had
    them, or None when the dequantize is not the conversion's any more."""
    value = node.inputs[index]
    deq = value.producer() if value is not None else None
    if deq is None or deq.domain != DOMAIN or deq.op_type != DYNAMIC_DEQUANTIZE.name:
        return None
    q, scale, zp = deq.inputs[0], optional_input(deq, 1), optional_input(deq, 2)
    if q is None or scale is None:
        return None
    weight = record.get(f"weight{index}")
    if weight is None:  # a DynamicQuantizeLinear's output: the values before the Reshape
        sources = [_before_reshape(v) for v in (scale, zp)]
        if sources[0] is None or (zp is not None and sources[1] is None):
            return None
        return q, sources[0], sources[1], deq
    scale_record, zp_record = weight
    restored_scale = _initializer(scale_record, scale, factory, deq)
    restored_zp = None if zp_record is None else _initializer(zp_record, zp, factory, deq)
    if restored_scale is None or (zp_record is not None and restored_zp is None):
        return None
    return q, restored_scale, restored_zp, deq


def _initializer(
    record: list[object], now: ir.Value | None, factory: ConstantFactory, before: ir.Node
) -> ir.Value | None:
    """The recorded constant under its name, with its bytes, where its values are still the
    ones the dequantize reads (a broadcast scalar's 1-D copy is its one value repeated)."""
    tensor = restored(record)
    current = constant_array(now)
    if tensor is None or current is None:
        return None
    array = tensor.numpy()
    if array.size not in (1, current.size) or not np.array_equal(
        np.broadcast_to(array.reshape(-1), current.shape), current
    ):
        return None
    return factory.constant(str(record[0]), array, before, like=now, tensor=tensor)


def _before_reshape(value: ir.Value | None) -> ir.Value | None:
    producer = value.producer() if value is not None else None
    if producer is None or producer.op_type != "Reshape" or not is_standard(producer):
        return None
    return producer.inputs[0]


def _remove_unused(graph: GraphLike, dead: ir.Node, stale: list[ir.Value | None]) -> None:
    """``dead`` and the Reshapes of its run-time scale and zero point, once nothing uses them."""
    if dead.outputs[0].uses() or dead.outputs[0].is_graph_output():
        return
    inputs = list(dead.inputs)
    graph.remove(dead, safe=True)
    for value in inputs[1:]:
        producer = value.producer() if value is not None else None
        if (
            value is not None
            and producer is not None
            and producer.op_type == "Reshape"
            and not value.uses()
            and not value.is_graph_output()
        ):
            stale.extend(producer.inputs)
            graph.remove(producer, safe=True)
    stale.extend(inputs)
