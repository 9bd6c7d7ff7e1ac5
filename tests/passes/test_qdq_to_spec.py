"""QdqToSpecPass (ONNX Q/DQ -> the spec ops) through quantgraph.convert on hand-built graphs.

Every variant of ONNX QuantizeLinear/DequantizeLinear the issue names is built here, converted
(dynamic and static), checked structurally, and run differentially: the original in
onnxruntime at ORT_DISABLE_ALL against the converted model on the Python backend. At the end,
the pass itself on onnx_ir models. float8: test_qdq_to_spec_float8.py; Q/DQ in subgraphs and
functions: test_qdq_to_spec_subgraphs.py; what convert guarantees of the whole model
(preservation, idempotence, inputs untouched): tests/test_converter.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantgraph
from quantgraph import DOMAIN
from quantgraph.passes import QdqToSpecPass, RewriteReport, RewriteResult
from quantgraph.reference.compare import compare
from tests.builders import (
    BACKENDS,
    assert_identical,
    attributes,
    dequantize_linear_model,
    differential,
    float_bits,
    initializers,
    make_model,
    node_by_name,
    opsets,
    ort_session,
    producer,
    quantize_linear_model,
    serialize_node,
    serialize_vi,
    tensor_info,
)
from tests.passes.qdq_models import (
    OPSETS,
    QDQ,
    QUANT,
    SHAPE,
    Case,
    QdqAttributes,
    dq_only,
    q_only,
)

# -- building models ---------------------------------------------------------------------------


def _cases() -> Iterator[Case]:
    for opset in OPSETS:
        for quant in QUANT:
            yield Case(opset, quant, "scalar")
            yield Case(opset, quant, "runtime")
            if opset >= 13:
                yield Case(opset, quant, "one")
                yield Case(opset, quant, "axis", axis=1)
                yield Case(opset, quant, "axis", axis=-1)
        yield Case(opset, "u8", "scalar", zero_point=False)
        yield Case(opset, "u8", "runtime", zero_point=False)
        if opset >= 13:
            yield Case(opset, "u8", "axis", axis=0, zero_point=False)
        if opset >= 21:
            yield Case(opset, "s8", "scalar", zero_point=False, output_dtype=True)
            yield Case(opset, "s8", "axis", axis=-2, zero_point=False, output_dtype=True)


CASES = list(_cases())


# -- every Q/DQ variant: structure -------------------------------------------------------------


def _check_1d_input(
    graph: onnx.GraphProto, name: str, case: Case, original: str, expected: np.ndarray
) -> None:
    """A per-tensor/per-axis scale or zp input of a dynamic op, as the issue describes it."""
    inits = {t.name: t for t in graph.initializer}
    if case.scale == "scalar":
        # A scalar initializer becomes a NEW 1-D initializer with the same value.
        assert name != original
        assert name in inits, f"{name} should be an initializer"
        array = numpy_helper.to_array(inits[name])
        assert array.shape == (1,)
        assert array.dtype == expected.dtype
        assert array.tobytes() == expected.reshape(1).tobytes()
    elif case.scale == "runtime":
        # A run-time scalar from a graph input is reshaped to [1] in the graph.
        reshape = producer(graph, name)
        assert reshape is not None and reshape.op_type == "Reshape" and reshape.domain == ""
        assert reshape.input[0] == original
        target = numpy_helper.to_array(inits[reshape.input[1]])
        assert target.tolist() == [1]
    else:
        # Already 1-D: used as it is.
        assert name == original
        assert numpy_helper.to_array(inits[name]).tobytes() == expected.tobytes()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pass_structure(case: Case, static: bool) -> None:
    model = case.model()
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)

    assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert result.report.skipped == []
    assert opsets(out) == {"": case.opset, DOMAIN: 1}
    assert [serialize_vi(v) for v in out.graph.input] == [
        serialize_vi(v) for v in model.graph.input
    ]
    assert [serialize_vi(v) for v in out.graph.output] == [
        serialize_vi(v) for v in model.graph.output
    ]
    assert not any(n.op_type in QDQ for n in out.graph.node)

    q, dq = node_by_name(out.graph, "q0"), node_by_name(out.graph, "dq0")
    assert q.domain == dq.domain == DOMAIN
    assert (list(q.input[:1]), list(q.output)) == (["x"], ["q"])
    assert (list(dq.input[:1]), list(dq.output)) == (["q"], ["y"])
    goes_static = static and case.scale != "runtime"
    assert q.op_type == ("Quantize" if goes_static else "DynamicQuantize")
    assert dq.op_type == ("Dequantize" if goes_static else "DynamicDequantize")

    qtype = "per_channel" if case.per_channel else "per_tensor"
    for node in (q, dq):
        attrs = attributes(node)
        assert attrs.get("qtype", b"per_tensor") == qtype.encode()
        if case.per_channel:
            assert attrs["axis"] == case.axis  # kept as written, negative included
        if goes_static:
            assert list(node.input) == [node.input[0]]
            assert float_bits(attrs["scales"]) == float_bits(case.scales())
            if case.zero_point:
                assert attrs["zps"] == case.zps().reshape(-1).astype(np.int64).tolist()
            else:
                assert attrs.get("zps", [0] * case.count) == [0] * case.count
        else:
            assert len(node.input) == 3, "the zero point is explicit"
            _check_1d_input(out.graph, node.input[1], case, "s", case.scales())
            if case.zero_point:
                _check_1d_input(out.graph, node.input[2], case, "z", case.zps())
            else:
                zero = initializers(out)[node.input[2]]
                assert zero.dtype == case.np_type
                assert zero.shape == (case.count,)
                assert not zero.any()
    if goes_static:
        assert attributes(q)["output_dtype"] == case.elem
        # Constants folded into attributes leave no unused initializers behind.
        assert "s" not in initializers(out) and "z" not in initializers(out)
    elif case.scale == "scalar":
        assert "s" not in initializers(out), "the scalar initializer had no other user"
    if not goes_static and not case.zero_point:
        assert attributes(q).get("output_dtype", case.elem) == case.elem


def test_scale_constant_zero_point_runtime_goes_dynamic_under_static() -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, SHAPE), tensor_info("z", TensorProto.UINT8, [])],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        [numpy_helper.from_array(np.array(0.25, np.float32), "s")],
        opset=13,
    )
    result = quantgraph.convert(model, static=True)
    assert result.report.emitted == {"DynamicDequantize": 1, "DynamicQuantize": 1}
    feeds: list[dict[str, np.ndarray]] = [
        {"x": (np.arange(24, dtype=np.float32).reshape(SHAPE) - 12) / 8, "z": np.array(z, np.uint8)}
        for z in (0, 128, 255)
    ]
    differential(model, result.proto, feeds)


def test_new_names_do_not_collide_with_existing_ones() -> None:
    # An unrelated initializer already uses the name the pass would pick for the 1-D scale.
    taken = np.array([7.0, 8.0], np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s"], ["q"], name="q0"),
        helper.make_node("DequantizeLinear", ["q", "s"], ["d"], name="dq0"),
        helper.make_node("Mul", ["d", "s_1d"], ["y"], name="mul0"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, [3, 2])],
        [tensor_info("y", TensorProto.FLOAT, [3, 2])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "s"),
            numpy_helper.from_array(taken, "s_1d"),
        ],
        opset=13,
    )
    result = quantgraph.convert(model)
    inits = initializers(result.proto)
    assert inits["s_1d"].tobytes() == taken.tobytes()
    mul = node_by_name(result.proto.graph, "mul0")
    assert list(mul.input) == ["d", "s_1d"]
    names = [t.name for t in result.proto.graph.initializer]
    assert len(names) == len(set(names))
    differential(
        model, result.proto, [{"x": np.linspace(-3, 3, 6, dtype=np.float32).reshape(3, 2)}]
    )


def test_unnamed_nodes_and_empty_optional_zero_point() -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", ""], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", ""], ["y"]),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, SHAPE), tensor_info("s", TensorProto.FLOAT, [])],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        opset=13,
    )
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
        assert [n.node for n in result.report.converted_nodes] == ["", ""]
        spec_nodes = [n for n in result.proto.graph.node if n.domain == DOMAIN]
        assert [(n.name, list(n.output)) for n in spec_nodes] == [("", ["q"]), ("", ["y"])]
        for node in spec_nodes:
            zero = initializers(result.proto)[node.input[2]]
            assert (zero.dtype, zero.tolist()) == (np.dtype(np.uint8), [0])
        differential(model, result.proto, Case(13, "u8", "runtime", zero_point=False).feeds())


def test_shared_scale_stays_shared() -> None:
    result = quantgraph.convert(Case(13, "u8", "scalar").model())
    q = node_by_name(result.proto.graph, "q0")
    dq = node_by_name(result.proto.graph, "dq0")
    assert q.input[1] == dq.input[1] and q.input[2] == dq.input[2]
    assert sorted(initializers(result.proto)) == sorted({q.input[1], q.input[2]})


# -- every Q/DQ variant: semantics -------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rewrite_matches_onnxruntime(case: Case, static: bool, backend: str) -> None:
    model = case.model()
    converted = quantgraph.convert(model, static=static).proto
    differential(model, converted, case.feeds(), backend)


@cache
def _runtime_sessions(
    quant: str, per_channel: bool
) -> tuple[ort.InferenceSession, quantgraph.InferenceSession]:
    elem, _ = QUANT[quant]
    count = SHAPE[1] if per_channel else 1
    attrs: QdqAttributes = {"axis": 1} if per_channel else {}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", **attrs),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0", **attrs),
    ]
    model = make_model(
        nodes,
        [
            tensor_info("x", TensorProto.FLOAT, SHAPE),
            tensor_info("s", TensorProto.FLOAT, [count]),
            tensor_info("z", elem, [count]),
        ],
        [tensor_info("q", elem, SHAPE), tensor_info("y", TensorProto.FLOAT, SHAPE)],
        opset=21,
    )
    converted = quantgraph.convert(model).proto
    return ort_session(model), quantgraph.InferenceSession(converted, backend="python")


@st.composite
def _qdq_inputs(draw: st.DrawFn) -> tuple[str, bool, dict[str, np.ndarray]]:
    quant = draw(st.sampled_from(sorted(QUANT)))
    per_channel = draw(st.booleans())
    np_type = QUANT[quant][1]
    info = np.iinfo(np_type)
    count = SHAPE[1] if per_channel else 1
    scale = draw(
        st.lists(
            st.floats(float(np.float32(1e-4)), float(np.float32(1e4)), width=32),
            min_size=count,
            max_size=count,
        )
    )
    zp = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=count, max_size=count))
    scales = np.array(scale, np.float32)
    size = int(np.prod(SHAPE))
    raw = draw(st.lists(st.floats(width=32), min_size=size, max_size=size))
    steps = draw(st.lists(st.integers(-400, 400), min_size=size, max_size=size))
    tie = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    s_b = scales.reshape((1, count, 1))
    ties = ((np.array(steps, np.float32) + 0.5).reshape(SHAPE) * s_b).astype(np.float32)
    x = np.where(np.array(tie).reshape(SHAPE), ties, np.array(raw, np.float32).reshape(SHAPE))
    feed: dict[str, np.ndarray] = {
        "x": x.astype(np.float32),
        "s": scales,
        "z": np.array(zp, np_type),
    }
    return quant, per_channel, feed


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_qdq_inputs())
def test_rewrite_matches_onnxruntime_property(
    sample: tuple[str, bool, dict[str, np.ndarray]],
) -> None:
    quant, per_channel, feed = sample
    reference, rewritten = _runtime_sessions(quant, per_channel)
    assert_identical(reference.run(None, feed), rewritten.run(None, feed), "property")


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_overridable_initializer_stays_a_run_time_value(static: bool) -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, [4]), tensor_info("s", TensorProto.FLOAT, [])],
        [tensor_info("y", TensorProto.FLOAT, [4])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "s"),
            numpy_helper.from_array(np.array(3, np.uint8), "z"),
        ],
        opset=21,
    )
    result = quantgraph.convert(model, static=static)
    x = np.array([-1.0, 0.0, 1.0, 2.2], np.float32)
    feeds = [{"x": x}, {"x": x, "s": np.array(0.1, np.float32)}]
    differential(model, result.proto, feeds)


@pytest.mark.parametrize("value", [0.0, np.inf], ids=["zero", "inf"])
def test_unusable_constant_scale_is_skipped(value: float) -> None:
    model = quantize_linear_model(
        (TensorProto.FLOAT, [4]), np.array(value, np.float32), np.array(3, np.uint8)
    )
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        assert result.report.converted == {}
        assert [s.node for s in result.report.skipped] == ["q0"]
        assert "scale" in result.report.skipped[0].reason
        differential(model, result.proto, [{"x": np.array([-1, 0, 1, np.nan], np.float32)}])


# -- QuantizeLinear-21 output_dtype, opset 23+ attributes ---------------------------------------


@pytest.mark.parametrize("opset", [21, 23, 25])
@pytest.mark.parametrize("quant", sorted(QUANT))
def test_output_dtype_is_honoured(opset: int, quant: str) -> None:
    case = Case(opset, quant, "scalar", zero_point=False, output_dtype=True)
    for static in (False, True):
        result = quantgraph.convert(case.model(), static=static)
        q = node_by_name(result.proto.graph, "q0")
        if static:
            assert attributes(q)["output_dtype"] == case.elem
        else:
            assert initializers(result.proto)[q.input[2]].dtype == case.np_type
        assert result.report.converted_nodes[0].detail.startswith(quant)


def _precision_model(precision: int) -> onnx.ModelProto:
    return quantize_linear_model(
        (TensorProto.FLOAT, [12]),
        np.array(0.1, np.float32),
        np.array(0, np.uint8),
        opset=25,
        precision=precision,
    )


PRECISION_FEED = {
    "x": np.array(
        [0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 1.05, 2.05, 3.3, 7.77, 12.34, 25.5], np.float32
    )
}


def test_quantize_precision_float_converts() -> None:
    model = _precision_model(TensorProto.FLOAT)
    result = quantgraph.convert(model)
    assert result.report.converted == {"QuantizeLinear": 1}
    differential(model, result.proto, [PRECISION_FEED])


def test_quantize_precision_float16_keeps_its_meaning() -> None:
    model = _precision_model(TensorProto.FLOAT16)
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        differential(model, result.proto, [PRECISION_FEED])


def _dq_output_dtype_model(output_dtype: int, opset: int) -> onnx.ModelProto:
    out_type = TensorProto.FLOAT16 if output_dtype == TensorProto.FLOAT16 else TensorProto.FLOAT
    return dequantize_linear_model(
        (TensorProto.UINT8, [2, 3]),
        np.array(0.5, np.float32),
        np.array(3, np.uint8),
        y_type=out_type,
        opset=opset,
        output_dtype=output_dtype,
    )


DQ_FEED = {"x": np.arange(0, 255, 43, dtype=np.uint8).reshape(2, 3)}


@pytest.mark.parametrize("opset", [23, 25])
def test_dequantize_output_dtype_float_converts(opset: int) -> None:
    model = _dq_output_dtype_model(TensorProto.FLOAT, opset)
    result = quantgraph.convert(model)
    assert result.report.converted == {"DequantizeLinear": 1}
    differential(model, result.proto, [DQ_FEED])


@pytest.mark.parametrize("opset", [23, 25])
def test_dequantize_output_dtype_float16_is_left_alone(opset: int) -> None:
    model = _dq_output_dtype_model(TensorProto.FLOAT16, opset)
    result = quantgraph.convert(model)
    assert result.report.converted == {}
    assert [s.node for s in result.report.skipped] == ["dq0"]
    differential(model, result.proto, [DQ_FEED])


# -- what the spec cannot express ---------------------------------------------------------------


UNSUPPORTED: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    "int32-bias": (lambda: dq_only(TensorProto.INT32, zero_point=False), "int32"),
    "int16": (lambda: dq_only(TensorProto.INT16), "int16"),
    "uint16": (lambda: dq_only(TensorProto.UINT16), "uint16"),
    "int2": (lambda: dq_only(TensorProto.INT2, opset=25), "int2"),
    "q-int16": (lambda: q_only(TensorProto.INT16), "int16"),
    "q-uint4": (lambda: q_only(TensorProto.UINT4), "quantized type u4"),
    "blocked-quantize": (
        lambda: quantize_linear_model(
            (TensorProto.FLOAT, [4, 6]),
            np.full((2, 6), 0.5, np.float32),
            helper.make_tensor("z", TensorProto.UINT8, [2, 6], [0] * 12),
            axis=0,
            block_size=2,
        ),
        "blocked QuantizeLinear",
    ),
    # ONNX lets the last block be short (4 rows in blocks of 3); oneDNN's groups tile exactly,
    # and a fed src cannot be padded ahead of time (a constant one is: NEWLY_CONVERTED).
    "blocked-partial-last-block-fed": (
        lambda: dequantize_linear_model(
            (TensorProto.INT8, [4, 6]),
            np.full((2, 6), 0.5, np.float32),
            helper.make_tensor("z", TensorProto.INT8, [2, 6], [0] * 12),
            axis=0,
            block_size=3,
        ),
        "is not 2 whole blocks (the spec's groups tile src exactly; a short last block is "
        "padded only in a constant src)",
    ),
    "float16-scale-quantize": (
        lambda: quantize_linear_model(
            (TensorProto.FLOAT16, [4, 6]),
            np.array(0.5, np.float16),
            helper.make_tensor("z", TensorProto.UINT8, [], [0]),
        ),
        "scale type f16 is not one of the spec's (f32)",
    ),
}


# Converted since the spec took oneDNN v3.13's DynamicDequantize rows (4-bit, per_group, f16).
NEWLY_CONVERTED: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    "int4": (lambda: dq_only(TensorProto.INT4), "s4, per_tensor"),
    "uint4": (lambda: dq_only(TensorProto.UINT4), "u4, per_tensor"),
    "blocked": (
        lambda: dq_only(
            TensorProto.INT8, scale=np.full((2, 6), 0.5, np.float32), axis=0, block_size=2
        ),
        "s8, per_group [2, 1]",
    ),
    "float16-scale": (
        lambda: dq_only(
            TensorProto.INT8, scale=np.array(0.5, np.float16), out_type=TensorProto.FLOAT16
        ),
        "s8, per_tensor, f16 scales",
    ),
    "blocked-short-last-block": (
        lambda: dq_only(
            TensorProto.INT8, scale=np.full((2, 6), 0.5, np.float32), axis=0, block_size=3
        ),
        "s8, per_group [3, 1], last block padded 4 -> 6 and sliced",
    ),
}


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", sorted(NEWLY_CONVERTED))
def test_oneDNN_v3_13_rows_convert_and_run_on_the_reference(name: str, static: bool) -> None:
    from onnx.reference import ReferenceEvaluator

    from quantgraph.reference.evaluator import REFERENCE_OPS

    build, detail = NEWLY_CONVERTED[name]
    model = build()
    result = quantgraph.convert(model, static=static)
    assert result.report.skipped == []
    (converted,) = result.report.converted_nodes
    assert (converted.new_op_type, converted.detail) == ("DynamicDequantize", detail)
    want = ort_session(model).run(None, {})
    got = ReferenceEvaluator(result.proto, new_ops=REFERENCE_OPS).run(None, {})
    assert isinstance(got, list)  # run returns a dict only for intermediate=True
    assert compare("y", np.asarray(want[0]), np.asarray(got[0])).agree


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_nodes_stay_and_are_reported(name: str) -> None:
    build, keyword = UNSUPPORTED[name]
    model = build()
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        assert result.report.converted == {}
        assert len(result.report.skipped) == 1
        skipped = result.report.skipped[0]
        assert skipped.node == model.graph.node[0].name
        assert skipped.op_type == model.graph.node[0].op_type
        assert keyword in skipped.reason
        assert skipped.to_dict()["reason"] == skipped.reason
        out = result.proto
        assert [serialize_node(n) for n in out.graph.node] == [
            serialize_node(n) for n in model.graph.node
        ]
        assert {t.name: t.SerializeToString() for t in out.graph.initializer} == {
            t.name: t.SerializeToString() for t in model.graph.initializer
        }
        assert DOMAIN not in opsets(out), "nothing converted: no custom domain import"
        onnx.checker.check_model(out, full_check=True)


@pytest.mark.parametrize("op", QDQ)
def test_contrib_qdq_stays_when_asked_and_is_reported(op: str) -> None:
    if op == "DequantizeLinear":
        model = dq_only(TensorProto.INT8, domain="com.microsoft")
    else:
        model = quantize_linear_model(
            (TensorProto.FLOAT, [4, 6]),
            np.array(0.5, np.float32),
            np.array(3, np.uint8),
            domain="com.microsoft",
        )
    result = quantgraph.convert(model, contrib=False)
    assert result.report.converted == {}
    assert [(s.node, s.op_type) for s in result.report.skipped] == [(model.graph.node[0].name, op)]
    assert "com.microsoft" in result.report.skipped[0].reason
    assert [serialize_node(n) for n in result.proto.graph.node] == [
        serialize_node(n) for n in model.graph.node
    ]


def _chain(pairs: int, *, runtime_scale: bool) -> onnx.ModelProto:
    """x -> (Q -> DQ) x pairs, every node reading one scalar scale (a graph input when
    ``runtime_scale``) and one scalar zero point: nodes alike, which the pass plans once."""
    nodes, previous = [], "x"
    for i in range(pairs):
        nodes += [
            helper.make_node("QuantizeLinear", [previous, "s", "z"], [f"q{i}"], name=f"q{i}"),
            helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"d{i}"),
        ]
        previous = f"d{i}"
    inputs = [tensor_info("x", TensorProto.FLOAT, [4])]
    inits = [numpy_helper.from_array(np.array(3, np.uint8), "z")]
    if runtime_scale:
        inputs.append(tensor_info("s", TensorProto.FLOAT, []))
    else:
        inits.append(numpy_helper.from_array(np.array(0.05, np.float32), "s"))
    outputs = [tensor_info(previous, TensorProto.FLOAT, [4])]
    return make_model(nodes, inputs, outputs, inits, opset=21)


@pytest.mark.parametrize("runtime_scale", [False, True], ids=["constant", "runtime"])
def test_nodes_alike_share_constants_and_keep_their_own_reshapes(runtime_scale: bool) -> None:
    model = _chain(4, runtime_scale=runtime_scale)
    out = quantgraph.convert(model).proto
    spec = [n for n in out.graph.node if n.domain == DOMAIN]
    assert [n.op_type for n in spec] == ["DynamicQuantize", "DynamicDequantize"] * 4
    assert len({n.input[2] for n in spec}) == 1  # one 1-D zero point for all
    reshapes = [n for n in out.graph.node if n.op_type == "Reshape"]
    if runtime_scale:  # a run-time scale is reshaped before each of its users
        assert len(reshapes) == 8
        assert sorted(n.input[1] for n in spec) == sorted(r.output[0] for r in reshapes)
    else:
        assert not reshapes and len({n.input[1] for n in spec}) == 1
    feeds = [{"x": np.linspace(-1, 1, 4, dtype=np.float32)}]
    if runtime_scale:
        feeds[0]["s"] = np.array(0.05, np.float32)
    differential(model, out, feeds)


def test_static_dequantize_alike_each_records_its_src_type() -> None:
    """Static Dequantize has no zps: each node's untyped src gets the quantized type."""
    nodes = []
    for i in range(3):
        nodes += [
            helper.make_node("Identity", ["xq"], [f"i{i}"], name=f"id{i}"),
            helper.make_node("DequantizeLinear", [f"i{i}", "s", "z"], [f"d{i}"], name=f"d{i}"),
        ]
    inputs = [tensor_info("xq", TensorProto.UINT8, [4])]
    outputs = [tensor_info(f"d{i}", TensorProto.FLOAT, [4]) for i in range(3)]
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zero_point = numpy_helper.from_array(np.array(3, np.uint8), "z")
    model = ir.from_proto(make_model(nodes, inputs, outputs, [scale, zero_point], opset=21))
    QdqToSpecPass(static=True)(model)
    dequantize = [n for n in model.graph if n.op_type == "Dequantize"]
    assert len(dequantize) == 3
    assert all(
        n.inputs[0] is not None and n.inputs[0].dtype == ir.DataType.UINT8 for n in dequantize
    )


# -- the pass itself, on an onnx_ir model -------------------------------------------------------


def test_the_pass_rewrites_in_place_and_imports_the_domain() -> None:
    model = ir.from_proto(Case(21, "s8", "axis", axis=1).model())
    report = RewriteReport()
    result = QdqToSpecPass(static=True, report=report)(model)
    assert isinstance(result, RewriteResult)
    assert result.model is model and result.report is report
    assert result.modified
    assert report.emitted == {"Dequantize": 1, "Quantize": 1}
    assert [n.detail for n in report.converted_nodes] == ["s8, axis 1", "s8, axis 1"]
    assert model.opset_imports[DOMAIN] == 1
    again = QdqToSpecPass(static=True, report=report)(model)
    assert not again.modified, "nothing is left to convert"
    assert len(report.converted_nodes) == 2


def test_a_model_with_nothing_converted_gets_no_domain_import() -> None:
    model = ir.from_proto(dq_only(TensorProto.INT16))
    result = QdqToSpecPass()(model)
    assert isinstance(result, RewriteResult)
    assert not result.modified
    assert [(s.node, s.op_type) for s in result.report.skipped] == [("dq0", "DequantizeLinear")]
    assert DOMAIN not in model.opset_imports
