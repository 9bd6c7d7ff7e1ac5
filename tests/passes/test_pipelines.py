"""The pass pipelines: conversion and lowering (quantgraph.passes.pipelines), pipelines.run, which
lets a failing pass's own error surface instead of onnx-ir's PassError wrappers, and the Python
backend's preparation pipeline (quantgraph.backends.python.prepare)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantgraph.backends.python.prepare import PREPARED_DOMAIN, PythonLimitsPass, prepare_model
from quantgraph.errors import BackendError
from quantgraph.ir.onnx_schemas import register
from quantgraph.passes import (
    NoDynamicForm,
    QdqToSpecPass,
    RewriteReport,
    SpecToQdqPass,
    StampOriginPass,
    StaticToDynamicPass,
    UnknownDimsPass,
    pipelines,
)
from quantgraph.passes.contrib.gather_block_quantized import GatherBlockQuantizedPass
from quantgraph.passes.contrib.matmul_nbits import MatMulNBitsPass
from quantgraph.passes.contrib.restore_gather_block import RestoreGatherBlockQuantizedPass
from quantgraph.passes.contrib.restore_nbits import RestoreMatMulNBitsPass
from quantgraph.passes.integer.dynamic_quantize_linear import (
    DynamicQuantizeLinearPass,
    RestoreDynamicQuantizeLinearPass,
)
from quantgraph.passes.integer.integer_ops import IntegerOpsPass
from quantgraph.passes.integer.other_formats import OtherFormatsPass
from quantgraph.passes.integer.qoperator import QOperatorPass
from quantgraph.passes.integer.restore_integer_ops import RestoreIntegerOpsPass
from quantgraph.passes.integer.restore_qoperator import RestoreQOperatorPass
from quantgraph.passes.qdq.cast_scale import CastScalePass
from quantgraph.passes.qdq.restore_cast_scale import RestoreCastScalePass
from quantgraph.passes.qdq.short_blocks import PadShortBlocksPass, TrimPaddedBlocksPass
from quantgraph.passes.stamp_origin import MODEL_OP, NODE_NAME
from quantgraph.spec import DOMAIN, SpecError
from tests.builders import (
    BACKENDS,
    attributes,
    differential,
    make_model,
    opsets,
    spec_op_model,
    tensor_info,
)

F = TensorProto.FLOAT
U8 = TensorProto.UINT8
X = np.array([[-300.0, -2.5, -0.5, 0.0], [0.25, 1.5, 2.5, 63.5]], np.float32)


@pytest.fixture(autouse=True, scope="module")
def _schemas() -> None:
    register()  # the checker pass checks the spec ops against their schemas


def _qdq_model() -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> y, per-axis u8."""
    return make_model(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", axis=0),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0", axis=0),
        ],
        [tensor_info("x", F, [2, 4])],
        [tensor_info("y", F, [2, 4])],
        [
            numpy_helper.from_array(np.array([0.5, 0.125], np.float32), "s"),
            numpy_helper.from_array(np.array([3, 250], np.uint8), "z"),
        ],
    )


# -- conversion and lowering --------------------------------------------------------------------


