"""Validation rules of the seed operators: one table of wording, checks over shapes, types, values.

Every message has the form ``<Op> node '<name>': <rule text> [rule <id>]``; the C++ kernels get
the same templates from ``codegen`` so both backends say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import dtypes
from .dtypes import DType
from .ops import DEQUANTIZED, PER_CHANNEL, PER_GROUP, PER_TENSOR, OpSpec

RULES: dict[str, str] = {
    "qtype": "qtype must be one of {allowed}; got '{qtype}'",
    "axis-range": "axis {axis} is out of range [{low}, {high}] for src of rank {rank}",
    "scales-rank": "scales must be a 1-D tensor; got rank {rank}",
    "zps-rank": "zps must be a 1-D tensor; got rank {rank}",
    "per-tensor-scale-count": "per_tensor needs exactly one scale; got {count}",
    "per-channel-scale-count": (
        "per_channel needs one scale per element of src along axis {axis} ({expected}); got {count}"
    ),
    "zps-count": "zps must have as many elements as scales ({expected}); got {count}",
    "group-shape-rank": "group_shape must have one entry per src dim ({rank}); got {count}",
    "group-shape-value": "group_shape[{index}] = {value} must be positive",
    "group-scales-rank": "per_group needs scales of src's rank ({rank}); got rank {got}",
    "group-divides": (
        "src dim {dim} ({src}) must equal scales dim {dim} ({scales}) times group_shape[{dim}] "
        "({group})"
    ),
    "group-zps-shape": "zps must have the shape of scales {expected}; got {got}",
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
    "attribute-kind": "attribute '{name}' must be of kind {kind}",
    "output-type": (
        "output type {got} differs from the dst type {dst} of the node's attributes and inputs"
    ),
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


def resolve_axis(axis: int, rank: int) -> int | None:
    """The non-negative axis, or None when it is outside [-rank, rank-1]."""
    if -rank <= axis < rank:
        return axis + rank if axis < 0 else axis
    return None


DEFAULT_QUANTIZED = dtypes.U8  # a quantize op's dst when nothing else decides (ONNX's too)
DST_FROM_ZPS = (dtypes.S8, dtypes.U8)  # zps types that decide a dynamic quantize op's dst


def dst_type(
    op: OpSpec,
    *,
    output_dtype: int = 0,
    zps: int | None = None,
    declared: int | None = None,
    scales: int | None = None,
) -> int:
    """The ONNX element type of ``op``'s dst: the one rule every component asks.

    Dequantize ops: the type of the ``scales`` input where it is one of the dst types (f32,
    f16, bf16: "the data types of scales and dst should be the same"), else f32. Quantize ops:
    ``output_dtype`` when set (quantgraph's extension, as ONNX QuantizeLinear-21); else the zps
    input's type when it is s8/u8 (dynamic ops); else the ``declared`` type of the output where
    the caller knows it (the seed: "the target quantized data type is specified via the data
    type of output logical tensor"); else u8.
    """
    if not op.is_quantize:
        chosen = dtypes.from_onnx(scales) if scales else None
        return chosen.onnx if chosen in DEQUANTIZED and not op.is_static else dtypes.F32.onnx
    if output_dtype:
        return int(output_dtype)
    if not op.is_static and zps is not None and zps in (d.onnx for d in DST_FROM_ZPS):
        return int(zps)
    if declared:
        return int(declared)
    return DEFAULT_QUANTIZED.onnx


@dataclass(frozen=True)
class NodeFacts:
    """What is known about one node or call. ``None`` where it is not known: the rules that
    need it pass (a kernel checks them again with the run-time values).

    ``attributes`` as the node has them (defaults are applied here); element types as ONNX
    enums; ``has_scales``/``has_zps`` whether a dynamic op's optional inputs are present.
    """

    attributes: Mapping[str, object] = field(default_factory=dict)
    src: int | None = None
    scales: int | None = None
    zps: int | None = None
    has_scales: bool = True
    has_zps: bool = False
    declared_dst: int | None = None
    src_shape: Sequence[int | None] | None = None
    scales_shape: Sequence[int | None] | None = None
    zps_shape: Sequence[int | None] | None = None
    scale_values: np.ndarray | None = None  # a dynamic op's constant scales


@dataclass(frozen=True)
class CheckedNode:
    """A node that passed every rule its facts allow checking."""

    dst: int  # dst element type (ONNX enum)
    qtype: str
    axis: int | None  # resolved per_channel axis; None for per_tensor or an unknown rank


def _names(types: Sequence[DType]) -> str:
    return ", ".join(t.name for t in types)


def check_qtype(op: OpSpec, node: str, qtype: str) -> None:
    if qtype not in op.qtypes:
        raise SpecError(op.name, node, "qtype", qtype=qtype, allowed=", ".join(op.qtypes))


def check_types(
    op: OpSpec, node: str, types: Mapping[str, int | None], *, unknown: Collection[str] = ()
) -> None:
    """Check element types (ONNX enums: src, dst, scales, zps) against the data-type table.

    A dynamic op without scales (None) is the missing-input rule; an absent zps is fine.
    Inputs named in ``unknown`` are present but of a type nobody knows yet: not checked.
    """
    src = _check_one(op, node, "src-type", types["src"], op.src_types)
    rows = op.rows_for_src(src)
    dst = _check_one(op, node, "dst-type", types["dst"], tuple(r.dst for r in rows))
    rows = tuple(r for r in rows if r.dst == dst)
    if op.is_static:
        return
    if "scales" not in unknown:
        if types.get("scales") is None:
            raise SpecError(op.name, node, "missing-input", name="scales")
        allowed_scales = tuple(dict.fromkeys(r.scales for r in rows if r.scales is not None))
        _check_one(op, node, "scales-type", types["scales"], allowed_scales)
    if types.get("zps") is not None and "zps" not in unknown:
        _check_one(op, node, "zps-type", types["zps"], rows[0].zps)


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
    group_shape: Sequence[int] | None = None,
) -> int | None:
    """Check scale/zero-point counts against src; returns the resolved axis for per_channel.

    Unknown dims (None) pass: the kernel checks them again at run time.
    """
    check_qtype(op, node, qtype)
    if qtype == PER_GROUP:
        _check_groups(op, node, src_shape, scales_shape, zps_shape, group_shape)
        return None
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


def _check_groups(
    op: OpSpec,
    node: str,
    src_shape: Sequence[int | None],
    scales_shape: Sequence[int | None],
    zps_shape: Sequence[int | None] | None,
    group_shape: Sequence[int] | None,
) -> None:
    """per_group: scales (and zps) of src's rank, each src dim = scales dim x group dim."""
    if group_shape is None:
        raise SpecError(op.name, node, "missing-attribute", name="group_shape")
    rank = len(src_shape)
    if len(group_shape) != rank:
        raise SpecError(op.name, node, "group-shape-rank", rank=rank, count=len(group_shape))
    for index, value in enumerate(group_shape):
        if int(value) < 1:
            raise SpecError(op.name, node, "group-shape-value", index=index, value=int(value))
    if len(scales_shape) != rank:
        raise SpecError(op.name, node, "group-scales-rank", rank=rank, got=len(scales_shape))
    for dim, (src, scales, group) in enumerate(
        zip(src_shape, scales_shape, group_shape, strict=True)
    ):
        if src is not None and scales is not None and src != scales * int(group):
            raise SpecError(
                op.name, node, "group-divides", dim=dim, src=src, scales=scales, group=int(group)
            )
    if zps_shape is not None:
        known = all(d is not None for d in (*zps_shape, *scales_shape))
        if len(zps_shape) != rank or (known and list(zps_shape) != list(scales_shape)):
            raise SpecError(
                op.name, node, "group-zps-shape", expected=list(scales_shape), got=list(zps_shape)
            )


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


def check_node(op: OpSpec, node: str, facts: NodeFacts) -> CheckedNode:
    """Every rule of the spec that ``facts`` allow checking, in one order for every component
    (the C++ kernels follow it too): static attributes, missing scales, types, float8 zps,
    qtype and shapes, scale values. The first broken rule is raised as :class:`SpecError`.
    """
    check_attribute_kinds(op, node, facts.attributes)
    attributes = op.with_defaults(facts.attributes)
    qtype = _text(attributes["qtype"])
    axis = int(attributes["axis"])  # type: ignore[call-overload]
    output_dtype = int(attributes.get("output_dtype", 0))  # type: ignore[call-overload]
    dst = dst_type(
        op,
        output_dtype=output_dtype,
        zps=facts.zps,
        declared=facts.declared_dst,
        scales=facts.scales,
    )
    group_shape = attributes.get("group_shape")
    scales_shape, zps_shape = facts.scales_shape, facts.zps_shape
    scale_values = facts.scale_values
    has_zps = facts.has_zps
    if op.is_static:
        scales = attributes.get("scales")
        zps = attributes.get("zps")
        checked = dtypes.from_onnx(dst if op.is_quantize else (facts.src or 0))
        check_static_attributes(op, node, scales, zps, checked or dtypes.S8)  # type: ignore[arg-type]
        assert isinstance(scales, Sequence)
        scales_shape = [len(scales)]
        zps_shape = [len(zps)] if isinstance(zps, Sequence) else None
        scale_values = np.asarray(scales, np.float32)
        has_zps = zps is not None
    elif not facts.has_scales:
        raise SpecError(op.name, node, "missing-input", name="scales")
    if facts.src is not None:
        types = {"src": facts.src, "dst": dst, "scales": facts.scales, "zps": facts.zps}
        unknown = [n for n in ("scales", "zps") if getattr(facts, f"has_{n}") and types[n] is None]
        check_types(op, node, types, unknown=unknown)
    float8 = dtypes.from_onnx(dst if op.is_quantize else (facts.src or 0))
    if has_zps and float8 is not None and float8.is_float8:
        raise SpecError(op.name, node, "f8-zps", dtype=float8.name)
    check_qtype(op, node, qtype)
    resolved = None
    if scales_shape is not None and (qtype == PER_TENSOR or facts.src_shape is not None):
        resolved = check_shapes(
            op,
            node,
            qtype=qtype,
            axis=axis,
            src_shape=facts.src_shape or (),
            scales_shape=scales_shape,
            zps_shape=zps_shape,
            group_shape=list(group_shape) if group_shape is not None else None,  # type: ignore[call-overload]
        )
    if scale_values is not None:
        check_scale_values(op, node, scale_values)
    if facts.declared_dst and facts.declared_dst != dst:
        got, want = dtypes.onnx_name(facts.declared_dst), dtypes.onnx_name(dst)
        raise SpecError(op.name, node, "output-type", got=got, dst=want)
    return CheckedNode(dst, qtype, resolved)


_KINDS: dict[str, Callable[[object], bool]] = {
    "int": lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, (str, bytes)),
    "floats": lambda v: (
        isinstance(v, (list, tuple, np.ndarray))
        and all(isinstance(x, (float, int, np.floating, np.integer)) for x in v)
    ),
    "ints": lambda v: (
        isinstance(v, (list, tuple, np.ndarray))
        and all(isinstance(x, (int, np.integer)) for x in v)
    ),
}


def check_attribute_kinds(op: OpSpec, node: str, attributes: Mapping[str, object]) -> None:
    """Each attribute the op defines, where given, is of its ONNX kind (int, string, ...)."""
    for attribute in op.attributes:
        value = attributes.get(attribute.name)
        if value is not None and not _KINDS[attribute.kind](value):
            raise SpecError(
                op.name, node, "attribute-kind", name=attribute.name, kind=attribute.kind
            )


def check_call(
    op: OpSpec,
    node: str,
    *,
    src: np.ndarray,
    scales: np.ndarray | None,
    zps: np.ndarray | None,
    attributes: Mapping[str, object],
) -> CheckedNode:
    """All rules for one concrete call of a dynamic op (what a kernel checks before computing);
    static ops: ``scales``/``zps`` None, their attributes in ``attributes``."""
    facts = NodeFacts(
        attributes=attributes,
        src=dtypes.onnx_of_numpy(src.dtype),
        scales=None if scales is None else dtypes.onnx_of_numpy(scales.dtype),
        zps=None if zps is None else dtypes.onnx_of_numpy(zps.dtype),
        has_scales=scales is not None,
        has_zps=zps is not None,
        src_shape=src.shape,
        scales_shape=None if scales is None else scales.shape,
        zps_shape=None if zps is None else zps.shape,
        scale_values=scales,
    )
    return check_node(op, node, facts)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = [
    "DEFAULT_QUANTIZED",
    "DST_FROM_ZPS",
    "RULES",
    "CheckedNode",
    "NodeFacts",
    "SpecError",
    "dst_type",
    "resolve_axis",
    "check_qtype",
    "check_types",
    "check_shapes",
    "check_scale_values",
    "check_static_attributes",
    "check_call",
    "check_node",
    "check_attribute_kinds",
    "PER_CHANNEL",
    "PER_TENSOR",
]
