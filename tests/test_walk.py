"""quantgraph.ir.walk's graphs_fixed: inside it, subgraphs and all_graphs answer from one walk
made on entry (the same graphs, in the same order, as walking), for that model only."""

from __future__ import annotations

import onnx_ir as ir

from quantgraph.ir import walk
from quantgraph.ir.walk import all_graphs, graphs_fixed, subgraphs
from tests.passes.qdq_models import function_model, if_model


def _walked(model: ir.Model) -> list[int]:
    return [id(graph) for graph in all_graphs(model)]


def test_same_graphs_in_the_same_order_inside_and_out() -> None:
    for proto in (if_model(), function_model(typed=True)):
        model = ir.from_proto(proto)
        outside = _walked(model)
        with graphs_fixed(model):
            assert _walked(model) == outside
            with graphs_fixed(model):  # nested: the outer walk
                assert _walked(model) == outside
            assert _walked(model) == outside  # the inner block left the outer's walk
        assert not walk._known_subgraphs
    assert len(_walked(ir.from_proto(if_model()))) == 5  # main, then (its If: 2), else


def test_walk_made_on_entry_is_used_then_dropped() -> None:
    model = ir.from_proto(if_model())
    with graphs_fixed(model):
        found = list(subgraphs(model.graph))
        if_node = next(node for node in model.graph if node.op_type == "If")
        model.graph.remove(if_node)  # no pass does this inside the block: the walk stands
        assert list(subgraphs(model.graph)) == found
    assert list(subgraphs(model.graph)) == []


def test_a_clone_made_inside_walks_its_own_graphs() -> None:
    model = ir.from_proto(if_model())
    with graphs_fixed(model):
        copy = model.clone()
        theirs = {id(graph) for graph in subgraphs(copy.graph)}
        assert theirs and theirs.isdisjoint(id(graph) for graph in subgraphs(model.graph))
