"""Validation rules of the seed operators: one table of wording, checks over shapes, types, values.

Every message has the form ``<Op> node '<name>': <rule text> [rule <id>]``; the C++ kernels get
the same templates from ``codegen`` so both backends say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import dtypes
from .dtypes import DType
from .ops import PER_CHANNEL, PER_TENSOR, QTYPES, OpSpec

RULES: dict[str, str] = {
    "qtype": "qtype must be one of per_tensor, per_channel; got '{qtype}'",
    "axis-range": "axis {axis} is out of range [{low}, {high}] for src of rank {rank}",
    "scales-rank": "scales must be a 1-D tensor; got rank {rank}",
    "zps-rank": "zps must be a 1-D tensor; got rank {rank}",
    "per-tensor-scale-count": "per_tensor needs exactly one scale; got {count}",
    "per-channel-scale-count": (
        "per_channel needs one scale per element of src along axis {axis} ({expected}); got {count}"
    ),
    "zps-count": "zps must have as many elements as scales ({expected}); got {count}",
    "f8-zps": "zps are not allowed with {dtype}",
    "scale-value": (
        "scales[{index}] = {value}: quantize divides by the scale, "
        "so it must be finite and non-zero"
    ),
    "zps-value": "zps[{index}] = {value} does not fit in s32",
    "src-type": "src type {got} is not supported (allowed: {allowed})",
    "dst-type": "dst type {got} is not supported (allowed: {allowed})",
    "scales-type": "scales type {got} is not supported (allowed: {allowed})",
    "zps-type": "zps type {got} is not supported (allowed: {allowed})",
    "missing-input": "input '{name}' is required",
    "missing-attribute": "attribute '{name}' is required",
}

S32_MIN, S32_MAX = dtypes.S32.int_range


class SpecError(ValueError):
    """A rule of an operator's spec is broken by a node or a call."""

    def __init__(self, op: str, node: str, rule: str, **fields: object) -> None:
        self.op = op
        self.node = node
        self.rule = rule
        self.fields = fields
        self.detail = RULES[rule].format(**fields)
        super().__init__(f"{op} node '{node}': {self.detail} [rule {rule}]")


@dataclass(frozen=True)
class CallTypes:
    """Element types of one call; None where an optional input is absent."""

    src: DType
    dst: DType
    scales: DType | None = None
    zps: DType | None = None


def resolve_axis(axis: int, rank: int) -> int | None:
    """The non-negative axis, or None when it is outside [-rank, rank-1]."""
    if -rank <= axis < rank:
        return axis + rank if axis < 0 else axis
    return None


def default_output_dtype(zps: DType | None) -> DType:
    """dst of a quantize op without output_dtype: the zps type if 8-bit, else u8 (as ONNX)."""
    return zps if zps in (dtypes.S8, dtypes.U8) else dtypes.U8


def _names(types: Sequence[DType]) -> str:
    return ", ".join(t.name for t in types)


def check_qtype(op: OpSpec, node: str, qtype: str) -> None:
    if qtype not in QTYPES:
        raise SpecError(op.name, node, "qtype", qtype=qtype)


def check_types(op: OpSpec, node: str, types: CallTypes | dict[str, int | None]) -> None:
    """Check element types against the op's data-type table (ONNX enums or DTypes)."""
    if isinstance(types, dict):
        raw = types
    else:
        raw = {
            "src": types.src.onnx,
            "dst": types.dst.onnx,
            "scales": types.scales.onnx if types.scales else None,
            "zps": types.zps.onnx if types.zps else None,
        }
    src = _check_one(op, node, "src-type", raw["src"], op.src_types)
    rows = op.rows_for_src(src)
    dst = _check_one(op, node, "dst-type", raw["dst"], tuple(r.dst for r in rows))
    rows = tuple(r for r in rows if r.dst == dst)
    if not op.is_static:
        allowed_scales = tuple({r.scales for r in rows if r.scales is not None})
        if raw.get("scales") is None:
            raise SpecError(op.name, node, "missing-input", name="scales")
        _check_one(op, node, "scales-type", raw["scales"], allowed_scales)
        if raw.get("zps") is not None:
            _check_one(op, node, "zps-type", raw["zps"], rows[0].zps)


