"""A per_tensor node whose scales and zps are constant initializers has its kernel and
parameters chosen once, when onnxruntime creates the kernel (native/drive.h PerTensorRun). It
must compute what the same node computes with them as graph inputs (the per-call path), bit
for bit, in both arithmetics, for every 8-bit row, at every size (empty, on the calling thread,
on the intra-op pool, with streaming stores), and a bad constant must fail the same way."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

from quantgraph.backends import native
from quantgraph.spec import DOMAIN
from quantgraph.testing import one_op_model, quiet_session_options
from tests.native.native_support import (
    float_data,
    mismatches_nan_equal,
    quantized_data,
    requires_native,
    run_session,
    symbolic_shape,
)

pytestmark = requires_native

ZPS = {"s8": np.int8, "u8": np.uint8, "s32": np.int32}
QUANTIZED = {"s8": np.int8, "u8": np.uint8}
# s32: beyond what the SIMD tables take too (kernels::kSimdMaxZp), so the scalar table runs.
ZP_RANGE = {"s8": (-128, 128), "u8": (0, 256), "s32": (-(1 << 20), 1 << 20)}


def _session(model: Any, arithmetic: str, threads: int) -> ort.InferenceSession:
    options = quiet_session_options(threads=threads, spinning=False)
    options.add_session_config_entry("quantgraph.arithmetic", arithmetic)
    native.register(options)
    return ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])


def _run_both(
    op: str,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    *,
    arithmetic: str = "onnx",
    threads: int = 1,
    **attributes: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The node with scales/zps as graph inputs, then as initializers."""
    src_input = (dtype_of(src), symbolic_shape(src.ndim))
    fed: dict[str, Any] = {"src": src_input, "scales": (dtype_of(scales), [1])}
    fixed: dict[str, Any] = {"src": src_input, "scales": scales}
    if zps is not None:
        fed["zps"] = (dtype_of(zps), [1])
        fixed["zps"] = zps
    outputs = {"dst": None}
    model_fed = one_op_model(op, fed, outputs, domain=DOMAIN, **attributes)
    model_fixed = one_op_model(op, fixed, outputs, domain=DOMAIN, **attributes)
    feeds = {"src": src, "scales": scales} | ({} if zps is None else {"zps": zps})
    got_fed = run_session(_session(model_fed, arithmetic, threads), feeds)
    got_fixed = run_session(_session(model_fixed, arithmetic, threads), {"src": src})
    return got_fed, got_fixed


def dtype_of(array: np.ndarray) -> int:
    return {
        np.dtype(np.float32): TensorProto.FLOAT,
        np.dtype(np.float16): TensorProto.FLOAT16,
        np.dtype(np.int8): TensorProto.INT8,
        np.dtype(np.uint8): TensorProto.UINT8,
        np.dtype(np.int32): TensorProto.INT32,
    }[array.dtype]


def _assert_same(fed: np.ndarray, fixed: np.ndarray) -> None:
    assert fed.dtype == fixed.dtype and fed.shape == fixed.shape
    assert mismatches_nan_equal(fixed, fed) == 0


SHAPES = st.one_of(
    st.lists(st.integers(0, 6), min_size=0, max_size=4).map(tuple),
    # (40_000,): on the intra-op pool; ranks 8 and above: the fixed path's dims live on the
    # stack up to rank 8, higher ranks take the per-call path (native/register.cc).
    st.sampled_from([(1, 256), (3, 1000), (40_000,), (1, 2, 1, 2, 1, 2, 1, 3), (2,) * 9]),
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    shape=SHAPES,
    zps=st.sampled_from([None, "s8", "u8", "s32"]),
    output_dtype=st.sampled_from([0, TensorProto.INT8, TensorProto.UINT8]),
    arithmetic=st.sampled_from(["onnx", "onednn"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_dynamic_quantize(
    shape: tuple[int, ...], zps: str | None, output_dtype: int, arithmetic: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    scales = np.array([rng.uniform(1e-3, 2.0)], np.float32)
    src = float_data(rng, shape, float(scales[0]))
    zp = None if zps is None else np.array([rng.integers(*ZP_RANGE[zps])], ZPS[zps])
    fed, fixed = _run_both(
        "DynamicQuantize",
        src,
        scales,
        zp,
        arithmetic=arithmetic,
        qtype="per_tensor",
        output_dtype=output_dtype,
    )
    _assert_same(fed, fixed)


@SETTINGS
@given(
    shape=SHAPES,
    src_type=st.sampled_from(["s8", "u8"]),
    zps=st.sampled_from([None, "s8", "u8", "s32"]),
    scales_type=st.sampled_from([np.float32, np.float16]),  # f16: the per-call groups path
    arithmetic=st.sampled_from(["onnx", "onednn"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_dynamic_dequantize(
    shape: tuple[int, ...],
    src_type: str,
    zps: str | None,
    scales_type: type,
    arithmetic: str,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    src = quantized_data(rng, shape, np.dtype(QUANTIZED[src_type]))
    scales: np.ndarray = np.array([rng.uniform(1e-3, 2.0)], scales_type)
    zp = None if zps is None else np.array([rng.integers(*ZP_RANGE[zps])], ZPS[zps])
    fed, fixed = _run_both(
        "DynamicDequantize", src, scales, zp, arithmetic=arithmetic, qtype="per_tensor"
    )
    _assert_same(fed, fixed)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", ["DynamicQuantize", "DynamicDequantize"])
def test_streaming_sizes(op: str, threads: int) -> None:
    """Outputs of 8 MiB and more bypass the cache (native/parallel.h kStreamMinBytes)."""
    rng = np.random.default_rng(7)
    n = (8 << 20) + 333
    scales = np.array([0.05], np.float32)
    zp = np.array([3], np.uint8)
    if op == "DynamicQuantize":
        src = float_data(rng, (n,), 0.05)
    else:
        src = quantized_data(rng, (n // 4 + 5,), np.dtype(np.uint8))
    fed, fixed = _run_both(op, src, scales, zp, threads=threads, qtype="per_tensor")
    _assert_same(fed, fixed)


@pytest.mark.parametrize("bad", [0.0, float("inf"), float("nan")])
def test_a_bad_constant_scale_fails_as_a_fed_one(bad: float) -> None:
    src = np.ones((2, 3), np.float32)
    scales = np.array([bad], np.float32)
    messages = []
    for fixed in (False, True):
        inputs: dict[str, Any] = {
            "src": (TensorProto.FLOAT, ["a", "b"]),
            "scales": scales if fixed else (TensorProto.FLOAT, [1]),
        }
        model = one_op_model("DynamicQuantize", inputs, {"dst": None}, domain=DOMAIN)
        feeds = {"src": src} | ({} if fixed else {"scales": scales})
        with pytest.raises(Exception) as caught:
            run_session(_session(model, "onnx", 1), feeds)
        messages.append(str(caught.value))
    assert "scale" in messages[1] and messages[0] == messages[1]
