"""QdqToSpecPass (ONNX Q/DQ -> the spec ops) through quantgraph.convert on hand-built graphs.

Every variant of ONNX QuantizeLinear/DequantizeLinear the issue names is built here, converted
(dynamic and static), checked structurally, and run differentially: the original in
onnxruntime at ORT_DISABLE_ALL against the converted model on the Python backend. At the end,
the pass itself on onnx_ir models.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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
from quantgraph.compare import compare
from quantgraph.errors import BackendError
from quantgraph.passes import QdqToSpecPass, RewriteReport, RewriteResult
from tests.builders import (
    BACKENDS,
    all_nodes,
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
    requires_native,
    serialize,
    serialize_node,
    serialize_vi,
    tensor_info,
)

OPSETS = (10, 13, 19, 21, 23, 25)
SHAPE = (2, 3, 4)
QUANT = {"u8": (TensorProto.UINT8, np.uint8), "s8": (TensorProto.INT8, np.int8)}
CHANNEL_SCALES = np.array([0.5, 0.1, 0.0625, 3.0], np.float32)
CHANNEL_ZPS = {"u8": [128, 3, 250, 0], "s8": [-3, 0, 100, -128]}
TENSOR_SCALE = np.float32(0.5)
TENSOR_ZP = {"u8": 3, "s8": -3}
QDQ = ("QuantizeLinear", "DequantizeLinear")


# -- building models ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One QuantizeLinear -> DequantizeLinear pair: x -> Q -> q -> DQ -> y (q and y outputs)."""

    opset: int
    quant: str  # "u8" | "s8"
    scale: str  # "scalar" | "one" (1-D, one element) | "axis" | "runtime" (scalar graph input)
    axis: int | None = None
    zero_point: bool = True
    output_dtype: bool = False  # QuantizeLinear-21 output_dtype instead of a zero point

    @property
    def id(self) -> str:
        parts = [f"opset{self.opset}", self.quant, self.scale]
        if self.axis is not None:
            parts.append(f"axis{self.axis}")
        if not self.zero_point:
            parts.append("nozp")
        if self.output_dtype:
            parts.append("output_dtype")
        return "-".join(parts)

    @property
    def elem(self) -> int:
        return QUANT[self.quant][0]

    @property
    def np_type(self) -> type[np.integer]:
        return QUANT[self.quant][1]

    @property
    def count(self) -> int:
        return SHAPE[self.axis] if self.scale == "axis" and self.axis is not None else 1

    @property
    def per_channel(self) -> bool:
        return self.scale == "axis"

    def scales(self) -> np.ndarray:
        if self.per_channel:
            return CHANNEL_SCALES[: self.count].copy()
        if self.scale == "one":
            return np.array([TENSOR_SCALE], np.float32)
        return np.array(TENSOR_SCALE, np.float32)

    def zps(self) -> np.ndarray:
        if self.per_channel:
            return np.array(CHANNEL_ZPS[self.quant][: self.count], self.np_type)
        if self.scale == "one":
            return np.array([TENSOR_ZP[self.quant]], self.np_type)
        return np.array(TENSOR_ZP[self.quant], self.np_type)

    def model(self) -> onnx.ModelProto:
        names = ["x", "s"] + (["z"] if self.zero_point else [])
        attrs: dict[str, int] = {} if self.axis is None else {"axis": self.axis}
        q_attrs = dict(attrs)
        if self.output_dtype:
            q_attrs["output_dtype"] = self.elem
        nodes = [
            helper.make_node("QuantizeLinear", names, ["q"], name="q0", **q_attrs),
            helper.make_node("DequantizeLinear", ["q", *names[1:]], ["y"], name="dq0", **attrs),
        ]
        inputs = [tensor_info("x", TensorProto.FLOAT, SHAPE)]
        initializers = []
        if self.scale == "runtime":
            inputs.append(tensor_info("s", TensorProto.FLOAT, []))
            if self.zero_point:
                inputs.append(tensor_info("z", self.elem, []))
        else:
            initializers.append(numpy_helper.from_array(self.scales(), "s"))
            if self.zero_point:
                initializers.append(numpy_helper.from_array(self.zps(), "z"))
        outputs = [tensor_info("q", self.elem, SHAPE), tensor_info("y", TensorProto.FLOAT, SHAPE)]
        return make_model(nodes, inputs, outputs, initializers, opset=self.opset)

    def feeds(self, seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """Inputs with exact .5 ties, saturation, specials, and plain random values."""
        rng = np.random.default_rng(seed)
        runtime = [(TENSOR_SCALE, TENSOR_ZP[self.quant]), (np.float32(0.1), 7)]
        for scale, zp in runtime if self.scale == "runtime" else [(None, None)]:
            if scale is None:
                scales, zps = self.scales(), self.zps()
            else:
                scales, zps = np.array(scale, np.float32), np.array(zp, self.np_type)
            shape = [1] * len(SHAPE)
            if self.per_channel:
                assert self.axis is not None
                shape[self.axis] = -1
            s_b = scales.reshape(shape).astype(np.float32)
            z_b = zps.reshape(shape).astype(np.int64) if self.zero_point else np.int64(0)
            info = np.iinfo(self.np_type)
            ties = (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * s_b
            edges = np.stack(
                [
                    (info.max - z_b + 0.5) * s_b,  # tie right at the top of the range
                    (info.min - z_b - 0.5) * s_b,
                    (info.max - z_b) * s_b,
                    (info.min - z_b) * s_b,
                ]
            )
            edge = np.take_along_axis(
                np.broadcast_to(edges, (4, *SHAPE)), rng.integers(0, 4, (1, *SHAPE)), 0
            )[0].astype(np.float32)
            specials = np.resize(
                np.array(
                    [np.inf, -np.inf, np.nan, 1e30, -1e30, 0.0, -0.0, 1e-30, 3e38, -3e38],
                    np.float32,
                ),
                SHAPE,
            )
            plain = (rng.standard_normal(SHAPE) * 40).astype(np.float32)
            for x in (ties, edge, specials, plain):
                feed = {"x": np.ascontiguousarray(x, np.float32)}
                if self.scale == "runtime":
                    feed["s"] = np.array(scales, np.float32)
                    if self.zero_point:
                        feed["z"] = np.array(zps, self.np_type)
                yield feed


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
    feeds = [
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
            assert (zero.dtype, zero.tolist()) == (np.uint8, [0])
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
    attrs = {"axis": 1} if per_channel else {}
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
    feed = {"x": x.astype(np.float32), "s": scales, "z": np.array(zp, np_type)}
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


DQ_FEED = {"x": np.arange(0, 255, 43, np.uint8).reshape(2, 3)}


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


# -- float8 -------------------------------------------------------------------------------------

FLOAT8 = {
    "e4m3fn": TensorProto.FLOAT8E4M3FN,
    "e5m2": TensorProto.FLOAT8E5M2,
}


def _f8_dq_model(elem: int, opset: int, zero_point: bool, *, typed: bool = True) -> onnx.ModelProto:
    """xf -> Cast(f8) -> x8 -> DequantizeLinear -> y (onnxruntime's Python API has no f8 feeds)."""
    names = ["x8", "s"] + (["z"] if zero_point else [])
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    if zero_point:
        inits.append(helper.make_tensor("z", elem, [], [0.0]))
    model = make_model(
        [
            helper.make_node("Cast", ["xf"], ["x8"], name="to_f8", to=elem),
            helper.make_node("DequantizeLinear", names, ["y"], name="dq0"),
        ],
        [tensor_info("xf", TensorProto.FLOAT, [4, 8])],
        [tensor_info("y", TensorProto.FLOAT, [4, 8])],
        inits,
        opset=opset,
    )
    if typed:
        model.graph.value_info.append(tensor_info("x8", elem, [4, 8]))
    return model


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
    model = _f8_dq_model(FLOAT8[f8], opset, zero_point)
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

    from quantgraph.evaluator import REFERENCE_OPS

    for model, quantize in (
        (_f8_dq_model(FLOAT8[f8], 21, True), False),
        (_f8_q_model(FLOAT8[f8], 21), True),
    ):
        converted = quantgraph.convert(model).proto
        reference = ort_session(model)
        evaluator = ReferenceEvaluator(converted, new_ops=REFERENCE_OPS)
        for feed in _f8_feeds(quantize):
            assert_identical(reference.run(None, feed), evaluator.run(None, feed), f8)


@pytest.mark.parametrize("backend", [pytest.param("native", marks=requires_native)])
@pytest.mark.parametrize("f8", sorted(FLOAT8))
def test_float8_semantics_native(f8: str, backend: str) -> None:
    for model, quantize in (
        (_f8_dq_model(FLOAT8[f8], 21, True), False),
        (_f8_q_model(FLOAT8[f8], 21), True),
    ):
        differential(model, quantgraph.convert(model).proto, _f8_feeds(quantize), backend)


@pytest.mark.parametrize("kind", ["u8-identity", "f8-cast"])
def test_dequantize_without_zero_point_on_untyped_intermediate(kind: str) -> None:
    if kind == "f8-cast":
        model = _f8_dq_model(TensorProto.FLOAT8E4M3FN, 21, False, typed=False)
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
    converted = quantgraph.convert(_f8_dq_model(FLOAT8["e4m3fn"], 21, False)).proto
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


# -- what the spec cannot express ---------------------------------------------------------------


def _dq_only(
    elem: int,
    *,
    opset: int = 21,
    scale: np.ndarray | None = None,
    zero_point: bool = True,
    domain: str = "",
    out_type: int = TensorProto.FLOAT,
    **attrs: int,
) -> onnx.ModelProto:
    """A constant of ``elem`` (the type under test) dequantized."""
    scale = np.array(0.5, np.float32) if scale is None else scale
    zp = helper.make_tensor("z", elem, list(scale.shape), [0] * scale.size) if zero_point else None
    return dequantize_linear_model(
        helper.make_tensor("w", elem, [4, 6], [1] * 24),
        scale,
        zp,
        y_type=out_type,
        domain=domain,
        opset=opset,
        **attrs,
    )


def _q_only(elem: int, *, opset: int = 21, **attrs: int) -> onnx.ModelProto:
    """x quantized to ``elem`` (the type under test)."""
    return quantize_linear_model(
        (TensorProto.FLOAT, [4, 6]),
        np.array(0.5, np.float32),
        helper.make_tensor("z", elem, [], [0]),
        opset=opset,
        **attrs,
    )


UNSUPPORTED = {
    "int32-bias": (lambda: _dq_only(TensorProto.INT32, zero_point=False), "int32"),
    "int16": (lambda: _dq_only(TensorProto.INT16), "int16"),
    "uint16": (lambda: _dq_only(TensorProto.UINT16), "uint16"),
    "int2": (lambda: _dq_only(TensorProto.INT2, opset=25), "int2"),
    "q-int16": (lambda: _q_only(TensorProto.INT16), "int16"),
    "q-uint4": (lambda: _q_only(TensorProto.UINT4), "quantized type u4"),
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
NEWLY_CONVERTED = {
    "int4": (lambda: _dq_only(TensorProto.INT4), "s4, per_tensor"),
    "uint4": (lambda: _dq_only(TensorProto.UINT4), "u4, per_tensor"),
    "blocked": (
        lambda: _dq_only(
            TensorProto.INT8, scale=np.full((2, 6), 0.5, np.float32), axis=0, block_size=2
        ),
        "s8, per_group [2, 1]",
    ),
    "float16-scale": (
        lambda: _dq_only(
            TensorProto.INT8, scale=np.array(0.5, np.float16), out_type=TensorProto.FLOAT16
        ),
        "s8, per_tensor, f16 scales",
    ),
    "blocked-short-last-block": (
        lambda: _dq_only(
            TensorProto.INT8, scale=np.full((2, 6), 0.5, np.float32), axis=0, block_size=3
        ),
        "s8, per_group [3, 1], last block padded 4 -> 6 and sliced",
    ),
}


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", sorted(NEWLY_CONVERTED))
def test_oneDNN_v3_13_rows_convert_and_run_on_the_reference(name: str, static: bool) -> None:
    from onnx.reference import ReferenceEvaluator

    from quantgraph.evaluator import REFERENCE_OPS

    build, detail = NEWLY_CONVERTED[name]
    model = build()
    result = quantgraph.convert(model, static=static)
    assert result.report.skipped == []
    (converted,) = result.report.converted_nodes
    assert (converted.new_op_type, converted.detail) == ("DynamicDequantize", detail)
    want = ort_session(model).run(None, {})
    got = ReferenceEvaluator(result.proto, new_ops=REFERENCE_OPS).run(None, {})
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
        model = _dq_only(TensorProto.INT8, domain="com.microsoft")
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


# -- subgraphs and functions --------------------------------------------------------------------


def _qdq_nodes(prefix: str, source: str, scale: str, zp: str, out: str, **attrs: int) -> list:
    return [
        helper.make_node(
            "QuantizeLinear", [source, scale, zp], [f"{prefix}_q"], name=f"{prefix}_Q", **attrs
        ),
        helper.make_node(
            "DequantizeLinear", [f"{prefix}_q", scale, zp], [out], name=f"{prefix}_DQ", **attrs
        ),
    ]


def _if_model() -> onnx.ModelProto:
    """If(cond): then = Q/DQ with branch-local scalars and a nested If; else = per-axis Q/DQ
    whose scale and zero point live in the outer graph."""
    inner_then = helper.make_graph(
        [
            helper.make_node(
                "Constant",
                [],
                ["in_s"],
                name="c_in_s",
                value=numpy_helper.from_array(np.array(0.25, np.float32)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["in_z"],
                name="c_in_z",
                value=numpy_helper.from_array(np.array(-5, np.int8)),
            ),
            *_qdq_nodes("inner", "x", "in_s", "in_z", "inner_out"),
        ],
        "inner_then",
        [],
        [tensor_info("inner_out", TensorProto.FLOAT, SHAPE)],
    )
    inner_else = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["inner_else_out"], name="inner_id")],
        "inner_else",
        [],
        [tensor_info("inner_else_out", TensorProto.FLOAT, SHAPE)],
    )
    then_branch = helper.make_graph(
        [
            *_qdq_nodes("then", "x", "then_s", "then_z", "then_mid"),
            helper.make_node(
                "If",
                ["cond2"],
                ["then_inner"],
                name="inner_if",
                then_branch=inner_then,
                else_branch=inner_else,
            ),
            helper.make_node("Add", ["then_mid", "then_inner"], ["then_out"], name="then_add"),
        ],
        "then",
        [],
        [tensor_info("then_out", TensorProto.FLOAT, SHAPE)],
        initializer=[
            numpy_helper.from_array(np.array(0.125, np.float32), "then_s"),
            numpy_helper.from_array(np.array(100, np.uint8), "then_z"),
        ],
    )
    else_branch = helper.make_graph(
        _qdq_nodes("else", "x", "outer_s", "outer_z", "else_out", axis=1),
        "else",
        [],
        [tensor_info("else_out", TensorProto.FLOAT, SHAPE)],
    )
    return make_model(
        [
            helper.make_node(
                "If",
                ["cond"],
                ["y"],
                name="branch",
                then_branch=then_branch,
                else_branch=else_branch,
            )
        ],
        [
            tensor_info("x", TensorProto.FLOAT, SHAPE),
            tensor_info("cond", TensorProto.BOOL, []),
            tensor_info("cond2", TensorProto.BOOL, []),
        ],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        [
            numpy_helper.from_array(np.array([0.5, 0.1, 2.0], np.float32), "outer_s"),
            numpy_helper.from_array(np.array([0, 7, -128], np.int8), "outer_z"),
        ],
        opset=21,
    )


def _branch_feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    feeds = []
    for cond in (True, False):
        for cond2 in (True, False):
            x = (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * np.float32(0.125)
            feeds.append({"x": x, "cond": np.array(cond), "cond2": np.array(cond2)})
            feeds.append(
                {
                    "x": (rng.standard_normal(SHAPE) * 30).astype(np.float32),
                    "cond": np.array(cond),
                    "cond2": np.array(cond2),
                }
            )
    return feeds


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_qdq_inside_if_branches(static: bool, backend: str) -> None:
    model = _if_model()
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)
    assert result.report.converted == {"DequantizeLinear": 3, "QuantizeLinear": 3}
    assert result.report.skipped == []
    assert {n.graph for n in result.report.converted_nodes} == {"then", "else", "inner_then"}
    assert not [n for n in all_nodes(out) if n.op_type in QDQ and n.domain in ("", "ai.onnx")]
    names = {n.name for n in all_nodes(out) if n.domain == DOMAIN}
    assert names == {f"{p}_{k}" for p in ("then", "else", "inner") for k in ("Q", "DQ")}
    differential(model, out, _branch_feeds(), backend)


def _function_model(*, typed: bool) -> onnx.ModelProto:
    function = helper.make_function(
        "local",
        "QDQ",
        ["fx"],
        ["fy"],
        [
            helper.make_node(
                "Constant",
                [],
                ["fs"],
                name="c_fs",
                value=numpy_helper.from_array(np.array(0.25, np.float32)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["fz"],
                name="c_fz",
                value=numpy_helper.from_array(np.array([3, 200, 0], np.uint8)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["fs3"],
                name="c_fs3",
                value=numpy_helper.from_array(np.array([0.25, 0.5, 0.1], np.float32)),
            ),
            helper.make_node("QuantizeLinear", ["fx", "fs3", "fz"], ["fq"], name="f_Q", axis=1),
            helper.make_node("DequantizeLinear", ["fq", "fs3", "fz"], ["fd"], name="f_DQ", axis=1),
            helper.make_node("QuantizeLinear", ["fd", "fs"], ["fq2"], name="f_Q2"),
            helper.make_node("DequantizeLinear", ["fq2", "fs"], ["fy"], name="f_DQ2"),
        ],
        opset_imports=[helper.make_opsetid("", 21)],
    )
    if typed:
        function.value_info.extend(
            [
                tensor_info("fs", TensorProto.FLOAT, []),
                tensor_info("fs3", TensorProto.FLOAT, [3]),
                tensor_info("fz", TensorProto.UINT8, [3]),
            ]
        )
    return make_model(
        [helper.make_node("QDQ", ["x"], ["y"], domain="local", name="call")],
        [tensor_info("x", TensorProto.FLOAT, SHAPE)],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        opset=21,
        domains={"local": 1},
        functions=[function],
    )


def _check_function_converted(
    model: onnx.ModelProto, static: bool, backend: str = "python"
) -> None:
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)
    assert result.report.converted == {"DequantizeLinear": 2, "QuantizeLinear": 2}
    assert {n.graph for n in result.report.converted_nodes} == {"QDQ"}
    (function,) = out.functions
    assert {(o.domain, o.version) for o in function.opset_import} >= {(DOMAIN, 1)}
    assert DOMAIN in opsets(out)
    ops = {n.name: (n.domain, n.op_type) for n in function.node}
    static_prefix = "" if static else "Dynamic"
    assert ops["f_Q"] == (DOMAIN, f"{static_prefix}Quantize")
    assert ops["f_DQ2"] == (DOMAIN, f"{static_prefix}Dequantize")
    assert not [n for n in function.node if n.op_type in QDQ]
    assert [n.name for n in out.graph.node] == ["call"]
    rng = np.random.default_rng(8)
    feeds = [
        {"x": (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * np.float32(0.25)},
        {"x": (rng.standard_normal(SHAPE) * 60).astype(np.float32)},
    ]
    differential(model, out, feeds, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_qdq_inside_model_local_function(static: bool, backend: str) -> None:
    _check_function_converted(_function_model(typed=True), static, backend)


@pytest.mark.parametrize(
    "static",
    [
        pytest.param(False, id="dynamic"),
        pytest.param(True, id="static"),
    ],
)
def test_qdq_inside_function_with_untyped_constant_scales(static: bool) -> None:
    _check_function_converted(_function_model(typed=False), static)


@requires_native
def test_qdq_inside_function_with_untyped_constant_scales_native() -> None:
    _check_function_converted(_function_model(typed=False), False, "native")


def test_constant_node_scales_in_main_graph() -> None:
    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["cs"],
            name="c_s",
            value=numpy_helper.from_array(np.array(0.25, np.float32)),
        ),
        helper.make_node(
            "Constant", [], ["cz"], name="c_z", value=numpy_helper.from_array(np.array(-3, np.int8))
        ),
        *_qdq_nodes("m", "x", "cs", "cz", "y"),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, SHAPE)],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
    )
    for static in (False, True):
        result = quantgraph.convert(model, static=static)
        assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
        differential(model, result.proto, Case(21, "s8", "scalar").feeds())


# -- preservation, idempotence, inputs untouched ------------------------------------------------


def _rich_model() -> onnx.ModelProto:
    x = tensor_info("x", TensorProto.FLOAT, [2, 3])
    x.doc_string = "the input"
    y = tensor_info("y", TensorProto.FLOAT, [2, 3])
    y.doc_string = "the output"
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", doc_string="q doc"),
        helper.make_node(
            "DequantizeLinear", ["q", "s", "z"], ["d"], name="dq0", doc_string="dq doc"
        ),
        helper.make_node("Mul", ["d", "s"], ["m"], name="mul0", doc_string="mul doc"),
        helper.make_node("Add", ["m", "bias"], ["y"], name="add0"),
        helper.make_node("DequantizeLinear", ["b32", "bs"], ["b"], name="bias_dq", axis=0),
        helper.make_node("Identity", ["b"], ["b_out"], name="id0"),
    ]
    model = make_model(
        nodes,
        [x],
        [y, tensor_info("b_out", TensorProto.FLOAT, [3])],
        [
            numpy_helper.from_array(np.array(0.25, np.float32), "s"),
            numpy_helper.from_array(np.array(3, np.uint8), "z"),
            numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias"),
            numpy_helper.from_array(np.array([1, -2, 3], np.int32), "b32"),
            numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "bs"),
        ],
        opset=19,
    )
    model.graph.value_info.extend(
        [
            tensor_info("q", TensorProto.UINT8, [2, 3]),
            tensor_info("d", TensorProto.FLOAT, [2, 3]),
            tensor_info("m", TensorProto.FLOAT, [2, 3]),
        ]
    )
    model.graph.value_info[0].doc_string = "quantized"
    model.producer_name = "hand-built"
    model.producer_version = "9.9"
    model.doc_string = "model doc"
    model.graph.doc_string = "graph doc"
    model.domain = "org.example"
    model.model_version = 7
    helper.set_model_props(model, {"author": "tests", "purpose": "preservation"})
    model.graph.node[0].metadata_props.add(key="origin", value="q0 meta")
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_everything_else_is_preserved(static: bool) -> None:
    model = _rich_model()
    result = quantgraph.convert(model, static=static)
    out = result.proto
    onnx.checker.check_model(out, full_check=True)

    assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert [(s.node, s.op_type) for s in result.report.skipped] == [("bias_dq", "DequantizeLinear")]
    assert "int32" in result.report.skipped[0].reason

    # Node names, order and output names.
    assert [n.name for n in out.graph.node] == [n.name for n in model.graph.node]
    for before, after in zip(model.graph.node, out.graph.node, strict=True):
        assert list(after.output) == list(before.output)
        assert after.doc_string == before.doc_string
        assert list(after.metadata_props) == list(before.metadata_props)
        if before.op_type not in QDQ or before.name == "bias_dq":
            assert serialize_node(after) == serialize_node(before)
    # Initializers the rewrite did not consume stay byte for byte (s is still used by Mul).
    before_inits = {t.name: t.SerializeToString() for t in model.graph.initializer}
    after_inits = {t.name: t.SerializeToString() for t in out.graph.initializer}
    for name in ("s", "bias", "b32", "bs"):
        assert after_inits[name] == before_inits[name]
    # value_info of the original graph is still there, unchanged.
    after_vi = {v.name: serialize_vi(v) for v in out.graph.value_info}
    for value in model.graph.value_info:
        assert after_vi.get(value.name) == serialize_vi(value), value.name
    # Graph interface, model metadata, opsets.
    assert [serialize_vi(v) for v in out.graph.input] == [
        serialize_vi(v) for v in model.graph.input
    ]
    assert [serialize_vi(v) for v in out.graph.output] == [
        serialize_vi(v) for v in model.graph.output
    ]
    assert {p.key: p.value for p in out.metadata_props} == {
        "author": "tests",
        "purpose": "preservation",
    }
    assert (out.producer_name, out.producer_version) == ("hand-built", "9.9")
    assert (out.doc_string, out.graph.doc_string) == ("model doc", "graph doc")
    assert (out.domain, out.model_version, out.ir_version) == ("org.example", 7, model.ir_version)
    assert out.graph.name == model.graph.name
    assert opsets(out) == {"": 19, DOMAIN: 1}

    feed = {"x": np.array([[-1.0, 0.125, 0.375], [10.0, 63.0, 64.5]], np.float32)}
    differential(model, out, [feed])


