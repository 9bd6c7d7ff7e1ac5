"""The four operators called as a node would be: every rule of the spec checked (``SpecError``
names the first broken one), then computed in ONNX's arithmetic (:mod:`.onnx_arithmetic`) or
oneDNN's (:mod:`.onednn_arithmetic`). Never imports onnxruntime.
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
from . import onednn_arithmetic, onnx_arithmetic


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
    quantizer, dequantizer = onnx_arithmetic.quantize_values, onnx_arithmetic.dequantize_values
    if arithmetic == "onednn":
        quantizer, dequantizer = (
            onednn_arithmetic.quantize_values,
            onednn_arithmetic.dequantize_values,
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
