"""The Python backend's float32 numpy kernels are bit-exact with the reference (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantgraph import reference
from quantgraph.backends.python import kernels as numpy_kernels
from quantgraph.reference.compare import compare
from quantgraph.spec import dtypes

QUANTIZED = [dtypes.S8, dtypes.U8]
SPECIAL = np.array(
    [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3.4e38, -3.4e38], np.float32
)


def _ties(scale: np.float32, count: int, rng: np.random.Generator) -> np.ndarray:
    """Values whose float32 quotient by ``scale`` is exactly k + 0.5."""
    halves = (rng.integers(-400, 400, count) + 0.5).astype(np.float32)
    values = (halves * scale).astype(np.float32)
    ties: np.ndarray = values[(values / scale).astype(np.float32) == halves]
    return ties


def _same_as_reference(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int | None, dst: dtypes.DType
) -> None:
    want = reference.quantize_values(src, scales, zps, axis, dst)
    got = numpy_kernels.quantize(src, scales, zps, axis, dst)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert compare("q", want, got).agree


@pytest.mark.parametrize("dst", QUANTIZED, ids=str)
@pytest.mark.parametrize("zps_type", [None, "same", "s32"])
def test_quantize_per_tensor_on_ties_specials_and_random(
    dst: dtypes.DType, zps_type: str | None
) -> None:
    rng = np.random.default_rng(3)
    for scale in np.array([0.0123, 1.0, 0.5, 3.7e-5, 1e-38, 2.5e5], np.float32):
        src = np.concatenate(
            [_ties(scale, 4000, rng), SPECIAL, (rng.standard_normal(5000) * 300 * scale)]
        ).astype(np.float32)
        for zp in (-128, -1, 0, 1, 127, 128, 255):
            if zps_type is None:
                zps = None
            elif zps_type == "same":
                low, high = dst.int_range
                if not low <= zp <= high:
                    continue
                zps = np.array([zp], dst.numpy)
            else:
                zps = np.array([zp], np.int32)
            _same_as_reference(src, np.array([scale]), zps, None, dst)


@pytest.mark.parametrize("dst", QUANTIZED, ids=str)
def test_s32_zero_points_at_the_float32_boundary_and_extremes(dst: dtypes.DType) -> None:
    """Up to |q - zp| = 2**24 the float32 path runs; past it the reference's exact path."""
    qmin, qmax = dst.int_range
    src = np.concatenate([SPECIAL, np.linspace(-3e9, 3e9, 2001, dtype=np.float32)])
    edges = [qmax - 2**24, qmax - 2**24 - 1, qmin + 2**24, qmin + 2**24 + 1]
    for zp in [*edges, -(2**31), 2**31 - 1, 2**24 - 256, -(2**24)]:
        _same_as_reference(src, np.array([1.0], np.float32), np.array([zp], np.int32), None, dst)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda rank: st.tuples(
            st.lists(st.integers(1, 5), min_size=rank, max_size=rank),
            st.integers(-rank, rank - 1),
            st.sampled_from(QUANTIZED),
            st.sampled_from([None, "same", "s32"]),
            st.integers(0, 2**32 - 1),
        )
    )
)
def test_quantize_per_channel_property(
    case: tuple[list[int], int, dtypes.DType, str | None, int],
) -> None:
    shape, axis, dst, zps_type, seed = case
    rng = np.random.default_rng(seed)
    channels = shape[axis]
    scales = rng.choice(np.array([0.01, 0.5, 1.0, 7.25, 1e-3], np.float32), channels)
    src = (rng.standard_normal(shape) * 200).astype(np.float32)
    src.reshape(-1)[::7] = np.float32(0.5) * scales.max()
    low, high = dst.int_range
    if zps_type is None:
        zps = None
    elif zps_type == "same":
        zps = rng.integers(low, high, channels, endpoint=True).astype(dst.numpy)
    else:
        zps = rng.integers(-(2**31), 2**31 - 1, channels).astype(np.int32)
    _same_as_reference(src, scales, zps, axis % len(shape), dst)


@pytest.mark.parametrize("src_type", QUANTIZED, ids=str)
@pytest.mark.parametrize("zps_type", [None, "same", "s32"])
def test_dequantize_matches_the_reference(src_type: dtypes.DType, zps_type: str | None) -> None:
    rng = np.random.default_rng(5)
    low, high = src_type.int_range
    src = rng.integers(low, high, (64, 8), endpoint=True).astype(src_type.numpy)
    scales = np.array([0.1, -2.0, 1e-38, 3e38, 0.0, np.inf, np.nan, 1.0], np.float32)
    for zps in (
        None
        if zps_type is None
        else rng.integers(low, high, 8, endpoint=True).astype(src_type.numpy)
        if zps_type == "same"
        else np.array([-(2**31), 2**31 - 1, 0, 5, -5, 2**24, -(2**24) - 1, 1], np.int32),
    ):
        want = reference.dequantize_values(src, scales, zps, 1)
        got = numpy_kernels.dequantize(src, scales, zps, 1)
        assert compare("dq", want, got).agree
