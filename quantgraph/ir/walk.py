"""Walking a model: every graph and function, the spec op nodes, opsets and names in use.
Knows the spec's op names, nothing of runtimes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import onnx_ir as ir

if TYPE_CHECKING:
    import onnx

from ..spec import DOMAIN, OPS, OpSpec

GraphLike = ir.Graph | ir.Function

STANDARD_DOMAINS = ("", "ai.onnx")


def spec_op(node: ir.Node) -> OpSpec | None:
    """The spec of a quantgraph op node, None for any other node."""
    return OPS.get(node.op_type) if node.domain == DOMAIN else None


def spec_nodes(model: ir.Model) -> Iterator[tuple[GraphLike, ir.Node, OpSpec]]:
    """Every quantgraph op node of every graph and function, with its graph and spec."""
    for graph in all_graphs(model):
        for node in graph:
            op = spec_op(node)
            if op is not None:
                yield graph, node, op


def all_graphs(model: ir.Model) -> Iterator[GraphLike]:
    """The main graph, every subgraph (If/Loop/Scan bodies) and every model-local function."""
    yield model.graph
    yield from subgraphs(model.graph)
    for function in model.functions.values():
        yield function
        yield from subgraphs(function)


def subgraphs(graph: GraphLike) -> Iterator[ir.Graph]:
    """Every graph nested in ``graph``'s nodes' attributes, depth first (inside
    :func:`graphs_fixed`, as its walk found them)."""
    known = _known_subgraphs.get(id(graph))
    if known is not None and known[0] is graph:
        yield from known[1]
        return
    yield from _nested(graph)


# Inside graphs_fixed(): id(graph) -> (graph, its subgraphs) of the main graph and functions.
_known_subgraphs: dict[int, tuple[GraphLike, tuple[ir.Graph, ...]]] = {}


@contextmanager
def graphs_fixed(model: ir.Model) -> Iterator[None]:
    """Within the block, :func:`subgraphs` (so :func:`all_graphs`) of ``model``'s main graph and
    functions answer from one walk made on entry, where each call walked every node's
    attributes (~50 ms on a 100k-node graph; a conversion asked ~15 times).

    For work that adds and removes no node holding a graph (If/Loop/Scan body) and no function:
    the pass pipelines (their passes rewrite quantization nodes and their neighbours). A block
    inside another on the same model uses the outer one's walk.
    """
    tops: list[GraphLike] = [model.graph, *model.functions.values()]
    fresh = [graph for graph in tops if id(graph) not in _known_subgraphs]
    for graph in fresh:
        _known_subgraphs[id(graph)] = (graph, tuple(_nested(graph)))
    try:
        yield
    finally:
        for graph in fresh:
            _known_subgraphs.pop(id(graph), None)


def _nested(graph: GraphLike) -> Iterator[ir.Graph]:
    """:func:`subgraphs` walked. A plain loop: onnx-ir's recursive iterator costs ~1.5 µs a
    node, which adds up on 100k-node graphs that are walked several times."""
    graph_types = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
    for node in graph:
        attributes = node.attributes
        if not attributes:
            continue
        for attr in attributes.data.values():  # the dict itself: half the cost of .values()
            if attr.type not in graph_types:
                continue
            for inner in [attr.as_graph()] if attr.type == graph_types[0] else attr.as_graphs():
                yield inner
                yield from _nested(inner)


def opset_version(model: ir.Model, graph: GraphLike, domain: str = "") -> int | None:
    """The opset a node of ``domain`` in ``graph`` runs at (functions carry their own imports)."""
    imports = graph.opset_imports if isinstance(graph, ir.Function) else model.opset_imports
    version = imports.get(domain)
    if version is None and domain == "":
        version = imports.get("ai.onnx")
    return version


def is_standard(node: ir.Node) -> bool:
    return node.domain in STANDARD_DOMAINS


def only_user(value: ir.Value) -> ir.Node | None:
    """The one node reading ``value``, None when several or none do or the graph returns it
    (a chain a pass folds must not be read anywhere else)."""
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    user: ir.Node = uses[0].node
    return user


def used_names(model: ir.Model) -> set[str]:
    """Every value and node name in the model, so that new names collide with none."""
    names: set[str] = set()
    for graph in all_graphs(model):
        names.update(v.name for v in graph.inputs if v.name)
        if isinstance(graph, ir.Graph):
            names.update(graph.initializers)
        for node in graph:
            if node.name:
                names.add(node.name)
            names.update(v.name for v in node.outputs if v.name)
    return names


def proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """A GraphProto and every graph its nodes' attributes hold (If/Loop/Scan bodies), depth
    first: for serialized models, where :func:`subgraphs` walks onnx-ir's."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from proto_graphs(attribute.g)
            for sub in attribute.graphs:
                yield from proto_graphs(sub)
