"""QdqToSpecPass on float8 Q/DQ (opsets 19+): the static ops, their semantics on the reference
evaluator and the native backend, and what the spec cannot express (runtime scales, saturate=0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph import DOMAIN
from quantgraph.errors import BackendError
from tests.builders import (
    assert_identical,
    attributes,
    differential,
    float_bits,
    initializers,
    make_model,
    node_by_name,
    ort_session,
    requires_native,
    serialize,
    serialize_node,
    tensor_info,
)
from tests.passes.qdq_models import (
    FLOAT8,
    f8_dq_model,
)

# -- float8 -------------------------------------------------------------------------------------


def _f8_q_model(elem: int, opset: int) -> onnx.ModelProto:
    """x -> QuantizeLinear -> y8 -> Cast(float) -> y."""
    return make_model(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y8"], name="q0"),
            helper.make_node("Cast", ["y8"], ["y"], name="from_f8", to=TensorProto.FLOAT),
        ],
        [tensor_info("x", TensorProto.FLOAT, [4, 8])],
        [tensor_info("y", TensorProto.FLOAT, [4, 8])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "s"),
            helper.make_tensor("z", elem, [], [0.0]),
        ],
        opset=opset,
    )


def _f8_feeds(quantize: bool) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    specials = np.resize(np.array([np.inf, -np.inf, 1e6, -1e6, 0.0, 240.0], np.float32), (4, 8))
    values = [(rng.standard_normal((4, 8)) * 40).astype(np.float32), specials]
    return [{"x" if quantize else "xf": v} for v in values]


@pytest.mark.parametrize("zero_point", [False, True], ids=["nozp", "zp0"])
@pytest.mark.parametrize("opset", [19, 21, 23, 25])
@pytest.mark.parametrize("f8", sorted(FLOAT8))
def test_float8_dequantize_goes_static(f8: str, opset: int, zero_point: bool) -> None:
    model = f8_dq_model(FLOAT8[f8], opset, zero_point)
    result = quantgraph.convert(model)  # float8 is static even without static=True
    assert result.report.emitted == {"Dequantize": 1}
    dq = node_by_name(result.proto.graph, "dq0")
    assert (dq.domain, dq.op_type, list(dq.input), list(dq.output)) == (
        DOMAIN,
        "Dequantize",
        ["x8"],
        ["y"],
    )
    attrs = attributes(dq)
    assert float_bits(attrs["scales"]) == float_bits([0.5])
    assert "zps" not in attrs, "the spec does not allow zps with f8"
    assert initializers(result.proto) == {}
    assert result.report.converted_nodes[0].detail.startswith("f8_")


@pytest.mark.parametrize("opset", [19, 21, 25])
@pytest.mark.parametrize("f8", sorted(FLOAT8))
def test_float8_quantize_goes_static(f8: str, opset: int) -> None:
    result = quantgraph.convert(_f8_q_model(FLOAT8[f8], opset))
    q = node_by_name(result.proto.graph, "q0")
    assert (q.domain, q.op_type) == (DOMAIN, "Quantize")
    assert attributes(q)["output_dtype"] == FLOAT8[f8]
    assert "zps" not in attributes(q)


@pytest.mark.parametrize("f8", sorted(FLOAT8))
def test_float8_semantics_reference_evaluator(f8: str) -> None:
    """The python backend has no f8; quantgraph's ReferenceEvaluator ops check the meaning."""
    from onnx.reference import ReferenceEvaluator

    from quantgraph.reference.evaluator import REFERENCE_OPS

    for model, quantize in (
        (f8_dq_model(FLOAT8[f8], 21, True), False),
        (_f8_q_model(FLOAT8[f8], 21), True),
    ):
        converted = quantgraph.convert(model).proto
        reference = ort_session(model)
        evaluator = ReferenceEvaluator(converted, new_ops=REFERENCE_OPS)
        for feed in _f8_feeds(quantize):
            got = evaluator.run(None, feed)
            assert isinstance(got, list)  # run returns a dict only for intermediate=True
            assert_identical(reference.run(None, feed), got, f8)


@pytest.mark.parametrize("backend", [pytest.param("native", marks=requires_native)])
@pytest.mark.parametrize("f8", sorted(FLOAT8))
def test_float8_semantics_native(f8: str, backend: str) -> None:
    for model, quantize in (
        (f8_dq_model(FLOAT8[f8], 21, True), False),
        (_f8_q_model(FLOAT8[f8], 21), True),
    ):
        differential(model, quantgraph.convert(model).proto, _f8_feeds(quantize), backend)


@pytest.mark.parametrize("kind", ["u8-identity", "f8-cast"])
def test_dequantize_without_zero_point_on_untyped_intermediate(kind: str) -> None:
    if kind == "f8-cast":
        model = f8_dq_model(TensorProto.FLOAT8E4M3FN, 21, False, typed=False)
        emitted = {"Dequantize": 1}
    else:
        model = make_model(
            [
                helper.make_node("Identity", ["w"], ["w2"], name="id0"),
                helper.make_node("DequantizeLinear", ["w2", "s"], ["y"], name="dq0"),
            ],
            [tensor_info("w", TensorProto.UINT8, [4, 8])],
            [tensor_info("y", TensorProto.FLOAT, [4, 8])],
            [numpy_helper.from_array(np.array(0.5, np.float32), "s")],
            opset=13,
        )
        emitted = {"DynamicDequantize": 1}
    result = quantgraph.convert(model)
    assert result.report.skipped == []
    assert result.report.emitted == emitted


def test_float8_on_python_backend_is_a_clear_error() -> None:
    converted = quantgraph.convert(f8_dq_model(FLOAT8["e4m3fn"], 21, False)).proto
    with pytest.raises(BackendError, match="native"):
        quantgraph.InferenceSession(converted, backend="python")


def test_float8_runtime_scale_and_saturate_zero_are_skipped() -> None:
    runtime = make_model(
        [helper.make_node("DequantizeLinear", ["x8", "s"], ["y"], name="dq0")],
        [
            tensor_info("x8", TensorProto.FLOAT8E4M3FN, [4]),
            tensor_info("s", TensorProto.FLOAT, []),
        ],
        [tensor_info("y", TensorProto.FLOAT, [4])],
        opset=21,
    )
    saturate = _f8_q_model(TensorProto.FLOAT8E4M3FN, 21)
    helper_attr = helper.make_attribute("saturate", 0)
    saturate.graph.node[0].attribute.append(helper_attr)
    for model in (runtime, saturate):
        before = serialize(model)
        result = quantgraph.convert(model, static=True)
        assert result.report.converted == {}
        assert len(result.report.skipped) == 1 and result.report.skipped[0].reason
        assert [serialize_node(n) for n in result.proto.graph.node] == [
            serialize_node(n) for n in model.graph.node
        ]
        assert serialize(model) == before
