"""MoveDomainPass: every node of one domain moves to another at the same opset version, in the
main graph, subgraphs and functions, and the opset imports follow."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from quantgraph.passes import MoveDomainPass
from tests.builders import all_nodes, make_model, opsets, serialize, tensor_info

F = TensorProto.FLOAT
SOURCE, TARGET = "org.source", "org.target"


def _model(*, source_version: int = 3) -> onnx.ModelProto:
    """Source-domain nodes in the main graph, an If branch and a function, and a node of a
    third domain that must stay."""
    function = helper.make_function(
        "local",
        "Wrapped",
        ["fx"],
        ["fy"],
        [helper.make_node("Op", ["fx"], ["fy"], domain=SOURCE, name="in_function")],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(SOURCE, 2)],
    )
    branch = helper.make_graph(
        [helper.make_node("Op", ["x"], ["b"], domain=SOURCE, name="in_branch")],
        "then",
        [],
        [tensor_info("b", F, [4])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["o"], name="identity")],
        "else",
        [],
        [tensor_info("o", F, [4])],
    )
    nodes = [
        helper.make_node("Op", ["x"], ["a"], domain=SOURCE, name="in_main"),
        helper.make_node("Op", ["a"], ["k"], domain="org.other", name="other_domain"),
        helper.make_node("Wrapped", ["k"], ["w"], domain="local", name="call"),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other),
    ]
    return make_model(
        nodes,
        [tensor_info("x", F, [4]), tensor_info("c", TensorProto.BOOL, [])],
        [tensor_info("w", F, [4]), tensor_info("y", F, [4])],
        domains={SOURCE: source_version, "org.other": 1, "local": 1},
        functions=[function],
        check=False,
    )


def test_nodes_and_imports_move_everywhere() -> None:
    model = _model()
    ir_model = ir.from_proto(model)
    result = MoveDomainPass(SOURCE, TARGET)(ir_model)
    assert result.model is ir_model
    assert result.modified
    out = ir.to_proto(ir_model)
    domains = {n.name: n.domain for n in all_nodes(out)}
    assert domains == {
        "in_main": TARGET,
        "other_domain": "org.other",
        "call": "local",
        "if": "",
        "in_branch": TARGET,
        "identity": "",
        "in_function": TARGET,
    }
    # The target is imported at the source's version; the source import stays.
    assert opsets(out) == {"": 21, SOURCE: 3, TARGET: 3, "org.other": 1, "local": 1}
    (function,) = out.functions
    assert opsets(function) == {"": 21, SOURCE: 2, TARGET: 2}
    # Only the domains changed.
    for before, after in zip(all_nodes(model), all_nodes(out), strict=True):
        assert (after.name, after.op_type, list(after.input)) == (
            before.name,
            before.op_type,
            list(before.input),
        )


def test_a_source_imported_nowhere_moves_at_version_1() -> None:
    model = make_model(
        [helper.make_node("Op", ["x"], ["y"], domain=SOURCE, name="n")],
        [tensor_info("x", F, [4])],
        [tensor_info("y", F, [4])],
        check=False,
    )
    ir_model = ir.from_proto(model)
    assert MoveDomainPass(SOURCE, TARGET)(ir_model).modified
    assert opsets(ir.to_proto(ir_model)) == {"": 21, TARGET: 1}


def test_nothing_to_move_changes_nothing() -> None:
    model = _model()
    ir_model = ir.from_proto(model)
    result = MoveDomainPass("org.absent", TARGET)(ir_model)
    assert not result.modified
    out = ir.to_proto(ir_model)
    assert TARGET not in opsets(out)
    assert serialize(out) == serialize(ir.to_proto(ir.from_proto(model)))