def _check_one(
    op: OpSpec, node: str, rule: str, elem_type: int | None, allowed: Sequence[DType]
) -> DType:
    found = dtypes.from_onnx(elem_type) if elem_type is not None else None
    if found is None or found not in allowed:
        got = dtypes.onnx_name(elem_type) if elem_type is not None else "unknown"
        raise SpecError(op.name, node, rule, got=got, allowed=_names(allowed))
    return found


def check_shapes(
    op: OpSpec,
    node: str,
    *,
    qtype: str,
    axis: int,
    src_shape: Sequence[int | None],
    scales_shape: Sequence[int | None],
    zps_shape: Sequence[int | None] | None,
) -> int | None:
    """Check scale/zero-point counts against src; returns the resolved axis for per_channel.

    Unknown dims (None) pass: the kernel checks them again at run time.
    """
    check_qtype(op, node, qtype)
    if len(scales_shape) != 1:
        raise SpecError(op.name, node, "scales-rank", rank=len(scales_shape))
    if zps_shape is not None and len(zps_shape) != 1:
        raise SpecError(op.name, node, "zps-rank", rank=len(zps_shape))
    count = scales_shape[0]
    resolved: int | None = None
    if qtype == PER_TENSOR:
        if count is not None and count != 1:
            raise SpecError(op.name, node, "per-tensor-scale-count", count=count)
    else:
        rank = len(src_shape)
        resolved = resolve_axis(axis, rank)
        if resolved is None:
            raise SpecError(
                op.name, node, "axis-range", axis=axis, low=-rank, high=rank - 1, rank=rank
            )
        expected = src_shape[resolved]
        if count is not None and expected is not None and count != expected:
            raise SpecError(
                op.name, node, "per-channel-scale-count", axis=axis, expected=expected, count=count
            )
    if zps_shape is not None:
        zcount = zps_shape[0]
        if count is not None and zcount is not None and zcount != count:
            raise SpecError(op.name, node, "zps-count", expected=count, count=zcount)
    return resolved


def check_scale_values(op: OpSpec, node: str, scales: np.ndarray) -> None:
    """Quantize divides by each scale: zero, inf and NaN have no meaning there."""
    if not op.is_quantize:
        return
    values = np.asarray(scales, dtype=np.float32).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(values) | (values == 0))
    if bad.size:
        index = int(bad[0])
        raise SpecError(op.name, node, "scale-value", index=index, value=float(values[index]))


def check_static_attributes(
    op: OpSpec,
    node: str,
    scales: Sequence[float] | None,
    zps: Sequence[int] | None,
    dst_or_src: DType,
) -> None:
    """Rules that only static ops have: scales required, zps fit s32, no zps with f8."""
    if scales is None:
        raise SpecError(op.name, node, "missing-attribute", name="scales")
    if zps is not None:
        if dst_or_src.is_float8:
            raise SpecError(op.name, node, "f8-zps", dtype=dst_or_src.name)
        for index, value in enumerate(zps):
            if not S32_MIN <= int(value) <= S32_MAX:
                raise SpecError(op.name, node, "zps-value", index=index, value=int(value))


def check_call(
    op: OpSpec,
    node: str,
    *,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    qtype: str,
    axis: int,
    dst: DType,
) -> int | None:
    """All rules for one concrete call (what a kernel checks before it computes)."""
    if scales is None:
        raise SpecError(op.name, node, "missing-input", name="scales")
    src_type = dtypes.from_numpy(src.dtype)
    types: dict[str, int | None] = {
        "src": dtypes.onnx_of_numpy(src.dtype),
        "dst": dst.onnx,
        "scales": dtypes.onnx_of_numpy(scales.dtype),
        "zps": dtypes.onnx_of_numpy(zps.dtype) if zps is not None else None,
    }
    check_types(op, node, types)
    float8 = dst if dst.is_float8 else src_type
    if zps is not None and float8 is not None and float8.is_float8:
        raise SpecError(op.name, node, "f8-zps", dtype=float8.name)
    resolved = check_shapes(
        op,
        node,
        qtype=qtype,
        axis=axis,
        src_shape=src.shape,
        scales_shape=scales.shape,
        zps_shape=zps.shape if zps is not None else None,
    )
    check_scale_values(op, node, scales)
    return resolved


__all__ = [
    "RULES",
    "SpecError",
    "CallTypes",
    "resolve_axis",
    "default_output_dtype",
    "check_qtype",
    "check_types",
    "check_shapes",
    "check_scale_values",
    "check_static_attributes",
    "check_call",
    "PER_CHANNEL",
    "PER_TENSOR",
]
