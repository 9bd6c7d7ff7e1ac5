"""The Python backend's compute: numpy in float32, the sequence onnxruntime's MLAS runs.

quantize:    q = x / s (float32, no reciprocal); q = min(max(q, qmin - zp), qmax - zp) in float32
             (NaN -> qmin - zp); round half to even; + zp as an integer; narrow.
dequantize:  (int32(x) - int32(zp)) -> float32, * s.

Bit-exact with :mod:`quantgraph.reference` (the slow, obvious oracle: float64 bounds, int64
sums) whenever the float32 bounds ``qmin - zp`` and ``qmax - zp`` are exact, i.e. every
``|q - zp| <= 2**24`` for q in [qmin, qmax]; s8/u8 zero points always are. Zero points beyond
that (s32 at its extremes) take the reference's path. Dequantize keeps int64 differences for
s32 zero points, which int32 would overflow. Arguments are already checked by the spec's rules.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ...spec import DType, dtypes

_EXACT_F32 = 2**24  # integers up to this magnitude are exact in float32


def _broadcast(values: np.ndarray, rank: int, axis: int | None) -> np.ndarray:
    if axis is None:
        return values.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return values.reshape(shape)


def quantize(
    src: np.ndarray, scales: np.ndarray, zps: np.ndarray | None, axis: int | None, dst: DType
) -> np.ndarray:
    if dst.is_float8:
        return reference.quantize_values(src, scales, zps, axis, dst)
    qmin, qmax = dst.int_range
    zp = np.zeros(1, np.int64) if zps is None else np.asarray(zps, np.int64).reshape(-1)
    if zp.size and (qmax - int(zp.min()) > _EXACT_F32 or int(zp.max()) - qmin > _EXACT_F32):
        return reference.quantize_values(src, scales, zps, axis, dst)
    scale = _broadcast(np.asarray(scales, np.float32), src.ndim, axis)
    zero = _broadcast(zp.astype(np.float32), src.ndim, axis if zps is not None else None)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scaled = np.asarray(np.divide(src, scale, dtype=np.float32))  # 0-d stays an array
    low, high = np.float32(qmin) - zero, np.float32(qmax) - zero
    nan = np.isnan(scaled)
    np.clip(scaled, low, high, out=scaled)  # one pass; 3x faster than fmax + fmin
    if nan.any():
        np.copyto(scaled, low, where=nan)  # NaN -> qmin - zp, as MLAS's max(NaN, low)
    np.rint(scaled, out=scaled)  # half to even
    if zps is not None:
        scaled += zero  # exact: both are integers within 2**24
    narrowed: np.ndarray = scaled.astype(dst.numpy)
    return narrowed


def dequantize(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    dst: DType = dtypes.F32,
) -> np.ndarray:
    if src.dtype.kind not in "iu" or dst != dtypes.F32:  # float8, f16/bf16 dst
        return reference.dequantize_values(src, scales, zps, axis, dst)
    scale = _broadcast(np.asarray(scales, np.float32), src.ndim, axis)
    if zps is None:
        values = src.astype(np.float32)
    else:
        wide = np.int64 if np.asarray(zps).dtype.itemsize > 1 else np.int32
        zero = _broadcast(np.asarray(zps, wide), src.ndim, axis)
        values = (src.astype(wide) - zero).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        result: np.ndarray = np.multiply(values, scale, dtype=np.float32)
    return result
