"""ExplicitFormPass: dynamic ops get the spec's defaults written out (qtype, axis, a zero zps
input of the quantized type), meaning the same; what cannot be written is NoExplicitForm."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from quantgraph.passes import ConvertedNode, ExplicitFormPass, NoExplicitForm, RewriteResult
from quantgraph.spec import DOMAIN, OPSET_VERSION
from tests.builders import (
    BACKENDS,
    assert_runs_alike,
    attributes,
    initializers,
    make_model,
    serialize,
    spec_op_model,
    tensor_info,
)

F = TensorProto.FLOAT
S1 = np.array([0.5], np.float32)
S3 = np.array([0.5, 0.25, 2.0], np.float32)
X = np.array([[-300.0, -2.5, -0.5], [0.25, 1.5, 63.5]], np.float32)


def _apply(model: onnx.ModelProto) -> tuple[onnx.ModelProto, RewriteResult]:
    ir_model = ir.from_proto(model)
    result = ExplicitFormPass()(ir_model)
    assert isinstance(result, RewriteResult)
    assert result.model is ir_model, "the pass works in place"
    return ir.to_proto(ir_model), result


@pytest.mark.parametrize("backend", BACKENDS)
def test_defaults_are_written_out(backend: str) -> None:
    model = spec_op_model("DynamicQuantize", (F, [2, 3]), S1, dst_type=TensorProto.UINT8)
    out, result = _apply(model)
    assert result.modified
    assert result.report.converted_nodes == [
        ConvertedNode("node0", "DynamicQuantize", "DynamicQuantize", "explicit")
    ]
    (node,) = out.graph.node
    assert (node.domain, node.op_type) == (DOMAIN, "DynamicQuantize")
    assert attributes(node) == {"qtype": b"per_tensor", "axis": 1}
    assert list(node.input) == ["src", "scales", "quantgraph_zero_u8_1"]
    zero = initializers(out)["quantgraph_zero_u8_1"]
    assert (zero.dtype.name, zero.tolist()) == ("uint8", [0])
    assert_runs_alike(model, out, [{"src": X}], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("op", "src", "dst", "extra", "zero_type", "name"),
    [
        (
            "DynamicQuantize",
            F,
            TensorProto.INT8,
            {"output_dtype": TensorProto.INT8},
            np.int8,
            "quantgraph_zero_s8_3",
        ),
        ("DynamicDequantize", TensorProto.INT8, F, {}, np.int8, "quantgraph_zero_s8_3"),
        ("DynamicDequantize", TensorProto.UINT8, F, {}, np.uint8, "quantgraph_zero_u8_3"),
    ],
    ids=["quantize-output_dtype-s8", "dequantize-s8", "dequantize-u8"],
)
def test_zero_zps_have_the_quantized_type_and_the_channel_count(
    op: str,
    src: int,
    dst: int,
    extra: dict[str, Any],
    zero_type: type[np.integer],
    name: str,
    backend: str,
) -> None:
    model = spec_op_model(
        op, (src, [2, 3]), S3, dst_type=dst, qtype="per_channel", axis=-1, **extra
    )
    out, result = _apply(model)
    assert result.modified
    (node,) = out.graph.node
    assert attributes(node) == {"qtype": b"per_channel", "axis": -1, **extra}
    assert node.input[2] == name
    zero = initializers(out)[name]
    assert zero.dtype == np.dtype(zero_type)
    assert zero.tolist() == [0, 0, 0]
    numpy_src = onnx.helper.tensor_dtype_to_np_dtype(src)
    feed = X if src == F else np.array([[0, 1, 100], [127, 7, 3]], numpy_src)
    assert_runs_alike(model, out, [{"src": feed}], backend)


def test_channel_count_from_src_when_the_scales_length_is_symbolic() -> None:
    model = spec_op_model(
        "DynamicDequantize",
        (TensorProto.UINT8, ["N", 4]),
        (F, ["K"]),
        dst_type=F,
        qtype="per_channel",
        axis=1,
    )
    out, _ = _apply(model)
    assert initializers(out)["quantgraph_zero_u8_4"].tolist() == [0, 0, 0, 0]


def test_unknown_channel_count_has_no_explicit_form() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [2, "C"]),
        (F, ["K"]),
        dst_type=TensorProto.UINT8,
        name="pc",
        qtype="per_channel",
        axis=1,
    )
    with pytest.raises(NoExplicitForm) as raised:
        ExplicitFormPass()(ir.from_proto(model))
    assert str(raised.value) == (
        "DynamicQuantize node 'pc': the channel count is unknown, so an explicit zero zps "
        "cannot be made"
    )
    assert isinstance(raised.value, ValueError)


def test_float8_dst_has_no_zero_zps() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [4]),
        (F, [1]),
        dst_type=None,
        name="f8",
        output_dtype=TensorProto.FLOAT8E4M3FN,
    )
    with pytest.raises(
        NoExplicitForm, match=r"^DynamicQuantize node 'f8': no zps type for f8_e4m3"
    ):
        ExplicitFormPass()(ir.from_proto(model))


def test_explicit_nodes_are_left_as_they_are() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [2, 3]),
        (F, [1]),
        (TensorProto.INT8, [1]),
        dst_type=TensorProto.INT8,
        qtype="per_tensor",
        axis=0,
    )
    out, result = _apply(model)
    assert not result.modified
    assert result.report.converted_nodes == [] and result.report.skipped == []
    assert serialize(out) == serialize(ir.to_proto(ir.from_proto(model)))


def test_a_given_zps_input_is_kept_when_attributes_are_added() -> None:
    zps = np.array([3], np.uint8)
    model = spec_op_model("DynamicDequantize", (TensorProto.UINT8, [4]), S1, zps, dst_type=F)
    out, result = _apply(model)
    assert result.modified
    (node,) = out.graph.node
    assert list(node.input) == ["src", "scales", "zps"]
    assert attributes(node) == {"qtype": b"per_tensor", "axis": 1}
    assert sorted(initializers(out)) == ["scales", "zps"]


def test_static_ops_are_not_visited() -> None:
    model = spec_op_model("Quantize", (F, [4]), [0.5], dst_type=TensorProto.UINT8)
    out, result = _apply(model)
    assert not result.modified
    assert serialize(out) == serialize(ir.to_proto(ir.from_proto(model)))


def test_nodes_share_one_zero_constant() -> None:
    nodes = [
        helper.make_node("DynamicQuantize", ["x", "s"], [out], domain=DOMAIN, name=name)
        for name, out in (("first", "a"), ("second", "b"))
    ]
    model = make_model(
        nodes,
        [tensor_info("x", F, [4]), tensor_info("s", F, [1])],
        [tensor_info(name, TensorProto.UINT8, [4]) for name in "ab"],
        domains={DOMAIN: OPSET_VERSION},
        check=False,
    )
    out, result = _apply(model)
    assert [n.node for n in result.report.converted_nodes] == ["first", "second"]
    assert [n.input[2] for n in out.graph.node] == ["quantgraph_zero_u8_1"] * 2
    assert list(initializers(out)) == ["quantgraph_zero_u8_1"]