def test_the_pipelines_and_their_options() -> None:
    report = RewriteReport()
    calls: list[tuple[int, int]] = []
    manager = pipelines.conversion(
        report,
        static=True,
        contrib=False,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert manager.steps == 1
    # negative dims made unknown, other formats listed, MatMulNBits, GatherBlockQuantized, Cast x
    # scale weights, integer and QOperator nodes, DynamicQuantizeLinear, short-block padding, the
    # rewrite, the padding undone, the check
    dims, other, nbits, gather, cast, integer, qop, dql, pad, rewrite, trim, _check = manager.passes
    assert isinstance(gather, GatherBlockQuantizedPass) and gather.report is report
    assert isinstance(dims, UnknownDimsPass)
    assert isinstance(other, OtherFormatsPass) and other.report is report
    assert isinstance(nbits, MatMulNBitsPass) and isinstance(qop, QOperatorPass)
    assert isinstance(integer, IntegerOpsPass) and integer.report is report
    assert isinstance(cast, CastScalePass) and cast.report is report
    assert isinstance(dql, DynamicQuantizeLinearPass) and dql.report is report
    assert isinstance(pad, PadShortBlocksPass) and isinstance(trim, TrimPaddedBlocksPass)
    assert isinstance(rewrite, QdqToSpecPass)
    assert (rewrite.static, rewrite.contrib, rewrite.report) == (True, False, report)
    *_, unchecked, _trim = pipelines.conversion(report, check=False).passes
    assert isinstance(unchecked, QdqToSpecPass)
    lowered = pipelines.lowering(report).passes
    _, nbits_back, gather_back, cast_back, integer_back, restore, lower, qop_back, trim, _ = lowered
    assert isinstance(nbits_back, RestoreMatMulNBitsPass)
    assert isinstance(gather_back, RestoreGatherBlockQuantizedPass)
    assert len(pipelines.lowering(report, gather_qdq=True).passes) == len(lowered) - 1
    assert isinstance(cast_back, RestoreCastScalePass) and cast_back.report is report
    assert isinstance(integer_back, RestoreIntegerOpsPass)
    assert isinstance(restore, RestoreDynamicQuantizeLinearPass) and restore.report is report
    assert isinstance(lower, SpecToQdqPass) and lower.report is report
    assert isinstance(qop_back, RestoreQOperatorPass) and qop_back.report is report
    assert isinstance(trim, TrimPaddedBlocksPass)
    *_, unchecked, _trim = pipelines.lowering(report, check=False, to_qdq=True).passes
    assert isinstance(unchecked, SpecToQdqPass)

    model = ir.from_proto(_qdq_model())
    assert pipelines.run(manager, model).modified
    assert calls == [(2, 2)]
    assert report.emitted == {"Dequantize": 1, "Quantize": 1}


@pytest.mark.parametrize("pipeline", ["conversion", "lowering"])
def test_the_full_check_is_the_last_pass(pipeline: str) -> None:
    """onnx's full check runs after the rewrite unless check=False."""
    unknown = make_model(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")],
        [tensor_info("x", F, [4])],
        [tensor_info("y", F, [4])],
        check=False,
    )
    build = getattr(pipelines, pipeline)
    with pytest.raises(onnx.checker.ValidationError, match="NoSuchOp"):
        pipelines.run(build(RewriteReport()), ir.from_proto(unknown))
    result = pipelines.run(build(RewriteReport(), check=False), ir.from_proto(unknown))
    assert not result.modified


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_conversion_then_lowering_agree_with_the_original(static: bool, backend: str) -> None:
    original = _qdq_model()
    model = ir.from_proto(original)
    report = RewriteReport()
    result = pipelines.run(pipelines.conversion(report, static=static), model)
    assert result.modified and result.model is model
    assert report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    converted = ir.to_proto(model)
    assert {n.domain for n in converted.graph.node} == {DOMAIN}
    differential(original, converted, [{"x": X}], backend)

    back = RewriteReport()
    assert pipelines.run(pipelines.lowering(back), model).modified
    assert back.converted == report.emitted
    lowered = ir.to_proto(model)
    assert [n.op_type for n in lowered.graph.node] == ["QuantizeLinear", "DequantizeLinear"]
    assert DOMAIN not in opsets(lowered)
    differential(original, lowered, [{"x": X}], "python")


def test_nothing_to_do_is_not_modified() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor_info("x", F, [4])],
        [tensor_info("y", F, [4])],
    )
    result = pipelines.run(pipelines.conversion(RewriteReport()), ir.from_proto(model))
    assert not result.modified


# -- pipelines.run: the failing pass's own error ------------------------------------------------


class _Raises(ir.passes.InPlacePass):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        raise self.error


ERRORS = [
    pytest.param(SpecError("Quantize", "n0", "missing-attribute", name="scales"), id="spec-error"),
    pytest.param(NoDynamicForm("no dynamic form"), id="no-dynamic-form"),
    pytest.param(ValueError("plain"), id="value-error"),
]


@pytest.mark.parametrize("error", ERRORS)
def test_run_raises_the_passs_own_error(error: Exception) -> None:
    manager = ir.passes.PassManager([StaticToDynamicPass(), _Raises(error)])
    model = ir.from_proto(spec_op_model("Quantize", (F, [4]), [0.5], dst_type=U8))
    with pytest.raises(ir.passes.PassError):  # what onnx-ir raises on its own
        manager(ir.from_proto(spec_op_model("Quantize", (F, [4]), [0.5], dst_type=U8)))
    with pytest.raises(type(error)) as raised:
        pipelines.run(manager, model)
    assert raised.value is error
    assert raised.value.__suppress_context__, "the PassError chain is not shown"


def test_run_unwraps_nested_pipelines() -> None:
    error = SpecError("Dequantize", "deep", "missing-attribute", name="scales")
    inner = ir.passes.PassManager([_Raises(error)])
    outer = ir.passes.PassManager([ir.passes.PassManager([inner])])
    with pytest.raises(SpecError) as raised:
        pipelines.run(outer, ir.from_proto(spec_op_model("Dequantize", (U8, [4]), dst_type=F)))
    assert raised.value is error
    assert str(raised.value) == "Dequantize node 'deep': " + error.detail + (
        " [rule missing-attribute]"
    )


