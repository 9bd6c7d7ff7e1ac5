"""Weight-only Cast x scale: a constant s8/u8/s4/u4 initializer -> Cast(to=float/float16)
[-> Sub(zero point)] -> Mul(scale)  ->  DynamicDequantize(per_tensor or per_channel).

What exporters and hand-quantizers write when they store a weight as integers and dequantize it
with standard ops (no DequantizeLinear). Exact: Cast of a small integer is exact in float16 and
float32, so is the Sub of two of them, and the Mul is the spec's single multiply: the spec's
(q - zp) * s is Cast -> Sub -> Mul bit for bit.

Matched strictly (anything else is a float computation, left alone without a report entry): the
Cast's input is a constant of a 4/8-bit integer type; the zero point, when there is a Sub, is a
constant of the Cast's type holding integers of the source type's range, subtracted from the
Cast; the scale is a constant of the Cast's type, one value or one non-1 dim that broadcasts
along one axis of the weight without changing its shape; each intermediate has one user.

The DynamicDequantize takes the Mul's place (name, output) and records the original chain in
its metadata (``quantgraph.cast_scale``): :class:`RestoreCastScalePass` gives Cast/Sub/Mul
back with the same names, attributes and initializer bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array, elem_type
from ...ir.walk import GraphLike, is_standard, only_user
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE, OPSET_VERSION, PER_CHANNEL, PER_TENSOR
from ..node_rewrite import NodeRewritePass, import_spec_domain
from ..report import RewriteReport

RECORD = "quantgraph.cast_scale"  # node metadata: JSON of what lowering needs
_SOURCES = {
    ir.DataType.INT8: (-128, 127),
    ir.DataType.UINT8: (0, 255),
    ir.DataType.INT4: (-8, 7),
    ir.DataType.UINT4: (0, 15),
}
_TARGETS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
_CAST_ATTRIBUTES = {"to", "saturate"}


@dataclass
class Chain:
    """One matched Cast [-> Sub] -> Mul and what the DynamicDequantize needs."""

    cast: ir.Node
    sub: ir.Node | None
    mul: ir.Node
    source: ir.Value
    scale: ir.Value
    zero_point: ir.Value | None
    axis: int | None  # None: per_tensor
    scales: np.ndarray  # 1-D, of the Cast's type
    zps: np.ndarray | None  # 1-D, of the source's type


def _axis_of(shape: tuple[int, ...], weight: tuple[int, ...]) -> tuple[bool, int | None]:
    """(broadcasts along at most one axis of ``weight`` without changing its shape, that axis)."""
    if len(shape) > len(weight):
        return False, None
    padded = (1,) * (len(weight) - len(shape)) + shape
    axes = [d for d, size in enumerate(padded) if size != 1]
    if len(axes) > 1 or any(padded[d] != weight[d] for d in axes):
        return False, None
    return True, axes[0] if axes else None


def match(cast: ir.Node) -> Chain | None:
    """The chain starting at ``cast``, or None when it is not exactly the weight-only form."""
    if not is_standard(cast) or cast.op_type != "Cast" or len(cast.inputs) != 1:
        return None
    if set(cast.attributes) - _CAST_ATTRIBUTES or "to" not in cast.attributes:
        return None
    target = ir.DataType(cast.attributes.get_int("to", 0))
    source = cast.inputs[0]
    source_type = elem_type(source)
    if target not in _TARGETS or source_type not in _SOURCES:
        return None
    weight = constant_array(source)
    if source is None or weight is None or weight.ndim == 0:
        return None
    user = only_user(cast.outputs[0])
    sub: ir.Node | None = None
    zero_point: ir.Value | None = None
    if user is not None and is_standard(user) and user.op_type == "Sub":
        if len(user.inputs) != 2 or user.inputs[0] is not cast.outputs[0]:
            return None
        sub, zero_point = user, user.inputs[1]
        user = only_user(user.outputs[0])
    last = (sub or cast).outputs[0]
    if user is None or not is_standard(user) or user.op_type != "Mul" or len(user.inputs) != 2:
        return None
    scale = user.inputs[1] if user.inputs[0] is last else user.inputs[0]
    if scale is None or scale is last or elem_type(scale) != target:
        return None
    scales = constant_array(scale)
    if scales is None or not np.all(np.isfinite(scales.astype(np.float32))):
        return None
    fits, axis = _axis_of(scales.shape, weight.shape)
    if not fits:
        return None
    zps: np.ndarray | None = None
    if zero_point is not None:
        zps = _integer_zero_point(zero_point, target, source_type)
        if zps is None:
            return None
        zp_fits, zp_axis = _axis_of(zps.shape, weight.shape)
        if not zp_fits or (axis is not None and zp_axis is not None and zp_axis != axis):
            return None
        axis = axis if axis is not None else zp_axis
    length = 1 if axis is None else weight.shape[axis]
    flat_scales = np.broadcast_to(scales.reshape(-1), (length,)).copy()
    flat_zps = None if zps is None else np.broadcast_to(zps.reshape(-1), (length,)).copy()
    return Chain(cast, sub, user, source, scale, zero_point, axis, flat_scales, flat_zps)


def _integer_zero_point(
    value: ir.Value | None, target: ir.DataType, source_type: ir.DataType
) -> np.ndarray | None:
    """The zero point as an array of the source's type, or None: a constant of the Cast's type
    holding integers of the source's range (what makes Cast -> Sub exact)."""
    array = constant_array(value)
    if value is None or array is None or elem_type(value) != target:
        return None
    wide = array.astype(np.float64)
    low, high = _SOURCES[source_type]
    if not np.all(np.isfinite(wide)) or np.any(wide != np.round(wide)):
        return None
    if np.any((wide < low) | (wide > high)):
        return None
    return wide.astype(np.int64).astype(source_type.numpy())


