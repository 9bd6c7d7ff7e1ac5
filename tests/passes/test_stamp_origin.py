"""StampOriginPass: every quantgraph op node of every graph and function records its own op type
and name in string attributes (for kernels that cannot see their node); nothing else changes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from quantgraph.passes import StampOriginPass, StaticToDynamicPass
from quantgraph.passes.stamp_origin import MODEL_OP, NODE_NAME
from quantgraph.spec import DOMAIN, OPSET_VERSION
from tests.builders import all_nodes, attributes, make_model, serialize, spec_op_model, tensor_info

F = TensorProto.FLOAT
U8 = TensorProto.UINT8


def _model_everywhere() -> onnx.ModelProto:
    """A Quantize in the main graph, an unnamed DynamicDequantize in an If branch and a
    Dequantize in a model-local function, next to standard nodes."""
    function = helper.make_function(
        "local",
        "Deq",
        ["fx"],
        ["fy"],
        [helper.make_node("Dequantize", ["fx"], ["fy"], domain=DOMAIN, name="fdq", scales=[0.5])],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )
    then_branch = helper.make_graph(
        [helper.make_node("DynamicDequantize", ["q", "s"], ["t"], domain=DOMAIN)],
        "then",
        [],
        [tensor_info("t", F, [4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Cast", ["q"], ["e"], name="cast", to=F)],
        "else",
        [],
        [tensor_info("e", F, [4])],
    )
    nodes = [
        helper.make_node("Quantize", ["x"], ["q"], domain=DOMAIN, name="q", scales=[0.5]),
        helper.make_node("Deq", ["q"], ["d"], domain="local", name="call"),
        helper.make_node(
            "If", ["c"], ["y"], name="if", then_branch=then_branch, else_branch=else_branch
        ),
    ]
    return make_model(
        nodes,
        [
            tensor_info("x", F, [4]),
            tensor_info("s", F, [1]),
            tensor_info("c", TensorProto.BOOL, []),
        ],
        [tensor_info("d", F, [4]), tensor_info("y", F, [4])],
        domains={DOMAIN: OPSET_VERSION, "local": 1},
        functions=[function],
        check=False,
    )


def test_every_spec_node_is_stamped_with_its_op_and_name() -> None:
    model = _model_everywhere()
    ir_model = ir.from_proto(model)
    result = StampOriginPass()(ir_model)
    assert result.model is ir_model
    assert result.modified
    out = ir.to_proto(ir_model)
    stamped = {
        (n.op_type, n.name): (attributes(n).get(MODEL_OP), attributes(n).get(NODE_NAME))
        for n in all_nodes(out)
    }
    assert stamped == {
        ("Quantize", "q"): (b"Quantize", b"q"),
        ("Deq", "call"): (None, None),
        ("If", "if"): (None, None),
        ("DynamicDequantize", ""): (b"DynamicDequantize", b""),
        ("Cast", "cast"): (None, None),
        ("Dequantize", "fdq"): (b"Dequantize", b"fdq"),
    }
    # The stamps are all that changed.
    for before, after in zip(all_nodes(model), all_nodes(out), strict=True):
        kept = {k: v for k, v in attributes(after).items() if k not in (MODEL_OP, NODE_NAME)}
        if before.op_type != "If":  # its branches carry the stamped nodes
            assert kept == attributes(before)
        assert (after.domain, after.op_type, list(after.input)) == (
            before.domain,
            before.op_type,
            list(before.input),
        )


def test_a_model_without_spec_nodes_is_not_modified() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor_info("x", F, [4])],
        [tensor_info("y", F, [4])],
    )
    ir_model = ir.from_proto(model)
    assert not StampOriginPass()(ir_model).modified
    assert serialize(ir.to_proto(ir_model)) == serialize(ir.to_proto(ir.from_proto(model)))


def test_the_stamp_keeps_the_models_op_through_static_to_dynamic() -> None:
    """What the Python backend relies on: after the rewrite its kernel runs DynamicQuantize,
    but errors can still name the model's own Quantize."""
    model = spec_op_model("Quantize", (F, [4]), [0.5], dst_type=U8, name="mine")
    ir_model = ir.from_proto(model)
    StampOriginPass()(ir_model)
    StaticToDynamicPass()(ir_model)
    (node,) = ir.to_proto(ir_model).graph.node
    assert node.op_type == "DynamicQuantize"
    assert attributes(node)[MODEL_OP] == b"Quantize"
    assert attributes(node)[NODE_NAME] == b"mine"
    assert np.asarray(attributes(node).get("scales", [])).size == 0
