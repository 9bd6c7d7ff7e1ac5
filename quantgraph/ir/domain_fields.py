"""An empty domain written explicitly (``domain: ""``), kept where quantgraph restores a node.

onnx-ir cannot hold the difference: it reads an explicit empty domain (and ``ai.onnx``) as the
unset one and writes none. quantize_static writes ``domain=""`` on its QLinearMatMul; a node
that lowering restores from its record gets the field back: the restoring pass marks the node
(:func:`mark_explicit_empty`: ``node.meta``, never serialized) and :func:`write_domain_fields`
sets the field in the proto serialized from it.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from .model_files import source_proto
from .walk import proto_graphs

EXPLICIT_EMPTY = "quantgraph.explicit_empty_domain"  # node.meta key: write domain: ""
_MARKED = "quantgraph.explicit_empty_marked"  # model.meta key: some node is marked
_INDEX = "quantgraph.explicit_empty_index"  # model.meta key: (proto, names -> explicit or not)


def explicit_empty_domain(model: ir.Model, node: ir.Node) -> bool:
    """Whether the proto ``model`` was read from writes ``node`` (found by name, unique in every
    graph of it) with an explicit empty domain field. The proto is read once a model: each
    name's answer (None for a name several nodes have) is kept."""
    proto = source_proto(model)
    if proto is None or not node.name:
        return False
    cached = model.meta.get(_INDEX)
    if cached is None or cached[0] is not proto:
        index: dict[str, bool | None] = {}
        for graph in proto_graphs(proto.graph):
            for found in graph.node:
                explicit = found.HasField("domain") and found.domain == ""
                index[found.name] = None if found.name in index else explicit
        cached = (proto, index)
        model.meta[_INDEX] = cached
    return bool(cached[1].get(node.name))


def mark_explicit_empty(model: ir.Model, node: ir.Node) -> None:
    """Have :func:`write_domain_fields` write ``node`` with an explicit empty domain."""
    node.meta[EXPLICIT_EMPTY] = True
    model.meta[_MARKED] = True


def write_domain_fields(model: ir.Model, proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` (``model`` serialized by ``ir.to_proto``, node for node) with the explicit
    empty domain of every node marked by :func:`mark_explicit_empty`; changed in place,
    returned. A model without marks is not walked."""
    if model.meta.get(_MARKED):
        _write(model.graph, proto.graph)
    return proto


def _write(graph: ir.Graph, proto: onnx.GraphProto) -> None:
    for node, node_proto in zip(graph, proto.node, strict=True):
        if node.meta.get(EXPLICIT_EMPTY) and not node.domain:
            node_proto.domain = ""  # proto2: setting "" marks the field present
        # ir.to_proto writes attributes, and the graphs in them, in the node's order
        subgraphs = [g for attribute in node.attributes.values() for g in _inner(attribute)]
        sub_protos = [
            g
            for attribute in node_proto.attribute
            for g in ([attribute.g] if attribute.HasField("g") else list(attribute.graphs))
        ]
        for sub, sub_proto in zip(subgraphs, sub_protos, strict=True):
            _write(sub, sub_proto)


def _inner(attribute: ir.Attr) -> list[ir.Graph]:
    if attribute.type == ir.AttributeType.GRAPH:
        return [attribute.as_graph()]
    if attribute.type == ir.AttributeType.GRAPHS:
        return list(attribute.as_graphs())
    return []