def test_run_surfaces_a_real_passs_error() -> None:
    f8 = spec_op_model(
        "Quantize", (F, [4]), [0.5], dst_type=None, name="f8", output_dtype=TensorProto.FLOAT8E5M2
    )
    with pytest.raises(NoDynamicForm, match=r"^Quantize node 'f8' uses f8_e5m2"):
        pipelines.run(ir.passes.PassManager([StaticToDynamicPass()]), ir.from_proto(f8))


# -- the Python backend's preparation pipeline ---------------------------------------------------


def test_prepare_model_puts_nodes_in_the_python_kernels_form() -> None:
    model = ir.from_proto(spec_op_model("Quantize", (F, [2, 4]), [0.5], [3], dst_type=U8))
    assert prepare_model(model)
    out = ir.to_proto(model)
    (node,) = out.graph.node
    assert (node.domain, node.op_type) == (PREPARED_DOMAIN, "DynamicQuantize")
    assert attributes(node) == {
        MODEL_OP: b"Quantize",
        NODE_NAME: b"node0",
        "qtype": b"per_tensor",
        "axis": 1,
    }
    assert list(node.input) == ["src", "node0_scales", "node0_zps"]
    assert opsets(out)[PREPARED_DOMAIN] == opsets(out)[DOMAIN]


def test_prepare_model_without_spec_nodes_changes_nothing() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor_info("x", F, [4])],
        [tensor_info("y", F, [4])],
    )
    assert not prepare_model(ir.from_proto(model))


def test_prepare_model_raises_the_rule_error_not_a_pass_error() -> None:
    model = spec_op_model("Quantize", (F, [4]), [0.0], dst_type=U8, name="zero")
    with pytest.raises(SpecError) as raised:
        prepare_model(ir.from_proto(model))
    assert (raised.value.node, raised.value.rule) == ("zero", "scale-value")


@pytest.mark.parametrize(
    ("model", "says"),
    [
        pytest.param(
            spec_op_model(
                "Quantize", (F, [4]), [0.5], dst_type=None, output_dtype=TensorProto.FLOAT8E4M3FN
            ),
            "which has no dynamic op",
            id="float8",
        ),
        pytest.param(
            spec_op_model("Quantize", (F, [4]), [0.5], [300], dst_type=U8),
            "do not fit u8",
            id="static-zps-beyond-u8",
        ),
    ],
)
def test_what_the_python_kernels_cannot_run_is_a_backend_error(
    model: onnx.ModelProto, says: str
) -> None:
    with pytest.raises(BackendError) as raised:
        prepare_model(ir.from_proto(model))
    message = str(raised.value)
    assert message.startswith("python backend: "), message
    assert says in message and "node 'node0'" in message, message
    assert "backend='native'" in message, message


@pytest.mark.parametrize("stamped", [False, True], ids=["unstamped", "stamped"])
@pytest.mark.parametrize(
    ("zps", "dst", "output_dtype"),
    [(U8, TensorProto.INT8, TensorProto.INT8), (TensorProto.INT32, U8, 0)],
    ids=["s8-dst-u8-zps", "s32-zps"],
)
def test_python_limits_pass_gives_another_dst_an_op_of_its_own(
    stamped: bool, zps: int, dst: int, output_dtype: int
) -> None:
    """onnxruntime-extensions overloads cannot differ only in output type: a dst that is not
    the zps type runs as DynamicQuantize_<dst> with an explicit output_dtype; dst u8 with u8
    zps runs as it is."""
    model = spec_op_model("DynamicQuantize", (F, [4]), (F, [1]), (zps, [1]), dst_type=dst)
    if output_dtype:
        model.graph.node[0].attribute.append(helper.make_attribute("output_dtype", output_dtype))
    other = ir.from_proto(model)
    if stamped:
        StampOriginPass()(other)
    assert PythonLimitsPass()(other).modified
    node = next(iter(other.graph))
    assert node.op_type == f"DynamicQuantize_{'s8' if dst == TensorProto.INT8 else 'u8'}"
    assert node.attributes.get_int("output_dtype") == dst
    good = ir.from_proto(
        spec_op_model("DynamicQuantize", (F, [4]), (F, [1]), (U8, [1]), dst_type=U8)
    )
    assert not PythonLimitsPass()(good).modified
