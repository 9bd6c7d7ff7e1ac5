"""per_group, 4-bit and f16 DynamicDequantize against onnxruntime's blocked DequantizeLinear.

onnxruntime's own kernels are the independent reference: every case here is a DequantizeLinear
(opset 21, block_size along one axis, int4/uint4/int8/uint8, float32/float16 scales) that ONNX
and the spec both express; quantgraph's numpy reference (through onnx's ReferenceEvaluator on
the converted model) must give the same bits.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import quantgraph
from quantgraph import reference
from quantgraph.reference.compare import compare
from quantgraph.reference.evaluator import REFERENCE_OPS
from tests.builders import ort_session, run_evaluator

TYPES = {
    TensorProto.INT4: ml_dtypes.int4,
    TensorProto.UINT4: ml_dtypes.uint4,
    TensorProto.INT8: np.int8,
    TensorProto.UINT8: np.uint8,
}


def blocked_model(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int, block: int
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(src, "x"), numpy_helper.from_array(scales, "s")]
    inputs = ["x", "s"]
    if zps is not None:
        inits.append(numpy_helper.from_array(zps, "z"))
        inputs.append("z")
    node = helper.make_node("DequantizeLinear", inputs, ["y"], axis=axis, block_size=block)
    out_type = helper.np_dtype_to_tensor_dtype(scales.dtype)
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("y", out_type, list(src.shape))], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@st.composite
def blocked_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int, int]:
    elem = draw(st.sampled_from(sorted(TYPES)))
    np_type = np.dtype(TYPES[elem])
    rank = draw(st.integers(1, 4))
    axis = draw(st.integers(0, rank - 1))
    block = draw(st.sampled_from([1, 2, 3, 8, 16, 32]))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    blocks = draw(st.integers(2, 3))  # onnxruntime takes a one-element scale as per-tensor
    shape[axis] = blocks * block
    info = ml_dtypes.iinfo(np_type)  # type: ignore[no-untyped-call]  # ml_dtypes: no hints
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(info.min, info.max, shape, endpoint=True).astype(np_type)
    scale_shape = list(shape)
    scale_shape[axis] = blocks
    scale_type = draw(st.sampled_from([np.float32, np.float16]))
    pool = np.array([0.5, 1e-3, 3.0, -2.0, 6e-5, 1e4, 0.1], np.float32)
    scales = rng.choice(pool, scale_shape).astype(scale_type)
    zps = None
    if draw(st.booleans()):
        zps = rng.integers(info.min, info.max, scale_shape, endpoint=True).astype(np_type)
    return src, scales, zps, axis, block


@settings(max_examples=120, deadline=None)
@given(blocked_cases())
def test_per_group_reference_equals_onnxruntime(
    case: tuple[np.ndarray, np.ndarray, np.ndarray | None, int, int],
) -> None:
    src, scales, zps, axis, block = case
    model = blocked_model(src, scales, zps, axis, block)
    want = ort_session(model).run(None, {})[0]
    result = quantgraph.convert(model)
    assert result.report.skipped == [], result.report.skipped
    got = run_evaluator(ReferenceEvaluator(result.proto, new_ops=REFERENCE_OPS), None, {})[0]
    assert got.dtype == want.dtype
    assert compare("y", want, got).agree
    groups = [block if d == axis else 1 for d in range(src.ndim)]
    direct = reference.dynamic_dequantize(src, scales, zps, qtype="per_group", group_shape=groups)
    assert compare("y", want, direct).agree


def test_benchdnn_dynamicdq_s4() -> None:
    """oneDNN's benchdnn case: src s4 [1,32,128,32], group_shape [1,1,8,1], scales and s4 zps
    [1,32,16,32] (blocks of 8 along dim 2: ONNX's block_size 8 on axis 2)."""
    rng = np.random.default_rng(7)
    src = rng.integers(-8, 8, (1, 32, 128, 32)).astype(ml_dtypes.int4)
    scales = rng.uniform(0.01, 1.0, (1, 32, 16, 32)).astype(np.float32)
    zps = rng.integers(-8, 8, (1, 32, 16, 32)).astype(ml_dtypes.int4)
    got = reference.dynamic_dequantize(
        src, scales, zps, qtype="per_group", group_shape=[1, 1, 8, 1]
    )
    want = ort_session(blocked_model(src, scales, zps, axis=2, block=8)).run(None, {})[0]
    assert compare("y", want, got).agree
    expanded = np.repeat(scales, 8, axis=2) * (
        src.astype(np.float32) - np.repeat(zps.astype(np.float32), 8, axis=2)
    )
    np.testing.assert_array_equal(got, expanded)


@pytest.mark.parametrize("dst", [np.float32, np.float16, ml_dtypes.bfloat16], ids=str)
def test_dst_rounds_once_from_f32(dst: type) -> None:
    """f16/bf16: the f32 product rounded once to nearest even (bf16 has no onnxruntime kernel)."""
    src = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    scales: np.ndarray = np.full((1, 16), 0.3, np.float32).astype(dst)
    got = reference.dynamic_dequantize(src, scales, qtype="per_group", group_shape=[16, 1])
    want: np.ndarray = (src.astype(np.float32) * scales.astype(np.float32)).astype(dst)
    assert got.dtype == np.dtype(dst)
    assert compare("y", want, got).agree