IDEMPOTENCE_MODELS = {
    "pair": lambda: Case(21, "s8", "axis", axis=-1).model(),
    "runtime": lambda: Case(13, "u8", "runtime").model(),
    "rich": _rich_model,
    "if": _if_model,
    "function": lambda: _function_model(typed=True),
    "float8": lambda: _f8_dq_model(TensorProto.FLOAT8E5M2, 21, True),
    "int4": lambda: _dq_only(TensorProto.INT4),
}


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("name", sorted(IDEMPOTENCE_MODELS))
def test_convert_is_idempotent_and_deterministic(name: str, static: bool) -> None:
    model = IDEMPOTENCE_MODELS[name]()
    first = quantgraph.convert(model, static=static)
    again = quantgraph.convert(model, static=static)
    assert serialize(first.proto) == serialize(again.proto), "converting twice differs"
    assert first.report.to_dict() == again.report.to_dict()
    second = quantgraph.convert(first.proto, static=static)
    assert second.report.converted == {}
    assert [(s.node, s.reason) for s in second.report.skipped] == [
        (s.node, s.reason) for s in first.report.skipped
    ]
    assert serialize(second.proto) == serialize(first.proto), "converting a converted model"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_inputs_are_not_modified(tmp_path: Path, static: bool) -> None:
    model = _rich_model()
    path = tmp_path / "model.onnx"
    path.write_bytes(serialize(model))
    digest, stat = _sha256(path), path.stat()
    from_path = quantgraph.convert(path, static=static)
    from_str = quantgraph.convert(str(path), static=static)
    assert _sha256(path) == digest
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert serialize(from_path.proto) == serialize(from_str.proto)

    before = serialize(model)
    from_proto = quantgraph.convert(model, static=static)
    assert serialize(model) == before, "the ModelProto argument was changed"
    assert serialize(from_proto.proto) == serialize(from_path.proto)

    from_bytes = quantgraph.convert(before, static=static)
    assert serialize(from_bytes.proto) == serialize(from_path.proto)

    ir_model = ir.from_proto(model)
    ir_before = serialize(ir.to_proto(ir_model))
    quantgraph.convert(ir_model, static=static)
    assert serialize(ir.to_proto(ir_model)) == ir_before, "the ir.Model argument was changed"


