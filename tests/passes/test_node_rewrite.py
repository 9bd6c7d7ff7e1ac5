"""NodeRewritePass, the base of the rewrite passes: it visits the chosen nodes of every graph,
subgraph and function, reports each rewrite (or the Skip reason), calls finish once, and sweeps
the former inputs the rewrites left unused. Tried here with a small pass of the test's own."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from quantgraph.ir.rewrite import ConstantFactory
from quantgraph.ir.walk import GraphLike
from quantgraph.passes import (
    ConvertedNode,
    NodeRewritePass,
    RewriteReport,
    RewriteResult,
    Skip,
    SkippedNode,
)
from quantgraph.passes.node_rewrite import Progress
from tests.builders import initializers, make_model, node_by_name, tensor_info

F = TensorProto.FLOAT


class DoubleMulConstant(NodeRewritePass):
    """Mul nodes get their constant second input doubled (a new constant; the old one is
    stale). Nodes named ``skip*`` are skipped, ``keep*`` have nothing to change."""

    def __init__(
        self, *, report: RewriteReport | None = None, progress: Progress | None = None
    ) -> None:
        super().__init__(report=report, progress=progress)
        self.finished: list[tuple[int, RewriteReport]] = []
        self.visited = 0

    def matches(self, node: ir.Node) -> bool:
        return node.op_type == "Mul"

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        self.visited += 1
        name = node.name or ""
        if name.startswith("skip"):
            raise Skip("unknown-op", f"{name} is to be skipped")
        if name.startswith("keep"):
            return None
        former = node.inputs[1]
        assert former is not None
        tensor = ir.convenience.get_const_tensor(former)
        if tensor is None:
            raise Skip("missing-input", "not a constant")
        doubled = factory.constant(f"{former.name}_doubled", tensor.numpy() * 2, node)
        node.replace_input_with(1, doubled)
        self.stale.append(former)
        return "Mul", "doubled"

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        self.finished.append((self.visited, report))


def _init(name: str, *values: float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.float32), name)


def _muls(names: Sequence[str], weights: Sequence[str]) -> list[onnx.NodeProto]:
    """A chain x -> Mul(names[0], weights[0]) -> ... -> y."""
    values = ["x", *(f"v{i}" for i in range(len(names) - 1)), "y"]
    return [
        helper.make_node("Mul", [values[i], weights[i]], [values[i + 1]], name=name)
        for i, name in enumerate(names)
    ]


def _run(
    model: onnx.ModelProto, rewrite: DoubleMulConstant | None = None
) -> tuple[onnx.ModelProto, RewriteResult, DoubleMulConstant]:
    rewrite = rewrite or DoubleMulConstant()
    ir_model = ir.from_proto(model)
    result = rewrite(ir_model)
    assert isinstance(result, RewriteResult) and result.model is ir_model
    return ir.to_proto(ir_model), result, rewrite


def test_rewrites_skips_and_unchanged_nodes_are_reported() -> None:
    model = make_model(
        _muls(["m1", "skip_me", "keep_me"], ["w1", "w2", "w3"]),
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
        [_init("w1", 1.5), _init("w2", 2.0), _init("w3", 3.0)],
    )
    out, result, rewrite = _run(model)
    assert result.modified
    assert result.report.converted_nodes == [ConvertedNode("m1", "Mul", "Mul", "doubled", "")]
    (skipped,) = result.report.skipped
    assert skipped == SkippedNode("skip_me", "Mul", "skip_me is to be skipped", "", "unknown-op")
    assert isinstance(skipped.source, ir.Node) and skipped.source.name == "skip_me"  # the node
    assert list(node_by_name(out.graph, "m1").input) == ["x", "w1_doubled"]
    assert list(node_by_name(out.graph, "skip_me").input) == ["v0", "w2"]
    assert list(node_by_name(out.graph, "keep_me").input) == ["v1", "w3"]
    assert {k: v.tolist() for k, v in initializers(out).items()} == {
        "w1_doubled": [3.0],
        "w2": [2.0],
        "w3": [3.0],
    }
    # finish ran once, after every node, on the report the pass returns.
    assert len(rewrite.finished) == 1
    visited, report = rewrite.finished[0]
    assert visited == 3 and report is result.report


def test_nothing_rewritten_is_not_modified() -> None:
    model = make_model(
        _muls(["keep_a", "skip_b"], ["w", "w"]),
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
        [_init("w", 2.0)],
    )
    _, result, rewrite = _run(model)
    assert not result.modified
    assert result.report.converted_nodes == []
    assert [s.node for s in result.report.skipped] == ["skip_b"]
    assert len(rewrite.finished) == 1


def test_a_given_report_is_appended_to_and_modified_counts_this_run() -> None:
    earlier = ConvertedNode("before", "QuantizeLinear", "DynamicQuantize", "u8, per_tensor")
    report = RewriteReport(converted_nodes=[earlier])
    model = make_model(
        _muls(["keep"], ["w"]),
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
        [_init("w", 2.0)],
    )
    _, result, _ = _run(model, DoubleMulConstant(report=report))
    assert result.report is report
    assert not result.modified, "an earlier pass's conversions are not this run's"
    model = make_model(
        _muls(["m"], ["w"]),
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
        [_init("w", 2.0)],
    )
    _, result, _ = _run(model, DoubleMulConstant(report=report))
    assert result.modified
    assert [n.node for n in report.converted_nodes] == ["before", "m"]


def test_former_inputs_are_swept_only_when_nothing_uses_them() -> None:
    nodes = [
        *_muls(["only_user", "shared_user", "output_user"], ["alone", "shared", "out"]),
        helper.make_node("Add", ["y", "shared"], ["z"], name="add"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, [2])],
        [tensor_info("z", F, [2]), tensor_info("out", F, [1])],
        [_init("alone", 1.0), _init("shared", 2.0), _init("out", 3.0)],
    )
    out, result, _ = _run(model)
    assert len(result.report.converted_nodes) == 3
    assert sorted(initializers(out)) == [
        "alone_doubled",
        "out",
        "out_doubled",
        "shared",
        "shared_doubled",
    ]


def test_subgraphs_and_functions_get_constant_nodes_and_their_names() -> None:
    branch = helper.make_graph(
        [
            helper.make_node("Constant", [], ["bw"], name="bw_constant", value=_init("", 4.0)),
            helper.make_node("Mul", ["x", "bw"], ["b"], name="in_branch"),
        ],
        "then",
        [],
        [tensor_info("b", F, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["o"], name="identity")],
        "else",
        [],
        [tensor_info("o", F, [2])],
    )
    function = helper.make_function(
        "local",
        "Scale",
        ["fx"],
        ["fy"],
        [
            helper.make_node("Constant", [], ["fw"], name="fw_constant", value=_init("", 5.0)),
            helper.make_node("Mul", ["fx", "fw"], ["fy"], name="in_function"),
        ],
        opset_imports=[helper.make_opsetid("", 21)],
    )
    model = make_model(
        [
            helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other),
            helper.make_node("Scale", ["y"], ["z"], domain="local", name="call"),
        ],
        [tensor_info("x", F, [2]), tensor_info("c", TensorProto.BOOL, [])],
        [tensor_info("z", F, [2])],
        domains={"local": 1},
        functions=[function],
    )
    out, result, _ = _run(model)
    assert [(n.node, n.graph) for n in result.report.converted_nodes] == [
        ("in_branch", "then"),
        ("in_function", "Scale"),
    ]
    then = next(a.g for a in out.graph.node[0].attribute if a.name == "then_branch")
    # The new constant is a Constant node ahead of its user; the unused old one is gone.
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in then.node] == [
        ("Constant", "bw_doubled_constant", [], ["bw_doubled"]),
        ("Mul", "in_branch", ["x", "bw_doubled"], ["b"]),
    ]
    assert numpy_helper.to_array(then.node[0].attribute[0].t).tolist() == [8.0]
    (scale,) = out.functions
    assert [(n.op_type, n.name) for n in scale.node] == [
        ("Constant", "fw_doubled_constant"),
        ("Mul", "in_function"),
    ]
    assert list(scale.node[1].input) == ["fx", "fw_doubled"]
    onnx.checker.check_model(out, full_check=True)


def test_new_names_avoid_every_name_in_the_model() -> None:
    model = make_model(
        [*_muls(["m"], ["w"]), helper.make_node("Identity", ["y"], ["w_doubled"], name="taken")],
        [tensor_info("x", F, [2])],
        [tensor_info("w_doubled", F, [2])],
        [_init("w", 2.0)],
    )
    out, _, _ = _run(model)
    assert list(node_by_name(out.graph, "m").input) == ["x", "w_doubled_1"]
    assert initializers(out)["w_doubled_1"].tolist() == [4.0]


def test_progress_every_thousand_nodes_and_at_the_end() -> None:
    count = 2500
    model = make_model(
        _muls([f"keep{i}" for i in range(count)], ["w"] * count),
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
        [_init("w", 1.0)],
        check=False,
    )
    calls: list[tuple[int, int]] = []
    _run(model, DoubleMulConstant(progress=lambda done, total: calls.append((done, total))))
    assert calls == [(1000, count), (2000, count), (count, count)]


def test_the_report_counts_by_op_type() -> None:
    report = RewriteReport(
        converted_nodes=[
            ConvertedNode("a", "QuantizeLinear", "DynamicQuantize", "u8, per_tensor"),
            ConvertedNode("b", "DequantizeLinear", "Dequantize", "s8, axis 1", "then"),
            ConvertedNode("c", "QuantizeLinear", "Quantize", "s8, per_tensor"),
        ],
        skipped=[
            SkippedNode("d", "DequantizeLinear", "int32 input (a bias)", "", "quantized-type")
        ],
    )
    assert report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 2}
    assert report.emitted == {"Dequantize": 1, "DynamicQuantize": 1, "Quantize": 1}
    as_dict = report.to_dict()
    assert as_dict["converted"] == report.converted and as_dict["emitted"] == report.emitted
    assert as_dict["skipped"] == [
        {
            "node": "d",
            "op_type": "DequantizeLinear",
            "reason": "int32 input (a bias)",
            "graph": "",
            "code": "quantized-type",
        }
    ]
    nodes = as_dict["nodes"]
    assert isinstance(nodes, list) and len(nodes) == 3
    assert nodes[1] == {
        "node": "b",
        "op_type": "DequantizeLinear",
        "new_op_type": "Dequantize",
        "detail": "s8, axis 1",
        "graph": "then",
    }


def _rewrite_passes() -> list[type[NodeRewritePass]]:
    # the modules that define every pass (the python backend's are subclasses too)
    for module in ("quantgraph.passes.pipelines", "quantgraph.backends.python.prepare"):
        importlib.import_module(module)
    found, pending = [], list(NodeRewritePass.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending += cls.__subclasses__()
    return found


def test_a_pass_matches_only_the_op_types_it_declares() -> None:
    """``op_types`` lets the base skip asking ``matches`` about other nodes: every node a pass
    matches must be of one of them (here: nodes of every other op type the passes name, in
    every domain they read, carrying every mark and a block_size, are all refused)."""
    from quantgraph import DOMAIN
    from quantgraph.passes.contrib import gather_block_quantized, matmul_nbits
    from quantgraph.passes.integer import dynamic_quantize_linear, integer_ops, qoperator
    from quantgraph.passes.qdq import cast_scale, short_blocks
    from quantgraph.spec import OPS

    marks = {
        module.RECORD: "{}"
        for module in (cast_scale, gather_block_quantized, integer_ops, matmul_nbits, qoperator)
    }
    marks[dynamic_quantize_linear.MARK] = "x"
    marks[short_blocks.PADDED] = "4"
    declared = [cls for cls in _rewrite_passes() if cls.op_types is not None]
    assert len(declared) >= 9
    every_op = {op for cls in declared for op in cls.op_types or ()} | set(OPS) | {"Mul", "If"}
    for cls in declared:
        pass_ = cls.__new__(cls)  # matches() reads the node only
        assert cls.op_types
        for op_type in every_op - cls.op_types:
            for domain in ("", "ai.onnx", "com.microsoft", DOMAIN):
                node = ir.Node(
                    domain,
                    op_type,
                    [],
                    [ir.AttrInt64("block_size", 32)],
                    metadata_props=dict(marks),
                )
                assert not pass_.matches(node), (cls.__name__, domain, op_type)
