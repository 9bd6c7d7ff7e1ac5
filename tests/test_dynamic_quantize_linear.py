"""DynamicQuantizeLinear -> standard ops + DynamicQuantize (issue 21 item 5).

Differential against onnxruntime's own DynamicQuantizeLinear kernel (ORT_DISABLE_ALL): every
output (y, y_scale, y_zero_point) bit for bit on finite inputs of every sign, magnitude and
size, all zeros included (onnxruntime's scale is then 1; ONNX's function body would divide by
zero); and on quantize_dynamic's models (ConvInteger, MatMulInteger consumers) on both backends.
Where the input holds infinities, or the range overflows float32 or is so small that range / 255
underflows to 0, the scale is not finite or is 0: onnxruntime quantizes with it anyway, the
spec's DynamicQuantize refuses it (rule scale-value), so the run fails with that error instead
of differing silently.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper

import quantgraph
from quantgraph.spec import DOMAIN
from tests.builders import BACKENDS, ort_session, requires_native, run_ort
from tests.producers import dynamic_quantized


def _single(opset: int = 13) -> onnx.ModelProto:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [
            helper.make_tensor_value_info("y", TensorProto.UINT8, ["n"]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("z", TensorProto.UINT8, []),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture(scope="module")
def converted() -> onnx.ModelProto:
    result = quantgraph.convert(_single())
    assert result.report.converted == {"DynamicQuantizeLinear": 1}
    (node,) = result.report.converted_nodes
    assert (node.node, node.new_op_type) == ("dql", "DynamicQuantize")
    return result.proto


def _assert_same(original: list[np.ndarray], got: list[np.ndarray]) -> None:
    for want, have in zip(original, got, strict=True):
        assert want.dtype == have.dtype and want.shape == have.shape
        assert want.tobytes() == np.asarray(have).tobytes()  # bit for bit


def test_the_node_becomes_its_function_body_and_a_dynamic_quantize(
    converted: onnx.ModelProto,
) -> None:
    ops = [(n.domain or "", n.op_type) for n in converted.graph.node]
    assert (DOMAIN, "DynamicQuantize") in ops and ("", "DynamicQuantizeLinear") not in ops
    assert {"ReduceMin", "ReduceMax", "Where", "Clip", "Round", "Cast"} <= {op for _, op in ops}
    # The scale and zero-point outputs keep their names (a consumer or graph output uses them).
    assert [o.name for o in converted.graph.output] == ["y", "s", "z"]
    onnx.checker.check_model(converted, full_check=True)


_LIMIT = float(np.float32(3e37))  # a range of twice this still fits float32
_FINITE = st.floats(-_LIMIT, _LIMIT, width=32, allow_nan=False, allow_infinity=False)


@requires_native
@settings(max_examples=300, deadline=None)
@given(
    x=hnp.arrays(np.float32, st.integers(1, 300), elements=_FINITE),
    shape=st.sampled_from(["any", "positive", "negative", "zeros", "quarters"]),
)
def test_identical_to_onnxruntimes_kernel_on_finite_inputs(
    converted: onnx.ModelProto, x: np.ndarray, shape: str
) -> None:
    x = {
        "any": x,
        "positive": np.abs(x),
        "negative": -np.abs(x),
        "zeros": np.zeros_like(x),
        "quarters": np.round(x % 1000 * 4) / 4,  # exact .5 ties after division
    }[shape].astype(np.float32)
    lo, hi = min(x.min(), np.float32(0)), max(x.max(), np.float32(0))
    assume(hi == lo or (hi - lo) / np.float32(255) > 0)  # an underflowing scale: see below
    want = _sessions(converted)[0].run(None, {"x": x})
    got = _sessions(converted)[1].run(None, {"x": x})
    _assert_same(want, got)


_SESSIONS: dict[int, tuple[object, quantgraph.InferenceSession]] = {}


def _sessions(converted: onnx.ModelProto) -> tuple[Any, quantgraph.InferenceSession]:
    """onnxruntime's kernel and the converted model on native, made once."""
    if id(converted) not in _SESSIONS:
        _SESSIONS[id(converted)] = (
            ort_session(_single()),
            quantgraph.InferenceSession(converted, "native"),
        )
    return _SESSIONS[id(converted)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_zeros_give_onnxruntimes_scale_of_one(backend: str, converted: onnx.ModelProto) -> None:
    x = {"x": np.zeros(5, np.float32)}
    got = quantgraph.InferenceSession(converted, backend).run(None, x)
    assert float(got[1]) == 1.0 == float(run_ort(_single(), x)[1])
    _assert_same(run_ort(_single(), x), got)


@requires_native
@pytest.mark.parametrize(
    "values",
    [[np.inf, 1.0], [-np.inf, 1.0], [3e38, -3e38], [np.nan, 1.0, 2.0], [1e-43, 0.0]],
    ids=["inf", "-inf", "range-overflows", "nan-first", "scale-underflows"],
)
def test_a_non_finite_scale_is_an_error_not_a_silent_difference(
    converted: onnx.ModelProto, values: list[float]
) -> None:
    x = {"x": np.array(values, np.float32)}
    run_ort(_single(), x)  # onnxruntime quantizes with an inf or 0 scale (or skips the NaN)
    session = quantgraph.InferenceSession(converted, "native")
    refused = r"DynamicQuantize node 'dql': scales\[0\] = (inf|nan|0\.0)"
    with pytest.raises(Exception, match=refused):
        session.run(None, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_dynamic_models_validate_within_the_integer_sums_bound(backend: str) -> None:
    """The integer ops are converted too (tests/test_dynamic_integer.py): float sums where the
    original sums in int32, so judged by the stated bound, not bit for bit."""
    original = dynamic_quantized()
    result = quantgraph.convert(original)
    assert result.report.converted == {
        "ConvInteger": 1,
        "DynamicQuantizeLinear": 2,
        "MatMulInteger": 1,
    }
    assert result.report.skipped == [] and result.report.other_quantized == []
    report = quantgraph.validate(original, result.proto, backend=backend, iterations=4)
    assert report.agree and not report.exact_expected, report.to_dict()


def test_below_opset_11_there_is_no_such_op() -> None:
    """DynamicQuantizeLinear came with opset 11; at 10 the model is left alone, with why."""
    model = _single(opset=10)
    result = quantgraph.convert(model, check=False)
    (skipped,) = result.report.skipped
    assert skipped.reason == "DynamicQuantizeLinear needs opset >= 11"


@cache
def _onnx_node_tests() -> list[tuple[str, onnx.ModelProto, list[Any], list[Any]]]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # other ops' generators overflow on purpose
        every = collect_testcases(None)
    found = []
    for test in every:
        name = test.name
        if test.model is not None and name.startswith("test_dynamicquantizelinear"):  # noqa: SIM102
            if not name.endswith("_expanded"):  # the expanded body is ONNX's own ops
                assert test.data_sets is not None  # ONNX node tests carry their data
                inputs, outputs = test.data_sets[0]
                found.append((name, test.model, list(inputs), list(outputs)))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_onnxs_own_node_tests_pass(backend: str) -> None:
    """ONNX's DynamicQuantizeLinear backend tests (plain, max_adjusted, min_adjusted)."""
    cases = _onnx_node_tests()
    assert len(cases) == 3
    for _name, model, inputs, outputs in cases:
        converted = quantgraph.convert(model).proto
        feeds = {i.name: v for i, v in zip(model.graph.input, inputs, strict=True)}
        got = quantgraph.InferenceSession(converted, backend).run(None, feeds)
        _assert_same([np.asarray(o) for o in outputs], [np.asarray(g) for g in got])


def test_lower_gives_quantize_dynamics_model_back() -> None:
    original = dynamic_quantized()
    lowered = quantgraph.lower(quantgraph.convert(original).proto)
    assert lowered.report.converted == {"Conv": 1, "DynamicQuantize": 2, "MatMul": 1}
    assert {n.new_op_type for n in lowered.report.converted_nodes} == {
        "ConvInteger",
        "DynamicQuantizeLinear",
        "MatMulInteger",
    }
    back = lowered.proto
    assert [n.SerializeToString() for n in back.graph.node] == [
        n.SerializeToString() for n in original.graph.node
    ]
    assert sorted(t.name for t in back.graph.initializer) == sorted(
        t.name for t in original.graph.initializer
    )
    x = {"x": np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    assert np.array_equal(run_ort(back, x)[0], run_ort(original, x)[0])


def test_an_expansion_edited_since_conversion_is_lowered_as_it_is(
    converted: onnx.ModelProto,
) -> None:
    """A node that now also reads the expansion's max: the DynamicQuantizeLinear cannot come
    back without losing it, so the DynamicQuantize becomes a QuantizeLinear and the standard
    ops stay."""
    edited = onnx.ModelProto()
    edited.CopyFrom(converted)
    top = next(n.output[0] for n in edited.graph.node if n.op_type == "Max")
    edited.graph.node.append(helper.make_node("Identity", [top], ["hi"], name="mine"))
    edited.graph.output.append(helper.make_tensor_value_info("hi", TensorProto.FLOAT, []))
    lowered = quantgraph.lower(edited).proto
    ops = [n.op_type for n in lowered.graph.node]
    assert "DynamicQuantizeLinear" not in ops and "QuantizeLinear" in ops and "Max" in ops
    x = {"x": np.array([-1.0, 0.5, 2.0], np.float32)}
    _assert_same(run_ort(_single(), x), run_ort(lowered, x)[:3])
