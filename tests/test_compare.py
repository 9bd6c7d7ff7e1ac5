"""quantgraph.reference.compare: the one equality rule of validation, conformance and the fuzzer."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper

import quantgraph
from quantgraph.backends import native_available
from quantgraph.reference.compare import compare, mismatch_mask, typed

F8 = ml_dtypes.float8_e4m3fn


def test_float8_values_that_differ_are_counted() -> None:
    """The case the old integer branch reported as equal: 0.5 vs 0.75 in float8e4m3fn."""
    result = compare("y", np.array([0.5, 1], F8), np.array([0.75, 1], F8))
    assert (result.mismatches, result.first_mismatch) == (1, 0)
    assert result.dtype == "float8_e4m3fn"
    assert result.max_abs_diff == 0.25  # in the type's own units, not bit patterns
    assert result.max_ulp_diff == 4
    assert not result.agree


def test_float8_as_onnxruntime_hands_it_over() -> None:
    """onnxruntime's Python API returns float8 outputs as uint8 bit patterns."""
    want, got = np.array([0.5, 1], F8), np.array([0.75, 1], F8)
    raw = compare("y", want.view(np.uint8), got.view(np.uint8), TensorProto.FLOAT8E4M3FN)
    assert raw == compare("y", want, got)
    mixed = compare("y", want, got.view(np.uint8), TensorProto.FLOAT8E4M3FN)
    assert mixed == compare("y", want, got)
    assert typed(got.view(np.uint8), TensorProto.FLOAT8E4M3FN).dtype == np.dtype(F8)


def test_nan_equals_nan_whatever_the_payload_and_signed_zeros_differ() -> None:
    quiet = np.array([np.nan], np.float32)
    payload = np.array([0x7FC00001], np.uint32).view(np.float32)
    negative = -quiet
    assert compare("y", quiet, payload).agree and compare("y", quiet, negative).agree
    zeros = compare("y", np.array([0.0], np.float32), np.array([-0.0], np.float32))
    assert (zeros.mismatches, zeros.max_abs_diff, zeros.max_ulp_diff) == (1, 0.0, 0)
    nan_vs_number = compare("y", np.array([1.0], np.float32), quiet)
    assert nan_vs_number.mismatches == 1 and nan_vs_number.max_abs_diff == float("inf")


def test_integers_by_value_and_shapes_or_types_that_differ() -> None:
    ints = compare("q", np.array([1, -128], np.int8), np.array([1, 127], np.int8))
    assert (ints.dtype, ints.mismatches, ints.max_abs_diff, ints.max_ulp_diff) == (
        "int8",
        1,
        255.0,
        255,
    )
    shape = compare("q", np.zeros((2, 3), np.uint8), np.zeros((3, 2), np.uint8))
    assert shape.mismatches == 6 and shape.max_ulp_diff == -1 and "shape" in shape.dtype
    kinds = compare("q", np.zeros(2, np.uint8), np.zeros(2, np.int8))
    assert kinds.dtype == "uint8 vs int8" and not kinds.agree


DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(F8), np.dtype(np.int8)]


@st.composite
def _array_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of one type from raw bytes: NaN payloads, signed zeros, infinities included."""
    dtype = draw(st.sampled_from(DTYPES))
    size = draw(st.integers(1, 64)) * dtype.itemsize
    first, second = (draw(hnp.arrays(np.uint8, size)) for _ in range(2))
    return first.view(dtype), second.view(dtype)


@given(_array_pairs())
def test_mismatches_are_bit_differences_except_nan_pairs(pair: tuple[np.ndarray, ...]) -> None:
    a, b = pair
    assert compare("t", a, a).agree
    if a.dtype.kind == "i":
        expected = int(np.sum(a != b))
    else:
        with np.errstate(invalid="ignore"):
            both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
        expected = int(np.sum((a.view(width) != b.view(width)) & ~both_nan))
    assert compare("t", a, b).mismatches == expected == int(mismatch_mask(a, b).sum())


def _float8_models() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """A QDQ model with a float8 output, and its conversion with one scale changed."""
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [4])],
        [
            helper.make_tensor("s", TensorProto.FLOAT, [], [1.0]),
            helper.make_tensor("z", TensorProto.FLOAT8E4M3FN, [], [0.0]),
        ],
    )
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rewritten = quantgraph.convert(original).proto
    (spec_node,) = rewritten.graph.node
    for attribute in spec_node.attribute:
        if attribute.name == "scales":
            attribute.floats[:] = [2.0]
    return original, rewritten


@pytest.mark.skipif(not native_available(), reason="native library not built")
def test_validation_reports_float8_outputs_in_their_own_type() -> None:
    original, rewritten = _float8_models()
    x = np.array([0.5, 1.0, 2.0, 448.0], np.float32)
    report = quantgraph.validate(original, rewritten, inputs={"x": x}, backend="native")
    (output,) = report.outputs
    assert output.dtype == "float8_e4m3fn"
    assert output.mismatches == 4 and not report.agree
    assert output.max_abs_diff == 224.0  # 448 vs 224, in float8 values
