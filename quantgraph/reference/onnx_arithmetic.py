"""numpy kernels of ONNX's arithmetic for the four operators: the oracle the backends are held to.

Arithmetic follows onnxruntime's QuantizeLinear/DequantizeLinear so the two agree bit for bit:
quantize divides in float32 (no reciprocal), clamps to ``[qmin - zp, qmax - zp]`` in float
(NaN -> qmin), rounds half to even, then adds the zero point as an integer. ``round(x/s + zp)``
taken literally would add zp before rounding and lose bits near .5 ties.
Dequantize is ``float32(int(src) - int(zp)) * scale``. Never imports onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..spec import DType, dtypes
from .broadcasting import broadcast_shape


def quantize_values(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int | None, dst: DType
) -> np.ndarray:
    """Quantize with already validated arguments; ``axis`` None means per-tensor."""
    src = np.asarray(src, dtype=np.float32)
    shape = broadcast_shape(src.ndim, axis)
    scale = np.asarray(scales, dtype=np.float32).reshape(shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scaled = (src / scale).astype(np.float32)
    if dst.is_float8:
        # ONNX saturate=1: finite overflow and +-inf go to +-max, NaN stays NaN.
        limit = np.float32(dst.float8_max)
        clipped = np.where(np.isnan(scaled), scaled, np.clip(scaled, -limit, limit))
        return clipped.astype(dst.numpy)
    qmin, qmax = dst.int_range
    zp = np.int64(0) if zps is None else np.asarray(zps, np.int64).reshape(shape)
    # Bounds in float64 are exact for every s32 zero point; for s8/u8 ones they equal
    # onnxruntime's float32 bounds, and comparing a float32 value with either is the same.
    low = (qmin - zp).astype(np.float64)
    high = (qmax - zp).astype(np.float64)
    wide = scaled.astype(np.float64)
    clamped = np.clip(np.where(np.isnan(wide), low, wide), low, high)
    rounded = np.rint(clamped).astype(np.int64)  # rint rounds half to even
    result: np.ndarray = np.clip(rounded + zp, qmin, qmax).astype(dst.numpy)
    return result


def expand_groups(values: np.ndarray, group_shape: Sequence[int]) -> np.ndarray:
    """per_group parameters repeated over their groups: the shape of src."""
    for dim, size in enumerate(group_shape):
        if size != 1:
            values = np.repeat(values, int(size), axis=dim)
    return values


def dequantize_values(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    dst: DType = dtypes.F32,
    group_shape: Sequence[int] | None = None,
) -> np.ndarray:
    """Dequantize with already validated arguments; ``axis`` None means per-tensor (or, with
    ``group_shape``, per-group). Computed in f32 and rounded once to ``dst`` (f16/bf16: to
    nearest even), as onnxruntime's DequantizeLinear does for float16."""
    if group_shape is not None:
        scale = expand_groups(np.asarray(scales).astype(np.float32), group_shape)
        zp_full = None if zps is None else expand_groups(np.asarray(zps), group_shape)
        zp = np.int64(0) if zp_full is None else zp_full.astype(np.int64)
    else:
        shape = broadcast_shape(src.ndim, axis)
        scale = np.asarray(scales).astype(np.float32).reshape(shape)
        zp = np.int64(0) if zps is None else np.asarray(zps).astype(np.int64).reshape(shape)
    source = dtypes.from_numpy(src.dtype)
    if source is not None and source.is_float8:
        values = src.astype(np.float32)
    else:
        values = (src.astype(np.int64) - zp).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        result: np.ndarray = (values * scale).astype(np.float32).astype(dst.numpy)
    return result