def test_contrib_qdq_converts_by_default_and_agrees() -> None:
    """com.microsoft Q/DQ compute like ONNX's for u8/s8 with f32 scales (issue: converted where
    the spec covers them); the rewrite must agree with onnxruntime's contrib kernels."""
    nodes = [
        helper.make_node(
            "QuantizeLinear", ["x", "s", "z"], ["q"], name="q0", domain="com.microsoft"
        ),
        helper.make_node(
            "DequantizeLinear", ["q", "s", "z"], ["y"], name="dq0", domain="com.microsoft"
        ),
    ]
    model = make_model(
        nodes,
        [tensor_info("x", TensorProto.FLOAT, [4, 6])],
        [tensor_info("y", TensorProto.FLOAT, [4, 6])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "s"),
            numpy_helper.from_array(np.array(3, np.uint8), "z"),
        ],
        domains={"com.microsoft": 1},
    )
    result = quantgraph.convert(model)
    assert result.report.converted == {"DequantizeLinear": 1, "QuantizeLinear": 1}
    assert all("com.microsoft" in n.detail for n in result.report.converted_nodes)
    report = quantgraph.validate(model, result.proto, backend="python")
    assert report.agree


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
    model = ir.from_proto(_dq_only(TensorProto.INT16))
    result = QdqToSpecPass()(model)
    assert isinstance(result, RewriteResult)
    assert not result.modified
    assert [(s.node, s.op_type) for s in result.report.skipped] == [("dq0", "DequantizeLinear")]
    assert DOMAIN not in model.opset_imports


