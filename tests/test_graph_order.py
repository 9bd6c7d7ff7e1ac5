"""Node order of loaded models: cycles are clear errors, unsorted acyclic graphs get sorted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import quantgraph
from quantgraph.errors import ModelError
from quantgraph.ir.model_files import load_model
from quantgraph.ir.node_order import find_cycle, sort_nodes
from tests.bad_models import cyclic_model
from tests.builders import make_model, tensor_info


def _dag(edges: list[list[int]], order: list[int], back_edge: tuple[int, int] | None) -> bytes:
    """Node i is Sum over x and the outputs of the nodes in edges[i] (all < i), laid out in
    ``order``; ``back_edge`` (a, b) with a < b adds b's output to a's inputs (a cycle)."""
    nodes = []
    for index in order:
        inputs = ["x"] + [f"v{j}" for j in edges[index]]
        if back_edge is not None and index == back_edge[0]:
            inputs.append(f"v{back_edge[1]}")
        nodes.append(helper.make_node("Sum", inputs, [f"v{index}"], name=f"n{index}"))
    x = tensor_info("x", TensorProto.FLOAT, [1])
    out = tensor_info(f"v{len(edges) - 1}", TensorProto.FLOAT, [1])
    data: bytes = make_model(nodes, [x], [out], check=False).SerializeToString()
    return data


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    size = draw(st.integers(2, 12))
    edges = [
        sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(size)
    ]
    order = draw(st.permutations(range(size)))
    return edges, list(order)


def _is_topological(model: ir.Model) -> bool:
    seen = {value.name for value in model.graph.inputs}
    for node in model.graph:
        if any(value is not None and value.name not in seen for value in node.inputs):
            return False
        seen.update(value.name for value in node.outputs)
    return True


@settings(max_examples=150, deadline=None)
@given(dags())
def test_unsorted_acyclic_graphs_come_back_sorted(dag: tuple[list[list[int]], list[int]]) -> None:
    edges, order = dag
    model = load_model(_dag(edges, order, None))
    assert _is_topological(model)
    assert sorted(node.name or "" for node in model.graph) == sorted(
        f"n{i}" for i in range(len(edges))
    )
    onnx.checker.check_model(ir.to_proto(model), full_check=True)


@settings(max_examples=150, deadline=None)
@given(dags(), st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(
    dag: tuple[list[list[int]], list[int]], data: st.DataObject
) -> None:
    edges, order = dag
    a = data.draw(st.integers(0, len(edges) - 2))
    b = data.draw(st.integers(a + 1, len(edges) - 1))
    # A real cycle needs a path a -> ... -> b; add it when the DAG has none.
    reaches = {a}
    for i in range(a + 1, len(edges)):
        if reaches.intersection(edges[i]):
            reaches.add(i)
    if b not in reaches:
        edges[b] = sorted({*edges[b], a})
    with pytest.raises(ModelError, match=r"^graph 'g' has a cycle: ") as caught:
        load_model(_dag(edges, order, (a, b)))
    model = ir.from_proto(onnx.load_from_string(_dag(edges, order, (a, b))))
    cycle = find_cycle(model.graph)
    assert cycle is not None and str(caught.value).count(" -> ") == len(cycle)
    for node, following in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
        # each node's output feeds the next one
        assert node.outputs[0] in list(following.inputs), (node.name, following.name)


def test_a_cycle_inside_an_if_branch_is_found() -> None:
    loop = [
        helper.make_node("Add", ["x", "d"], ["a"], name="add"),
        helper.make_node("Neg", ["a"], ["d"], name="neg"),
    ]
    branch = helper.make_graph(
        loop, "then_branch", [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "else_branch",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    node = helper.make_node("If", ["c"], ["out"], name="if", then_branch=branch, else_branch=other)
    model = make_model(
        [node],
        [tensor_info("c", TensorProto.BOOL, []), tensor_info("x", TensorProto.FLOAT, [1])],
        [tensor_info("out", TensorProto.FLOAT, [1])],
        graph_name="main",
        check=False,
    )
    with pytest.raises(
        ModelError, match=r"graph 'then_branch' has a cycle: 'add' \(Add\) -> 'neg' \(Neg\)"
    ):
        quantgraph.convert(model)


def test_the_api_raises_model_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cycle.onnx"
    onnx.save(cyclic_model(), path)
    for call in (quantgraph.convert, quantgraph.lower, lambda p: quantgraph.InferenceSession(p)):
        with pytest.raises(ModelError, match=rf"^{path}: graph 'g' has a cycle"):
            call(path)


def test_an_unsorted_qdq_model_converts_and_agrees() -> None:
    source = onnx.load(str(Path(__file__).parent.parent / "models" / "cnn_u8.onnx"))
    nodes = list(source.graph.node)
    del source.graph.node[:]
    source.graph.node.extend(reversed(nodes))
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(source)
    result = quantgraph.convert(source)
    onnx.checker.check_model(result.proto, full_check=True)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    report = quantgraph.validate(source, result.proto, inputs={"input": x}, backend="python")
    assert report.agree, report


def test_a_sorted_model_is_left_as_it_is() -> None:
    model = load_model(_dag([[], [0], [0, 1]], [0, 1, 2], None))
    assert [node.name for node in model.graph] == ["n0", "n1", "n2"]
    assert sort_nodes(model) is False
