"""numpy reference kernels of the four operators: the oracle the backends are held to.

Arithmetic follows onnxruntime's QuantizeLinear/DequantizeLinear so the two agree bit for bit:
quantize divides in float32 (no reciprocal), clamps to ``[qmin - zp, qmax - zp]`` in float
(NaN -> qmin), rounds half to even, then adds the zero point as an integer. ``round(x/s + zp)``
taken literally would add zp before rounding and lose bits near .5 ties.
Dequantize is ``float32(int(src) - int(zp)) * scale``. Never imports onnxruntime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..spec import (
    DEQUANTIZE,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    OPS,
    PER_GROUP,
    QUANTIZE,
    DType,
    OpSpec,
    check_call,
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
        shape = _broadcast_shape(src.ndim, axis)
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


@dataclass(frozen=True)
class Call:
    """One call that passed every rule: arrays ready for a kernel, axis resolved."""

    op: OpSpec
    src: np.ndarray
    scales: np.ndarray
    zps: np.ndarray | None
    axis: int | None  # None: per_tensor or per_group
    dst: DType
    group_shape: tuple[int, ...] | None = None  # per_group


def checked_call(
    op: str | OpSpec,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, object] | None = None,
    *,
    node: str = "",
) -> Call:
    """Check one call of ``op`` against every rule (``SpecError`` names the first broken one).

    ``inputs`` are src (and scales, zps for the dynamic ops; None where absent); ``attributes``
    as a node has them, the spec's defaults filling the rest.
    """
    spec = OPS[op] if isinstance(op, str) else op
    given = dict(attributes or {})
    src = np.asarray(inputs[0])
    if spec.is_static:
        scales, zps = _attribute_arrays(given.get("scales"), given.get("zps"))
        checked = check_call(spec, node, src=src, scales=None, zps=None, attributes=given)
    else:
        scales = _optional(inputs, 1)
        zps = _optional(inputs, 2)
        checked = check_call(spec, node, src=src, scales=scales, zps=zps, attributes=given)
    assert scales is not None  # the rules require scales
    dst = dtypes.from_onnx(checked.dst)
    assert dst is not None  # check_types accepted it
    groups = given.get("group_shape") if checked.qtype == PER_GROUP else None
    group_shape = None if groups is None else tuple(int(g) for g in groups)  # type: ignore[attr-defined]
    return Call(spec, src, scales, zps, checked.axis, dst, group_shape)


def run(
    op: str | OpSpec,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, object] | None = None,
    *,
    node: str = "",
    arithmetic: str = "onnx",
) -> np.ndarray:
    """One call of ``op`` (a spec name): every rule checked, then computed here.

    ``arithmetic="onednn"``: as oneDNN's CPU engine computes it
    (:mod:`quantgraph.reference.onednn_arithmetic`, the numpy model of oneDNN's arithmetic).
    """
    call = checked_call(op, inputs, attributes, node=node)
    quantizer, dequantizer = quantize_values, dequantize_values
    if arithmetic == "onednn":
        from . import onednn_arithmetic as reference_onednn

        quantizer, dequantizer = (
            reference_onednn.quantize_values,
            reference_onednn.dequantize_values,
        )
    elif arithmetic != "onnx":
        raise ValueError(f"arithmetic is 'onnx' or 'onednn', not {arithmetic!r}")
    if call.op.is_quantize:
        result = quantizer(call.src, call.scales, call.zps, call.axis, call.dst)
    else:
        result = dequantizer(call.src, call.scales, call.zps, call.axis, call.dst, call.group_shape)
    return np.asarray(result)  # 0-d stays an array


def dynamic_quantize(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None = None,
    *,
    node: str = "",
    **attributes: object,
) -> np.ndarray:
    """DynamicQuantize: ``saturate(round_half_even(src / scales) + zps)``."""
    return run(DYNAMIC_QUANTIZE, [src, scales, zps], attributes, node=node)


def dynamic_dequantize(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None = None,
    *,
    node: str = "",
    **attributes: object,
) -> np.ndarray:
    """DynamicDequantize: ``(src - zps) * scales``."""
    return run(DYNAMIC_DEQUANTIZE, [src, scales, zps], attributes, node=node)


def quantize(src: np.ndarray, *, node: str = "", **attributes: object) -> np.ndarray:
    """Static Quantize: scales and zero points are attributes."""
    return run(QUANTIZE, [src], attributes, node=node)


def dequantize(src: np.ndarray, *, node: str = "", **attributes: object) -> np.ndarray:
    """Static Dequantize: scales and zero points are attributes."""
    return run(DEQUANTIZE, [src], attributes, node=node)


def _optional(inputs: Sequence[np.ndarray | None], index: int) -> np.ndarray | None:
    value = inputs[index] if len(inputs) > index else None
    return None if value is None else np.asarray(value)


def _attribute_arrays(scales: object, zps: object) -> tuple[np.ndarray | None, np.ndarray | None]:
    # zps attributes are s64 lists; the rules bound them to s32 before they are used.
    scale_array = None if scales is None else np.asarray(list(scales), np.float32).reshape(-1)  # type: ignore[call-overload]
    zp_array = None if zps is None else np.asarray(list(zps), np.int64).reshape(-1)  # type: ignore[call-overload]
    return scale_array, zp_array
