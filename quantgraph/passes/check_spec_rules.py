"""Check every quantgraph op node against the spec's rules, with what the model declares.

Changes nothing: a node that breaks a rule (one no backend could run) raises the rule's
:class:`~quantgraph.spec.SpecError`, naming the node, before any session is made.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.values import constant_array, elem_type, optional_input, value_shape
from ..ir.walk import spec_nodes
from ..spec import NodeFacts, OpSpec, check_node


def node_facts(node: ir.Node, op: OpSpec) -> NodeFacts:
    """What the model says about one node: attributes, declared types and shapes, constants."""
    src = optional_input(node, 0)
    scales = None if op.is_static else optional_input(node, 1)
    zps = None if op.is_static else optional_input(node, 2)
    output = node.outputs[0] if node.outputs else None

    def known(value: ir.Value | None) -> int | None:
        found = elem_type(value)
        return None if found is None else int(found)

    return NodeFacts(
        attributes={name: attr.value for name, attr in node.attributes.items()},
        src=known(src),
        scales=known(scales),
        zps=known(zps),
        has_scales=scales is not None,
        has_zps=zps is not None,
        declared_dst=known(output),
        src_shape=value_shape(src) if src is not None else None,
        scales_shape=value_shape(scales) if scales is not None else None,
        zps_shape=value_shape(zps) if zps is not None else None,
        scale_values=constant_array(scales),
    )


class CheckSpecRulesPass(ir.passes.InPlacePass):
    """Raises the first broken spec rule of any quantgraph op node; modifies nothing."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        for _, node, op in spec_nodes(model):
            check_node(op, node.name or "", node_facts(node, op))
        return ir.passes.PassResult(model, modified=False)
