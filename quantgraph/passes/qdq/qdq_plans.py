"""What the Q/DQ rewrite (:mod:`.qdq_to_spec`) makes of a node: its plan in spec terms, the
spec op that plan makes, and the key by which nodes alike share both (100k Q/DQ nodes of one
scale make two kinds: planned once each)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import onnx_ir as ir

from ...ir.values import Shape
from ...ir.walk import GraphLike
from ...spec import DEQUANTIZE, PER_CHANNEL, PER_GROUP, QUANTIZE, dtypes

CONTRIB_DOMAIN = "com.microsoft"


@dataclass(slots=True)  # made once a node: a frozen dataclass's __init__ is 3x slower
class Plan:
    """What one Q/DQ node means in spec terms."""

    quantize: bool
    qtype: str
    axis: int
    quant_type: dtypes.DType
    scale: ir.Value
    zero_point: ir.Value | None
    count: int | None  # number of scales, when known
    scale_shape: Shape  # declared or inferred; the zero point's too (ONNX ties them)
    scale_type: dtypes.DType = dtypes.F32  # a dequantize op's dst type too
    group_shape: tuple[int, ...] | None = None  # per_group (ONNX block_size)
    contrib: bool = False
    padded: tuple[int, int] | None = None  # a short last block: (extent, padded extent)

    @property
    def detail(self) -> str:
        return plan_detail(
            self.qtype,
            self.axis,
            self.group_shape,
            self.scale_type.name,
            self.quant_type.name,
            self.padded,
            self.contrib,
        )

    @property
    def static_form_exists(self) -> bool:
        """Static Quantize/Dequantize have f32 scales, 8-bit and f8 types, no groups."""
        static = QUANTIZE if self.quantize else DEQUANTIZE
        types = static.dst_types if self.quantize else static.src_types
        return (
            self.quant_type in types and self.scale_type == dtypes.F32 and self.qtype != PER_GROUP
        )


@dataclass(slots=True)
class Replacement:
    """The spec op a plan makes of its nodes in one graph (nothing here is changed once made:
    nodes alike share it)."""

    op_type: str
    operands: list[ir.Value | None]  # the inputs after src
    attributes: list[ir.Attr]
    static: bool


@functools.lru_cache(maxsize=1024)
def plan_detail(
    qtype: str,
    axis: int,
    group_shape: tuple[int, ...] | None,
    scale_type: str,
    quant_type: str,
    padded: tuple[int, int] | None,
    contrib: bool,
) -> str:
    """The report's detail of a plan (one string for every node alike: 100k nodes make a
    handful of distinct ones)."""
    where = {
        PER_CHANNEL: f"axis {axis}",
        PER_GROUP: f"per_group {list(group_shape or ())}",
    }.get(qtype, "per_tensor")
    scales = "" if scale_type == dtypes.F32.name else f", {scale_type} scales"
    sliced = f", last block padded {padded[0]} -> {padded[1]} and sliced" if padded else ""
    return f"{quant_type}, {where}{scales}{sliced}" + (
        f", from {CONTRIB_DOMAIN}" if contrib else ""
    )


def plan_key(graph: GraphLike, node: ir.Node) -> tuple[object, ...] | None:
    """Everything :meth:`QdqToSpecPass._plan` reads of ``node``, as a dict key: nodes alike
    (100k Q/DQ of one scale make two kinds) share one plan, made once; the plan of a node that
    does not convert is never kept (its Skip is raised again for each). None where the plan
    reads more: a blocked node (src's shape, the node's meta), src of no declared type (ONNX's
    shape inference), an attribute not an int (never a valid Q/DQ one), an input missing."""
    inputs = node.inputs
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        return None
    source_type = inputs[0].dtype
    if source_type is None:
        return None
    attributes: tuple[tuple[str, object], ...] = ()
    if node.attributes:
        if "block_size" in node.attributes:
            return None
        attributes = tuple((name, a.value) for name, a in node.attributes.items())
        if not all(isinstance(value, int) for _, value in attributes):
            return None
    scale = inputs[1]
    zero_point = inputs[2] if len(inputs) > 2 else None
    zero_type = zero_point.dtype if zero_point is not None else None
    # graph: the opset its nodes run at; the values: their shapes and constants, by identity
    # (no pass changes them), and their types, which a static rewrite may declare
    return (
        node.op_type,
        node.domain,
        len(inputs),
        attributes,
        graph,
        source_type,
        scale,
        scale.dtype,
        zero_point,
        zero_type,
    )


__all__ = ["CONTRIB_DOMAIN", "Plan", "Replacement", "plan_detail", "plan_key"]