def is_cast_scale(node: ir.Node) -> bool:
    """Whether ``node`` starts a weight-only Cast x scale chain (a quantized weight)."""
    return node.op_type == "Cast" and match(node) is not None


class CastScalePass(NodeRewritePass):
    """Rewrites each matched Cast [-> Sub] -> Mul into a DynamicDequantize."""

    op_types = frozenset({"Cast"})

    def matches(self, node: ir.Node) -> bool:
        return is_standard(node) and node.op_type == "Cast"

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        import_spec_domain(model, report, ("Cast",))

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        chain = match(node)
        if chain is None:
            return None
        mul, sub = chain.mul, chain.sub
        record = {
            "cast": [node.name or "", node.outputs[0].name or "", _attributes(node)],
            "sub": None if sub is None else [sub.name or "", sub.outputs[0].name or ""],
            "mul": [mul.inputs[1] is chain.scale],  # the scale is Mul's second input
            "scale": [chain.scale.name, list(constant_array(chain.scale).shape)],  # type: ignore[union-attr]
            "zero_point": None
            if chain.zero_point is None
            else [chain.zero_point.name, list(constant_array(chain.zero_point).shape)],  # type: ignore[union-attr]
            "versions": [node.version, None if sub is None else sub.version, mul.version],
        }
        inputs: list[ir.Value | None] = [
            chain.source,
            _one_dim(factory, chain.scale, chain.scales, mul),
        ]
        if chain.zps is not None and chain.zero_point is not None:
            inputs.append(_one_dim(factory, chain.zero_point, chain.zps, mul))
        attributes: list[ir.Attr] = [
            ir.AttrString("qtype", PER_TENSOR if chain.axis is None else PER_CHANNEL)
        ]
        if chain.axis is not None:
            attributes.append(ir.AttrInt64("axis", chain.axis))
        target = ir.DataType(node.attributes.get_int("to", 0))
        self.stale += list(mul.inputs) + ([] if sub is None else list(sub.inputs))
        replace_node(
            mul, (DOMAIN, DYNAMIC_DEQUANTIZE.name, OPSET_VERSION), inputs, attributes, target
        )
        mul.metadata_props[RECORD] = json.dumps(record, sort_keys=True)
        for dead in (sub, node):  # users first
            if dead is not None:
                graph.remove(dead, safe=True)
        source_type = elem_type(chain.source)
        kind = {"INT8": "s8", "UINT8": "u8", "INT4": "s4", "UINT4": "u4"}[source_type.name]  # type: ignore[union-attr]
        qtype = PER_TENSOR if chain.axis is None else f"{PER_CHANNEL} axis {chain.axis}"
        zp = ", zero point" if chain.zps is not None else ""
        float_name = "f32" if target == ir.DataType.FLOAT else "f16"
        return DYNAMIC_DEQUANTIZE.name, f"Cast x scale weight: {kind}, {qtype}, {float_name}{zp}"


def _attributes(node: ir.Node) -> list[list[object]]:
    return [[name, node.attributes.get_int(name, 0)] for name in node.attributes]


def _one_dim(
    factory: ConstantFactory, value: ir.Value, array: np.ndarray, before: ir.Node
) -> ir.Value:
    """``value`` itself when it already is ``array`` (1-D, same type), else a new constant."""
    current = constant_array(value)
    if current is not None and current.shape == array.shape and current.dtype == array.dtype:
        return value
    return factory.constant(f"{value.name}_1d", array, before, like=value)
