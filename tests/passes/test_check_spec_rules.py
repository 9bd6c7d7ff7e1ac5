"""CheckSpecRulesPass: every quantgraph op node of every graph and function against the spec's
rules, with what the model declares (node_facts); it changes nothing and raises the first
broken rule as the spec's SpecError, naming the node."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from quantgraph.passes import CheckSpecRulesPass
from quantgraph.passes.check_spec_rules import node_facts
from quantgraph.spec import DOMAIN, OPS, OPSET_VERSION, SpecError
from tests.builders import make_model, serialize, spec_op_model, tensor_info

F = TensorProto.FLOAT
U8 = TensorProto.UINT8


def _check(model: onnx.ModelProto) -> ir.passes.PassResult:
    return CheckSpecRulesPass()(ir.from_proto(model))


VALID: dict[str, onnx.ModelProto] = {
    "dynamic-quantize": spec_op_model(
        "DynamicQuantize",
        (F, [2, 3]),
        np.array([0.5, 0.25, 1.0], np.float32),
        (U8, [3]),
        dst_type=U8,
        qtype="per_channel",
    ),
    "dynamic-dequantize-defaults": spec_op_model(
        "DynamicDequantize", (TensorProto.INT8, ["N", 3]), (F, ["K"]), dst_type=F
    ),
    "quantize-f8": spec_op_model(
        "Quantize", (F, [4]), [2.0], dst_type=None, output_dtype=TensorProto.FLOAT8E5M2
    ),
    "dequantize-zps": spec_op_model(
        "Dequantize", (U8, [2, 2]), [0.5, 4.0], [1, 2**31 - 1], dst_type=F, qtype="per_channel"
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_a_valid_model_passes_unchanged(name: str) -> None:
    model = VALID[name]
    ir_model = ir.from_proto(model)
    before = serialize(ir.to_proto(ir_model))
    result = CheckSpecRulesPass()(ir_model)
    assert result.model is ir_model
    assert not result.modified
    assert serialize(ir.to_proto(ir_model)) == before


# (model, the rule it breaks)
BROKEN: dict[str, tuple[onnx.ModelProto, str]] = {
    "per-channel-scale-count": (
        spec_op_model(
            "DynamicQuantize", (F, [1, 2, 3]), (F, [3]), dst_type=U8, qtype="per_channel"
        ),
        "per-channel-scale-count",
    ),
    "constant-zero-scale": (
        spec_op_model(
            "DynamicQuantize",
            (F, [2, 2]),
            np.array([0.5, 0.0], np.float32),
            dst_type=U8,
            qtype="per_channel",
        ),
        "scale-value",
    ),
    "static-inf-scale": (
        spec_op_model("Quantize", (F, [4]), [float("inf")], dst_type=U8),
        "scale-value",
    ),
    "no-scales-input": (
        spec_op_model("DynamicDequantize", (U8, [4]), dst_type=F),
        "missing-input",
    ),
    "empty-scales-input": (
        spec_op_model("DynamicQuantize", (F, [4]), "", (U8, [1]), dst_type=U8),
        "missing-input",
    ),
    "no-scales-attribute": (
        spec_op_model("Dequantize", (U8, [4]), dst_type=F),
        "missing-attribute",
    ),
    "src-type": (
        spec_op_model("DynamicDequantize", (TensorProto.INT32, [4]), (F, [1]), dst_type=F),
        "src-type",
    ),
    "zps-type": (
        spec_op_model("DynamicQuantize", (F, [4]), (F, [1]), (TensorProto.INT16, [1]), dst_type=U8),
        "zps-type",
    ),
    "qtype": (
        spec_op_model("DynamicDequantize", (U8, [4]), (F, [1]), dst_type=F, qtype="per_block"),
        "qtype",
    ),
    "axis-range": (
        spec_op_model(
            "Quantize", (F, [4, 2]), [1.0, 1.0], dst_type=U8, qtype="per_channel", axis=2
        ),
        "axis-range",
    ),
    "zps-count": (
        spec_op_model("DynamicDequantize", (U8, [6]), (F, [1]), (U8, [2]), dst_type=F),
        "zps-count",
    ),
    "f8-zps": (
        spec_op_model("Dequantize", (TensorProto.FLOAT8E4M3FN, [4]), [0.5], [0], dst_type=F),
        "f8-zps",
    ),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_rule_is_the_specs_error_naming_the_node(name: str) -> None:
    model, rule = BROKEN[name]
    op = model.graph.node[0].op_type
    with pytest.raises(SpecError) as raised:
        _check(model)
    error = raised.value
    assert (error.op, error.node, error.rule) == (op, "node0", rule)
    assert str(error).startswith(f"{op} node 'node0': ")
    assert str(error).endswith(f" [rule {rule}]")


def test_an_overridable_initializer_scale_is_not_a_constant() -> None:
    """A scale that is also a graph input can be fed at run time: its initializer's zero is no
    rule violation yet (the kernel checks what is fed)."""
    model = spec_op_model("DynamicQuantize", (F, [4]), np.array([0.0], np.float32), dst_type=U8)
    with pytest.raises(SpecError, match=r"\[rule scale-value\]$"):
        _check(model)
    model.graph.input.append(tensor_info("scales", F, [1]))
    assert not _check(model).modified


def _in_function(node: onnx.NodeProto) -> onnx.ModelProto:
    function = helper.make_function(
        "local",
        "Wrapped",
        ["src"],
        ["dst"],
        [node],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )
    return make_model(
        [helper.make_node("Wrapped", ["x"], ["y"], domain="local", name="call")],
        [tensor_info("x", F, [4])],
        [tensor_info("y", U8, [4])],
        domains={"local": 1, DOMAIN: OPSET_VERSION},
        functions=[function],
        check=False,
    )


def _in_if_branch(node: onnx.NodeProto) -> onnx.ModelProto:
    branch = helper.make_graph([node], "then", [], [tensor_info("dst", U8, [4])])
    other = helper.make_graph(
        [helper.make_node("Cast", ["src"], ["other"], to=U8)],
        "else",
        [],
        [tensor_info("other", U8, [4])],
    )
    return make_model(
        [helper.make_node("If", ["c"], ["dst"], then_branch=branch, else_branch=other)],
        [tensor_info("c", TensorProto.BOOL, []), tensor_info("src", F, [4])],
        [tensor_info("dst", U8, [4])],
        domains={DOMAIN: OPSET_VERSION},
        check=False,
    )


@pytest.mark.parametrize("where", [_in_function, _in_if_branch], ids=["function", "if-branch"])
def test_nodes_in_functions_and_subgraphs_are_checked(
    where: Callable[[onnx.NodeProto], onnx.ModelProto],
) -> None:
    good = helper.make_node("Quantize", ["src"], ["dst"], domain=DOMAIN, name="inner", scales=[1.0])
    assert not _check(where(good)).modified
    bad = helper.make_node("Quantize", ["src"], ["dst"], domain=DOMAIN, name="inner", scales=[0.0])
    with pytest.raises(SpecError) as raised:
        _check(where(bad))
    assert (raised.value.node, raised.value.rule) == ("inner", "scale-value")


def test_node_facts_of_a_dynamic_op() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [2, "C"]),
        np.array([0.5, 0.25], np.float32),
        (TensorProto.INT8, ["K"]),
        dst_type=TensorProto.INT8,
        qtype="per_channel",
        axis=-1,
    )
    node = ir.from_proto(model).graph.node(0)
    facts = node_facts(node, OPS["DynamicQuantize"])
    assert dict(facts.attributes) == {"qtype": "per_channel", "axis": -1}
    assert (facts.src, facts.scales, facts.zps) == (F, F, TensorProto.INT8)
    assert (facts.has_scales, facts.has_zps) == (True, True)
    assert facts.declared_dst == TensorProto.INT8
    assert tuple(facts.src_shape or ()) == (2, None)
    assert tuple(facts.scales_shape or ()) == (2,)
    assert tuple(facts.zps_shape or ()) == (None,)
    assert facts.scale_values is not None and facts.scale_values.tolist() == [0.5, 0.25]


def test_node_facts_of_a_static_op_read_no_inputs_but_src() -> None:
    model = spec_op_model("Dequantize", (U8, [3]), [0.5], [3], dst_type=F)
    node = ir.from_proto(model).graph.node(0)
    facts = node_facts(node, OPS["Dequantize"])
    assert sorted(facts.attributes) == ["scales", "zps"]
    assert np.asarray(facts.attributes["scales"]).tolist() == [0.5]
    assert np.asarray(facts.attributes["zps"]).tolist() == [3]
    assert facts.src == U8 and facts.declared_dst == F
    assert (facts.scales, facts.zps, facts.scale_values) == (None, None, None)
    assert not facts.has_zps
