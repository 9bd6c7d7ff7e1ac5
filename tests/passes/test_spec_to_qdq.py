"""SpecToQdqPass (lowering): the spec ops back into standard QuantizeLinear/DequantizeLinear,
meaning the same in onnxruntime's own kernels; what ONNX cannot express stays and is reported.

The bundled and real models are converted and lowered in tests/test_real_models.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import quantgraph
from quantgraph.passes import ConvertedNode, RewriteResult, SpecToQdqPass
from quantgraph.spec import DOMAIN, OPSET_VERSION
from tests.builders import (
    BACKENDS,
    attributes,
    differential,
    initializers,
    make_model,
    node_by_name,
    opsets,
    serialize_node,
    spec_op_model,
    tensor_info,
)

F = TensorProto.FLOAT
U8 = TensorProto.UINT8
S8 = TensorProto.INT8
X = np.array([[-300.0, -2.5, -0.5], [0.25, 1.5, 63.5]], np.float32)
Q8 = np.array([[0, 1, -128], [127, 7, -3]], np.int8)


def _lower(model: onnx.ModelProto) -> tuple[onnx.ModelProto, RewriteResult]:
    ir_model = ir.from_proto(model)
    result = SpecToQdqPass()(ir_model)
    assert isinstance(result, RewriteResult)
    assert result.model is ir_model, "the pass works in place"
    return ir.to_proto(ir_model), result


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_quantize_per_tensor_gets_scalar_constants(backend: str) -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [2, 3]),
        np.array([0.5], np.float32),
        np.array([3], np.uint8),
        dst_type=U8,
        name="q",
    )
    out, result = _lower(model)
    assert result.modified
    assert result.report.converted_nodes == [
        ConvertedNode("q", "DynamicQuantize", "QuantizeLinear", "u8, per_tensor")
    ]
    node = node_by_name(out.graph, "q")
    assert (node.domain, node.op_type, attributes(node)) == ("", "QuantizeLinear", {})
    assert list(node.input) == ["src", "scales_scalar", "zps_scalar"]
    constants = initializers(out)
    assert sorted(constants) == ["scales_scalar", "zps_scalar"], "the 1-D originals are gone"
    assert (constants["scales_scalar"].shape, constants["scales_scalar"].tolist()) == ((), 0.5)
    assert (constants["zps_scalar"].dtype.name, constants["zps_scalar"].tolist()) == ("uint8", 3)
    assert opsets(out) == {"": 21}, "nothing of the domain is left: its import goes"
    onnx.checker.check_model(out, full_check=True)
    differential(out, model, [{"src": X}], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_dequantize_per_channel_s32_zps_are_cast(backend: str) -> None:
    model = spec_op_model(
        "DynamicDequantize",
        (S8, [2, 3]),
        np.array([0.5, 1.0, 2.0], np.float32),
        np.array([3, -1, 0], np.int32),
        dst_type=F,
        name="dq",
        qtype="per_channel",
        axis=-1,
    )
    out, result = _lower(model)
    assert result.report.converted_nodes[0].detail == "s8, axis -1"
    node = node_by_name(out.graph, "dq")
    assert (node.op_type, attributes(node)) == ("DequantizeLinear", {"axis": -1})
    assert list(node.input) == ["src", "scales", "dq_zero_point"]
    zero_point = initializers(out)["dq_zero_point"]
    assert (zero_point.dtype.name, zero_point.tolist()) == ("int8", [3, -1, 0])
    differential(out, model, [{"src": Q8}], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("op", ["Quantize", "Dequantize"])
def test_static_ops_get_constants_from_their_attributes(
    op: str, per_channel: bool, backend: str
) -> None:
    scales = [0.5, 0.25, 2.0] if per_channel else [0.5]
    zps = [3, -1, 0] if per_channel else [-3]
    quantize = op == "Quantize"
    extra: dict[str, Any] = {"qtype": "per_channel", "axis": 1} if per_channel else {}
    if quantize:
        extra["output_dtype"] = S8
    model = spec_op_model(
        op, (F if quantize else S8, [2, 3]), scales, zps, dst_type=S8 if quantize else F, **extra
    )
    out, result = _lower(model)
    assert result.report.emitted == {f"{op}Linear": 1}
    (node,) = out.graph.node
    assert list(node.input) == ["src", "node0_scale", "node0_zero_point"]
    assert attributes(node) == ({"axis": 1} if per_channel else {})
    constants = initializers(out)
    shape = (3,) if per_channel else ()
    assert constants["node0_scale"].shape == shape
    assert constants["node0_scale"].reshape(-1).tolist() == scales
    assert constants["node0_zero_point"].dtype == np.int8
    assert constants["node0_zero_point"].reshape(-1).tolist() == zps
    differential(out, model, [{"src": X if quantize else Q8}], backend)


def test_static_ops_without_zps_get_zeros_of_the_quantized_type() -> None:
    quantize = spec_op_model("Quantize", (F, [4]), [0.5], dst_type=U8, name="sq")
    out, _ = _lower(quantize)
    zero = initializers(out)["sq_zero_point"]
    assert (zero.dtype.name, zero.shape, zero.tolist()) == ("uint8", (), 0)
    dequantize = spec_op_model(
        "Dequantize", (TensorProto.FLOAT8E4M3FN, [4]), [0.5], dst_type=F, name="sdq"
    )
    out, _ = _lower(dequantize)
    zero = initializers(out)["sdq_zero_point"]
    assert zero.shape == () and zero.astype(np.float32).tolist() == 0.0
    assert node_by_name(out.graph, "sdq").op_type == "DequantizeLinear"


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_time_scales_are_reshaped_to_a_scalar(backend: str) -> None:
    model = spec_op_model("DynamicQuantize", (F, [2, 3]), (F, [1]), dst_type=U8, name="rq")
    out, _ = _lower(model)
    reshape, quantize = out.graph.node
    assert (reshape.op_type, list(reshape.input)) == (
        "Reshape",
        ["scales", "quantgraph_shape_scalar"],
    )
    assert initializers(out)["quantgraph_shape_scalar"].tolist() == []
    assert list(quantize.input) == ["src", reshape.output[0], "rq_zero_point"]
    feeds = [{"src": X, "scales": np.array([scale], np.float32)} for scale in (0.5, 0.1)]
    differential(out, model, feeds, backend)


def test_run_time_zps_of_the_quantized_type_are_used_as_they_are() -> None:
    model = spec_op_model(
        "DynamicDequantize", (U8, [2, 3]), (F, [3]), (U8, [3]), dst_type=F, qtype="per_channel"
    )
    out, result = _lower(model)
    assert result.report.skipped == []
    assert list(out.graph.node[0].input) == ["src", "scales", "zps"]
    assert initializers(out) == {}


# (model, node name, what the reason says)
CANNOT: dict[str, tuple[onnx.ModelProto, str]] = {
    "run-time-s32-zps": (
        spec_op_model("DynamicQuantize", (F, [4]), (F, [1]), (TensorProto.INT32, [1]), dst_type=U8),
        "zps of type s32 computed at run time cannot become an ONNX zero point of type u8",
    ),
    "s32-zps-beyond-u8": (
        spec_op_model(
            "DynamicDequantize",
            (U8, [4]),
            np.array([0.5], np.float32),
            np.array([300], np.int32),
            dst_type=F,
        ),
        "zero points [300] do not fit u8, ONNX's zp type",
    ),
    "static-zps-beyond-s8": (
        spec_op_model("Dequantize", (S8, [4]), [0.5], [-129], dst_type=F),
        "zero points [-129] do not fit s8",
    ),
    "float8-zps": (
        spec_op_model("Dequantize", (TensorProto.FLOAT8E5M2, [4]), [0.5], [1], dst_type=F),
        "float8 zero points must be zero",
    ),
    "float8-opset-18": (
        spec_op_model("Dequantize", (TensorProto.FLOAT8E4M3FN, [4]), [0.5], dst_type=F, opset=18),
        "float8 Q/DQ needs opset >= 19; the model has 18",
    ),
    # (per-axis below opset 13 becomes com.microsoft Q/DQ: test_contrib_forms_below_opset_13)
    "blocked-opset-20": (
        spec_op_model(
            "DynamicDequantize",
            (U8, [4, 2]),
            (F, [2, 2]),
            dst_type=F,
            opset=20,
            qtype="per_group",
            group_shape=[2, 1],
        ),
        "blocked Q/DQ (block_size) needs opset >= 21; the model has 20 (and com.microsoft Q/DQ "
        "has no such form)",
    ),
    "unknown-op": (
        spec_op_model("Requantize", (F, [4]), dst_type=F),
        "unknown quantgraph op Requantize",
    ),
    "no-scales-input": (
        spec_op_model("DynamicQuantize", (F, [4]), dst_type=U8),
        "scales input is missing",
    ),
    "no-scales-attribute": (
        spec_op_model("Quantize", (F, [4]), dst_type=U8),
        "attribute scales is missing",
    ),
    "unknown-channel-count": (
        spec_op_model(
            "DynamicDequantize", (U8, [2, 3]), (F, ["K"]), dst_type=F, qtype="per_channel"
        ),
        "no zps and the channel count is unknown",
    ),
}


@pytest.mark.parametrize("name", list(CANNOT))
def test_what_onnx_cannot_express_stays_and_is_reported(name: str) -> None:
    model, reason = CANNOT[name]
    out, result = _lower(model)
    assert not result.modified
    assert result.report.converted_nodes == []
    (skipped,) = result.report.skipped
    assert (skipped.node, skipped.op_type, skipped.graph) == (
        "node0",
        model.graph.node[0].op_type,
        "",
    )
    assert reason in skipped.reason, skipped.reason
    node = node_by_name(out.graph, "node0")
    assert serialize_node(node) == serialize_node(model.graph.node[0])
    assert opsets(out)[DOMAIN] == OPSET_VERSION


@pytest.mark.parametrize("name", list(CANNOT))
def test_a_skipped_node_leaves_the_graph_as_it_was(name: str) -> None:
    model, _ = CANNOT[name]
    out, _ = _lower(model)
    assert [serialize_node(n) for n in out.graph.node] == [
        serialize_node(n) for n in model.graph.node
    ]
    assert initializers(out).keys() == {t.name for t in model.graph.initializer}


def test_the_domain_import_stays_while_a_spec_node_is_left() -> None:
    """Main graph: Quantize -> Dequantize; a model-local function: the same pair."""
    function = helper.make_function(
        "local",
        "QDQ",
        ["fx"],
        ["fy"],
        [
            helper.make_node("Quantize", ["fx"], ["fq"], domain=DOMAIN, name="fq", scales=[0.25]),
            helper.make_node(
                "Dequantize", ["fq"], ["fy"], domain=DOMAIN, name="fdq", scales=[0.25]
            ),
        ],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )

    def build(quantize: onnx.NodeProto) -> onnx.ModelProto:
        return make_model(
            [
                quantize,
                helper.make_node("Dequantize", ["q"], ["d"], domain=DOMAIN, name="d", scales=[0.5]),
                helper.make_node("QDQ", ["d"], ["y"], domain="local", name="call"),
            ],
            [tensor_info("x", F, [4])],
            [tensor_info("y", F, [4])],
            domains={"local": 1, DOMAIN: OPSET_VERSION},
            functions=[function],
            value_info=[tensor_info("q", U8, [4])],
            check=False,
        )

    model = build(helper.make_node("Quantize", ["x"], ["q"], domain=DOMAIN, name="q", scales=[0.5]))
    out, result = _lower(model)
    assert [(n.node, n.graph) for n in result.report.converted_nodes] == [
        ("q", ""),
        ("d", ""),
        ("fq", "QDQ"),
        ("fdq", "QDQ"),
    ]
    assert result.report.skipped == []
    assert DOMAIN not in opsets(out)
    assert DOMAIN not in opsets(out.functions[0])
    onnx.checker.check_model(out, full_check=True)
    differential(out, model, [{"x": X.reshape(-1)[2:].copy()}], "python")

    # The same with the main graph's Quantize broken (no scales): it stays, so does the import.
    out, result = _lower(build(helper.make_node("Quantize", ["x"], ["q"], domain=DOMAIN, name="q")))
    assert [s.node for s in result.report.skipped] == ["q"]
    assert [n.node for n in result.report.converted_nodes] == ["d", "fq", "fdq"]
    assert opsets(out)[DOMAIN] == OPSET_VERSION
    assert opsets(out.functions[0])[DOMAIN] == OPSET_VERSION


def test_quantgraph_lower_checks_and_reports() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [2, 3]),
        np.array([0.5, 0.25, 1.0], np.float32),
        np.array([1, 2, 3], np.uint8),
        dst_type=U8,
        name="q",
        qtype="per_channel",
        axis=1,
    )
    result = quantgraph.lower(model)
    assert result.report.converted == {"DynamicQuantize": 1}
    assert result.checked
    onnx.checker.check_model(result.proto, full_check=True)
    assert [n.op_type for n in result.proto.graph.node] == ["QuantizeLinear"]
    differential(result.proto, model, [{"src": X}], "python")
