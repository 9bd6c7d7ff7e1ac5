"""numpy reference kernels of the four operators: the oracle the backends are held to.

Arithmetic follows onnxruntime's QuantizeLinear/DequantizeLinear so the two agree bit for bit:
quantize divides in float32 (no reciprocal), clamps to ``[qmin - zp, qmax - zp]`` in float
(NaN -> qmin), rounds half to even, then adds the zero point as an integer. ``round(x/s + zp)``
taken literally would add zp before rounding and lose bits near .5 ties.
Dequantize is ``float32(int(src) - int(zp)) * scale``. Never imports onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .spec import (
    DEQUANTIZE,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    PER_TENSOR,
    QUANTIZE,
    DType,
    OpSpec,
    check_call,
    check_static_attributes,
    default_output_dtype,
    dtypes,
)


def _broadcast_shape(rank: int, axis: int | None) -> tuple[int, ...]:
    """Shape that lines a 1-D per-channel vector up with ``axis`` of a rank-``rank`` tensor."""
    if axis is None:
        return ()
    shape = [1] * rank
    shape[axis] = -1
    return tuple(shape)


def quantize_values(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int | None, dst: DType
) -> np.ndarray:
    """Quantize with already validated arguments; ``axis`` None means per-tensor."""
    src = np.asarray(src, dtype=np.float32)
    shape = _broadcast_shape(src.ndim, axis)
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


def dequantize_values(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int | None
) -> np.ndarray:
    """Dequantize with already validated arguments; ``axis`` None means per-tensor."""
    shape = _broadcast_shape(src.ndim, axis)
    scale = np.asarray(scales, dtype=np.float32).reshape(shape)
    source = dtypes.from_numpy(src.dtype)
    if source is not None and source.is_float8:
        values = src.astype(np.float32)
    else:
        zp = np.int64(0) if zps is None else np.asarray(zps, np.int64).reshape(shape)
        values = (src.astype(np.int64) - zp).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return (values * scale).astype(np.float32)


def dynamic_quantize(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None = None,
    *,
    qtype: str = PER_TENSOR,
    axis: int = 1,
    output_dtype: int = 0,
    node: str = "",
) -> np.ndarray:
    """DynamicQuantize: ``saturate(round_half_even(src / scales) + zps)``."""
    dst = _quantize_dst(DYNAMIC_QUANTIZE, output_dtype, zps)
    resolved = check_call(
        DYNAMIC_QUANTIZE, node, src=src, scales=scales, zps=zps, qtype=qtype, axis=axis, dst=dst
    )
    return quantize_values(src, scales, zps, resolved, dst)


def dynamic_dequantize(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None = None,
    *,
    qtype: str = PER_TENSOR,
    axis: int = 1,
    node: str = "",
) -> np.ndarray:
    """DynamicDequantize: ``(src - zps) * scales``."""
    resolved = check_call(
        DYNAMIC_DEQUANTIZE,
        node,
        src=src,
        scales=scales,
        zps=zps,
        qtype=qtype,
        axis=axis,
        dst=dtypes.F32,
    )
    return dequantize_values(src, scales, zps, resolved)


def quantize(
    src: np.ndarray,
    *,
    scales: Sequence[float],
    zps: Sequence[int] | None = None,
    qtype: str = PER_TENSOR,
    axis: int = 1,
    output_dtype: int = 0,
    node: str = "",
) -> np.ndarray:
    """Static Quantize: scales and zero points are attributes."""
    dst = dtypes.from_onnx(output_dtype) if output_dtype else dtypes.U8
    dst = dst if dst is not None else dtypes.U8 if output_dtype == 0 else _bad_dst(output_dtype)
    check_static_attributes(QUANTIZE, node, scales, zps, dst)
    scale_array, zp_array = _attribute_arrays(scales, zps)
    resolved = check_call(
        QUANTIZE, node, src=src, scales=scale_array, zps=zp_array, qtype=qtype, axis=axis, dst=dst
    )
    return quantize_values(src, scale_array, zp_array, resolved, dst)


def dequantize(
    src: np.ndarray,
    *,
    scales: Sequence[float],
    zps: Sequence[int] | None = None,
    qtype: str = PER_TENSOR,
    axis: int = 1,
    node: str = "",
) -> np.ndarray:
    """Static Dequantize: scales and zero points are attributes."""
    source = dtypes.from_numpy(src.dtype)
    check_static_attributes(DEQUANTIZE, node, scales, zps, source or dtypes.S8)
    scale_array, zp_array = _attribute_arrays(scales, zps)
    resolved = check_call(
        DEQUANTIZE,
        node,
        src=src,
        scales=scale_array,
        zps=zp_array,
        qtype=qtype,
        axis=axis,
        dst=dtypes.F32,
    )
    return dequantize_values(src, scale_array, zp_array, resolved)


def _attribute_arrays(
    scales: Sequence[float], zps: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray | None]:
    # zps attributes are s64 lists; check_static_attributes has bounded them to s32.
    zp_array = None if zps is None else np.asarray(list(zps), dtype=np.int32).reshape(-1)
    return np.asarray(list(scales), dtype=np.float32).reshape(-1), zp_array


def _quantize_dst(op: OpSpec, output_dtype: int, zps: np.ndarray | None) -> DType:
    if output_dtype:
        found = dtypes.from_onnx(output_dtype)
        return found if found is not None else _bad_dst(output_dtype)
    return default_output_dtype(dtypes.from_numpy(zps.dtype) if zps is not None else None)


def _bad_dst(output_dtype: int) -> DType:
    # A stand-in that check_types rejects with the dst-type rule and the real type's name.
    return DType(dtypes.onnx_name(output_dtype), output_dtype, "int64")


KERNELS = {
    DYNAMIC_QUANTIZE.name: dynamic_quantize,
    DYNAMIC_DEQUANTIZE.name: dynamic_dequantize,
    QUANTIZE.name: quantize,
    DEQUANTIZE.name: dequantize,
}