# -- computed scales: the converter infers what it needs ------------------------------------------

EXPANDED_CASES = (
    "test_dynamicquantizelinear_expanded",
    "test_dynamicquantizelinear_max_adjusted_expanded",
    "test_dynamicquantizelinear_min_adjusted_expanded",
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", EXPANDED_CASES)
def test_computed_scales_convert_from_the_model_as_shipped(name: str, backend: str) -> None:
    """ONNX's expanded DynamicQuantizeLinear computes its scale and zero point at run time and
    declares neither's shape: the converter infers them itself (on a copy) and leaves the
    model's own value_info as it was."""
    from tools.conformance import MAX_ORT_OPSET, collect_cases

    (case,) = [c for c in collect_cases() if c.name == name]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for opset in model.opset_import:
        if opset.domain == "":
            opset.version = min(opset.version, MAX_ORT_OPSET)
    declared = {v.name: v.SerializeToString() for v in model.graph.value_info}
    result = quantgraph.convert(model)
    assert result.report.skipped == []
    assert result.report.converted == {"QuantizeLinear": 1}
    after = {v.name: v.SerializeToString() for v in result.proto.graph.value_info}
    assert {k: after[k] for k in declared} == declared
    added = set(after) - set(declared)  # only what the rewrite made: a Reshape to [1]
    assert all(n.endswith("_1d") or n.startswith("quantgraph_shape_") for n in added), added
    feeds = {v.name: np.asarray(d) for v, d in zip(model.graph.input, case.inputs, strict=True)}
    outputs = quantgraph.InferenceSession(result.proto, backend).run(None, feeds)
    for got, want in zip(outputs, case.outputs, strict=True):
        assert compare("y", np.asarray(want), np.asarray(got)).agree
