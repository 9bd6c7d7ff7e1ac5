"""The way back for :mod:`.qoperator`: DequantizeLinear* -> float op (with the conversion's
record) [-> QuantizeLinear]  ->  the original QOperator node (same op, domain, attributes,
inputs: the initializers the Q/DQ lowering gave back, byte for byte).

Runs after :class:`.spec_to_qdq.SpecToQdqPass` (it reads standard Q/DQ); ``lower(to_qdq=True)``
leaves this pass out. A chain changed since (a DequantizeLinear with another user, a
QuantizeLinear that is not the float op's only user) stays in its Q/DQ form.
"""

from __future__ import annotations

import json
from typing import Any

import onnx_ir as ir

from ...ir.domain_fields import mark_explicit_empty
from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.walk import GraphLike, is_standard, only_user
from ..node_rewrite import NodeRewritePass
from .qoperator import CONTRIB, RECORD, decode_attribute


def _dequantize(value: ir.Value | None, user: ir.Node) -> ir.Node | None:
    """The standard DequantizeLinear producing ``value`` for ``user`` alone."""
    producer = value.producer() if value is not None else None
    if (
        producer is None
        or value is None
        or not is_standard(producer)
        or producer.op_type != "DequantizeLinear"
        or only_user(value) is not user
    ):
        return None
    return producer


class RestoreQOperatorPass(NodeRewritePass):
    """Folds each recorded DequantizeLinear -> op -> QuantizeLinear back into its QOperator."""

    def matches(self, node: ir.Node) -> bool:
        return is_standard(node) and RECORD in node.metadata_props

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        record: dict[str, Any] = json.loads(node.metadata_props[RECORD])
        slots: list[list[Any]] = record["slots"]
        dequantized: dict[int, ir.Node] = {}
        for slot in slots:
            if slot[0] in ("in", "bias"):
                index = slot[1] if slot[0] == "in" else len(node.inputs) - 1
                producer = _dequantize(
                    node.inputs[index] if index < len(node.inputs) else None, node
                )
                if producer is None:
                    return None
                dequantized[index] = producer
        quantize: ir.Node | None = None
        if any(slot[0] == "out" for slot in slots):
            quantize = only_user(node.outputs[0])
            if (
                quantize is None
                or not is_standard(quantize)
                or quantize.op_type != "QuantizeLinear"
            ):
                return None
        inputs: list[ir.Value | None] = []
        for slot in slots:
            kind = slot[0]
            if kind == "in":
                inputs.append(dequantized[slot[1]].inputs[slot[2]])
            elif kind == "bias":
                inputs.append(dequantized[len(node.inputs) - 1].inputs[0])
            elif kind == "out":
                assert quantize is not None
                inputs.append(quantize.inputs[slot[1]])
            else:
                inputs.append(None)
        while inputs and inputs[-1] is None:  # trailing absent optional inputs
            inputs.pop()
        target = quantize if quantize is not None else node
        dead = [*dequantized.values(), *([node] if quantize is not None else [])]
        self.stale += [v for n in dead for v in n.inputs]
        if quantize is not None:
            self.stale += list(quantize.inputs)
        output_type = target.outputs[0].type
        replace_node(
            target,
            (record["domain"], record["op"], record["version"]),
            inputs,
            [decode_attribute(text) for text in record["attributes"]],
            output_type.dtype if output_type is not None else ir.DataType.UINT8,
        )
        target.metadata_props.pop(RECORD, None)
        if record.get("domain_field"):
            mark_explicit_empty(model, target)  # the serialized node writes domain ""
        if record["domain"] == CONTRIB:
            model.opset_imports.setdefault(CONTRIB, 1)
            if isinstance(graph, ir.Function):
                graph.opset_imports.setdefault(CONTRIB, 1)
        for node_gone in [*([node] if quantize is not None else []), *dequantized.values()]:
            graph.remove(node_gone, safe=True)  # users first: the float op, then its inputs
        node.name = target.name  # the report names the node restored
        return record["op"], f"{len(dequantized)} DequantizeLinear + {node.op_type}" + (
            " + QuantizeLinear" if quantize is not None else ""
        )
