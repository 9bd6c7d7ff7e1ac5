"""StaticToDynamicPass: static Quantize/Dequantize become their dynamic siblings with constant
scales and zps inputs, meaning the same; what the dynamic ops cannot take is NoDynamicForm."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from quantgraph.passes import ConvertedNode, NoDynamicForm, RewriteResult, StaticToDynamicPass
from quantgraph.spec import DOMAIN, OPSET_VERSION, SpecError
from tests.builders import (
    BACKENDS,
    assert_runs_alike,
    attributes,
    initializers,
    make_model,
    node_by_name,
    serialize,
    spec_op_model,
    tensor_info,
)

F = TensorProto.FLOAT
SRC = np.array([-300.0, -2.5, -0.5, 0.0, 0.25, 0.5, 1.5, 2.5, 7.0, 63.5, 1e6, -np.inf], np.float32)
X = SRC.reshape(2, 3, 2)


def _apply(model: onnx.ModelProto) -> tuple[onnx.ModelProto, RewriteResult]:
    """The pass on an onnx_ir copy of ``model``: the result as a proto, and the pass result."""
    ir_model = ir.from_proto(model)
    result = StaticToDynamicPass()(ir_model)
    assert isinstance(result, RewriteResult)
    assert result.model is ir_model, "the pass works in place"
    return ir.to_proto(ir_model), result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("dst", "zps", "output_dtype"),
    [
        (TensorProto.UINT8, [3, 0, 255], None),
        (TensorProto.INT8, [-3, 0, 127], TensorProto.INT8),
    ],
    ids=["u8", "s8"],
)
def test_quantize_becomes_dynamic_quantize_with_constant_inputs(
    dst: int, zps: list[int], output_dtype: int | None, backend: str
) -> None:
    extra: dict[str, Any] = {} if output_dtype is None else {"output_dtype": output_dtype}
    model = spec_op_model(
        "Quantize",
        (F, [2, 3, 2]),
        [0.5, 0.1, 2.0],
        zps,
        dst_type=dst,
        name="q",
        qtype="per_channel",
        axis=1,
        **extra,
    )
    out, result = _apply(model)

    assert result.modified
    assert result.report.converted_nodes == [ConvertedNode("q", "Quantize", "DynamicQuantize", "")]
    assert result.report.skipped == []
    node = node_by_name(out.graph, "q")
    assert (node.domain, node.op_type) == (DOMAIN, "DynamicQuantize")
    assert list(node.input) == ["src", "q_scales", "q_zps"]
    # scales, zps and output_dtype left the attributes: the zps type now says the dst type.
    assert attributes(node) == {"qtype": b"per_channel", "axis": 1}
    constants = initializers(out)
    assert constants["q_scales"].dtype == np.float32
    assert constants["q_scales"].tobytes() == np.array([0.5, 0.1, 2.0], np.float32).tobytes()
    assert constants["q_zps"].dtype == onnx.helper.tensor_dtype_to_np_dtype(dst)
    assert constants["q_zps"].tolist() == zps
    assert out.graph.output[0].type.tensor_type.elem_type == dst
    assert_runs_alike(model, out, [{"src": X}], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src_type", [TensorProto.INT8, TensorProto.UINT8], ids=["s8", "u8"])
def test_dequantize_zps_become_s32_inputs(src_type: int, backend: str) -> None:
    """DynamicDequantize takes s32 zps whatever src is: static zps keep their values."""
    zps = [-3, 200] if src_type == TensorProto.INT8 else [3, 200]
    model = spec_op_model(
        "Dequantize",
        (src_type, [3, 2]),
        [0.5, 0.25],
        zps,
        dst_type=F,
        name="dq",
        qtype="per_channel",
        axis=-1,
    )
    out, result = _apply(model)
    assert result.report.emitted == {"DynamicDequantize": 1}
    node = node_by_name(out.graph, "dq")
    assert list(node.input) == ["src", "dq_scales", "dq_zps"]
    zero_points = initializers(out)["dq_zps"]
    assert (zero_points.dtype.name, zero_points.tolist()) == ("int32", zps)
    numpy_type = onnx.helper.tensor_dtype_to_np_dtype(src_type)
    src = np.array([[0, 1], [100, 127], [-128 if src_type == TensorProto.INT8 else 255, 7]])
    assert_runs_alike(model, out, [{"src": src.astype(numpy_type)}], backend)


def test_missing_zps_become_zeros_of_the_zps_type() -> None:
    quantize = spec_op_model(
        "Quantize", (F, [4]), [0.5], dst_type=TensorProto.INT8, output_dtype=TensorProto.INT8
    )
    out, _ = _apply(quantize)
    zero = initializers(out)["node0_zps"]
    assert (zero.dtype.name, zero.tolist()) == ("int8", [0])
    dequantize = spec_op_model(
        "Dequantize", (TensorProto.UINT8, [4, 3]), [0.5, 1.0, 2.0], dst_type=F, qtype="per_channel"
    )
    out, _ = _apply(dequantize)
    zero = initializers(out)["node0_zps"]
    assert (zero.dtype.name, zero.tolist()) == ("int32", [0, 0, 0])


@pytest.mark.parametrize(
    ("op", "src", "extra", "type_name"),
    [
        ("Quantize", F, {"output_dtype": TensorProto.FLOAT8E4M3FN}, "f8_e4m3"),
        ("Quantize", F, {"output_dtype": TensorProto.FLOAT8E5M2}, "f8_e5m2"),
        ("Dequantize", TensorProto.FLOAT8E4M3FN, {}, "f8_e4m3"),
        ("Dequantize", TensorProto.FLOAT8E5M2, {}, "f8_e5m2"),
    ],
)
def test_float8_has_no_dynamic_form(
    op: str, src: int, extra: dict[str, Any], type_name: str
) -> None:
    model = spec_op_model(op, (src, [4]), [0.5], dst_type=None, name="f8", **extra)
    ir_model = ir.from_proto(model)
    with pytest.raises(NoDynamicForm) as raised:
        StaticToDynamicPass()(ir_model)
    assert str(raised.value) == f"{op} node 'f8' uses {type_name}, which has no dynamic op"
    assert isinstance(raised.value, ValueError)
    assert serialize(ir.to_proto(ir_model)) == serialize(ir.to_proto(ir.from_proto(model)))


@pytest.mark.parametrize(
    ("op", "src", "zps", "zp_type"),
    [
        ("Quantize", F, [3, 300], "u8"),
        ("Quantize", F, [-1], "u8"),
        ("Dequantize", TensorProto.INT8, [2**31], "s32"),
    ],
    ids=["quantize-300", "quantize-negative", "dequantize-2**31"],
)
def test_zps_outside_the_dynamic_zps_type_have_no_dynamic_form(
    op: str, src: int, zps: list[int], zp_type: str
) -> None:
    """Static zps are s64 attributes; the dynamic ops' zps are a quantize op's dst type (u8
    here) or, for dequantize, s32."""
    count = len(zps)
    qtype: dict[str, Any] = {"qtype": "per_channel", "axis": 0} if count > 1 else {}
    model = spec_op_model(op, (src, [count]), [0.5] * count, zps, dst_type=None, **qtype)
    with pytest.raises(NoDynamicForm) as raised:
        StaticToDynamicPass()(ir.from_proto(model))
    message = str(raised.value)
    assert message.startswith(f"{op} node 'node0': zps "), message
    assert ", ".join(map(str, zps)) in message, message
    assert message.endswith(f" do not fit {zp_type}, the dynamic op's zps type"), message


def test_missing_scales_attribute_is_the_spec_rule() -> None:
    model = spec_op_model("Quantize", (F, [4]), dst_type=TensorProto.UINT8, name="bare")
    with pytest.raises(SpecError) as raised:
        StaticToDynamicPass()(ir.from_proto(model))
    assert (raised.value.op, raised.value.node, raised.value.rule) == (
        "Quantize",
        "bare",
        "missing-attribute",
    )


def test_dynamic_ops_and_other_nodes_are_left_alone() -> None:
    model = make_model(
        [
            helper.make_node(
                "DynamicQuantize", ["x", "s"], ["q"], domain=DOMAIN, name="dq", qtype="per_tensor"
            ),
            helper.make_node("Identity", ["q"], ["y"], name="id"),
        ],
        [tensor_info("x", F, [4]), tensor_info("s", F, [1])],
        [tensor_info("y", TensorProto.UINT8, [4])],
        domains={DOMAIN: OPSET_VERSION},
        check=False,
    )
    out, result = _apply(model)
    assert not result.modified
    assert result.report.converted_nodes == [] and result.report.skipped == []
    assert serialize(out) == serialize(ir.to_proto(ir.from_proto(model)))


def test_equal_constants_are_shared_and_names_stay_unique() -> None:
    """Unnamed nodes name their constants after the op; equal ones are one initializer."""
    nodes = [
        helper.make_node("Quantize", [src], [out], domain=DOMAIN, scales=[scale])
        for src, out, scale in (("x", "a", 0.5), ("x", "b", 0.5), ("x", "c", 0.25))
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, [4])],
        [tensor_info(name, TensorProto.UINT8, [4]) for name in "abc"],
        [onnx.numpy_helper.from_array(np.array([1.0], np.float32), "Quantize_scales")],
        domains={DOMAIN: OPSET_VERSION},
        check=False,
    )
    model.graph.output.append(tensor_info("Quantize_scales", F, [1]))  # a user of the taken name
    out, result = _apply(model)
    assert result.report.emitted == {"DynamicQuantize": 3}
    assert [list(n.input) for n in out.graph.node] == [
        ["x", "Quantize_scales_1", "Quantize_zps"],
        ["x", "Quantize_scales_1", "Quantize_zps"],
        ["x", "Quantize_scales_2", "Quantize_zps"],
    ]
    constants = initializers(out)
    assert constants["Quantize_scales"].tolist() == [1.0], "the model's own value is untouched"
    assert constants["Quantize_scales_1"].tolist() == [0.5]
    assert constants["Quantize_scales_2"].tolist() == [0.25]


@pytest.mark.parametrize("backend", BACKENDS)
def test_functions_get_constant_nodes(backend: str) -> None:
    """Functions hold no initializers: the constants are Constant nodes ahead of the node."""
    function = helper.make_function(
        "local",
        "Quant",
        ["fx"],
        ["fy"],
        [
            helper.make_node("Relu", ["fx"], ["fr"], name="relu"),
            helper.make_node(
                "Quantize", ["fr"], ["fy"], domain=DOMAIN, name="fq", scales=[0.25], zps=[7]
            ),
        ],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )
    model = make_model(
        [helper.make_node("Quant", ["x"], ["y"], domain="local", name="call")],
        [tensor_info("x", F, [12])],
        [tensor_info("y", TensorProto.UINT8, [12])],
        domains={"local": 1, DOMAIN: OPSET_VERSION},
        functions=[function],
        check=False,
    )
    out, result = _apply(model)
    assert [(n.graph, n.node) for n in result.report.converted_nodes] == [("Quant", "fq")]
    (converted,) = out.functions
    assert [(n.op_type, n.name) for n in converted.node] == [
        ("Relu", "relu"),
        ("Constant", "fq_scales_constant"),
        ("Constant", "fq_zps_constant"),
        ("DynamicQuantize", "fq"),
    ]
    assert list(converted.node[-1].input) == ["fr", "fq_scales", "fq_zps"]
    assert {o.domain: o.version for o in converted.opset_import} == {"": 21, DOMAIN: 1}
    assert initializers(out) == {}
    assert_runs_alike(model, out, [{"x": SRC}], backend)
