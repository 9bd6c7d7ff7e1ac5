"""The way back: quantgraph's ops  ->  standard QuantizeLinear / DequantizeLinear.

DynamicQuantize(x, s, zp)      ->  QuantizeLinear(x, s', zp')      axis when per_channel
DynamicDequantize(q, s, zp)    ->  DequantizeLinear(q, s', zp')
Quantize(x){scales, zps}       ->  QuantizeLinear(x, scales_const, zps_const)
Dequantize(q){scales, zps}     ->  DequantizeLinear(q, scales_const, zps_const)

ONNX wants a scalar scale for per-tensor and a zero point of the quantized type; a one-element
s' becomes a scalar, and a zero point of another type (s32) is cast when it is a constant that
fits. What ONNX cannot express is left as is and reported.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node, typed_fields, typed_tensor
from ...ir.values import constant_array, elem_type, optional_input, value_shape
from ...ir.walk import GraphLike, all_graphs, opset_version, spec_op
from ...spec import DOMAIN, PER_CHANNEL, PER_GROUP, PER_TENSOR, dst_type, dtypes
from ..node_rewrite import NodeRewritePass
from ..report import RewriteReport, Skip
from .qdq_plans import CONTRIB_DOMAIN
from .qdq_to_spec import ORIGIN

FLOAT8_OPSET = 19  # ONNX Q/DQ learn float8 types in opset 19
SCALE_TYPES_OPSET = 19  # ... float16/bfloat16 scales in 19
PER_AXIS_OPSET = 13
_1D = "_1d"  # the suffix of ConstantFactory.constant_1d's names
BLOCKED_OPSET = INT4_OPSET = 21  # block_size and int4/uint4 in 21


class SpecToQdqPass(NodeRewritePass):
    """Rewrites quantgraph ops in every graph, subgraph and function into ONNX Q/DQ."""

    def matches(self, node: ir.Node) -> bool:
        return node.domain == DOMAIN

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        # Only our own import goes: onnx-ir's RemoveUnusedOpsetsPass would also drop unused
        # imports the user had, and everything outside the rewritten nodes stays as it was.
        if report.converted_nodes and not report.skipped:
            still_used = any(n.domain == DOMAIN for g in all_graphs(model) for n in g)
            if not still_used:
                model.opset_imports.pop(DOMAIN, None)
                for function in model.functions.values():
                    function.opset_imports.pop(DOMAIN, None)

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        op = spec_op(node)
        if op is None:
            raise Skip("unknown-op", f"unknown quantgraph op {node.op_type}")
        attributes = op.with_defaults({name: a.value for name, a in node.attributes.items()})
        qtype, axis = str(attributes["qtype"]), int(attributes["axis"])  # type: ignore[call-overload]
        block: int | None = None
        kept = False  # a one-element 1-D scale given back as it was (see below)
        if qtype == PER_GROUP:
            axis, block = _blocks(attributes.get("group_shape"))
        source = node.inputs[0]
        if source is None:
            raise Skip("missing-input", "src is missing")
        source_type = elem_type(source)

        # Everything that can skip the node is decided before a constant or Reshape is made:
        # a skipped node leaves the graph as it was.
        if not op.is_static:
            scale = optional_input(node, 1)
            zero_point = optional_input(node, 2)
            if scale is None:
                raise Skip("missing-input", "scales input is missing")
            zp_raw = elem_type(zero_point)
            zp_type = int(zp_raw) if zp_raw is not None else None
            if op.is_quantize:
                output_dtype = int(attributes.get("output_dtype", 0))  # type: ignore[call-overload]
                quant = dtypes.from_onnx(dst_type(op, output_dtype=output_dtype, zps=zp_type))
            else:
                known = source_type if source_type is not None else zp_type
                quant = dtypes.from_onnx(int(known)) if known is not None else None
            scale_raw = elem_type(scale)
            scale_type = int(scale_raw) if scale_raw is not None else dtypes.F32.onnx
            domain = self._domain(model, graph, node, quant, qtype, scale_type)
            assert quant is not None
            # The original's own one-element 1-D scale (and zero point) on an axis of size 1
            # (a per-channel weight with one output channel) goes back as it was.
            kept = qtype == PER_TENSOR and _one_channel(scale, source, axis)
            if kept and zero_point is not None:
                kept = elem_type(zero_point) == quant.onnx and _one_channel(
                    zero_point, source, axis
                )
            zp_in = self._zero_point(
                node, zero_point, quant, PER_CHANNEL if kept else qtype, scale, factory
            )
            scale_in = (
                scale if qtype != PER_TENSOR or kept else self._as_scalar(node, scale, factory)
            )
        else:
            scales = node.attributes.get_floats("scales")
            if scales is None:
                raise Skip("missing-input", "attribute scales is missing")
            zps = node.attributes.get_ints("zps")
            if op.is_quantize:
                output_dtype = int(attributes.get("output_dtype", 0))  # type: ignore[call-overload]
                quant = dtypes.from_onnx(dst_type(op, output_dtype=output_dtype))
            else:
                quant = dtypes.from_onnx(int(source_type)) if source_type is not None else None
            scale_type = dtypes.F32.onnx
            domain = self._domain(model, graph, node, quant, qtype, scale_type)
            assert quant is not None
            zp_values = np.asarray(zps if zps is not None else np.zeros(len(scales)), np.int64)
            zp_array = self._fit(zp_values, quant, qtype)
            scale_array = np.asarray(scales, np.float32)
            if qtype == PER_TENSOR:
                scale_array = scale_array.reshape(())
            base = node.name or node.op_type
            scale_in = factory.constant(f"{base}_scale", scale_array, node)
            zp_in = factory.constant(f"{base}_zero_point", zp_array, node)

        attrs: list[ir.Attr] = []
        if qtype in (PER_CHANNEL, PER_GROUP) or (kept and axis != 1):
            attrs.append(ir.AttrInt64("axis", axis))
        if block is not None:
            attrs.append(ir.AttrInt64("block_size", block))
        op_type = "QuantizeLinear" if op.is_quantize else "DequantizeLinear"
        inputs: list[ir.Value | None] = [source, scale_in, zp_in]
        if domain:
            model.opset_imports.setdefault(domain, 1)
            if isinstance(graph, ir.Function):
                graph.opset_imports.setdefault(domain, 1)
        node.metadata_props.pop(ORIGIN, None)
        self.stale += replace_node(
            node,
            (domain, op_type, None),
            inputs if zp_in is not None else inputs[:2],
            attrs,
            ir.DataType(dst_type(op, output_dtype=quant.onnx, scales=scale_type)),
        )
        where = {PER_CHANNEL: f"axis {axis}", PER_GROUP: f"axis {axis}, block_size {block}"}
        origin = f", {domain}" if domain else ""
        return op_type, f"{quant.name}, " + where.get(qtype, "per_tensor") + origin

    @staticmethod
    def _domain(
        model: ir.Model,
        graph: GraphLike,
        node: ir.Node,
        quant: dtypes.DType | None,
        qtype: str,
        scales: int,
    ) -> str:
        """The domain of the Q/DQ to write: ONNX's where its opset can express the node, else
        com.microsoft's (per-axis and f16 scales below their ONNX opsets; what models quantized
        with UseQDQContribOps have); a node converted from com.microsoft goes back there."""
        if quant is None:
            raise Skip("quantized-type", "the quantized type is unknown")
        opset = opset_version(model, graph) or 0
        needs = [
            (quant.bits == 4, INT4_OPSET, "4-bit Q/DQ"),
            (qtype == PER_GROUP, BLOCKED_OPSET, "blocked Q/DQ (block_size)"),
            (scales != dtypes.F32.onnx, SCALE_TYPES_OPSET, f"{dtypes.onnx_name(scales)} scales"),
            (quant.is_float8, FLOAT8_OPSET, "float8 Q/DQ"),
            (qtype == PER_CHANNEL, PER_AXIS_OPSET, "per-axis Q/DQ"),
        ]
        missing = [(version, what) for needed, version, what in needs if needed and opset < version]
        contrib_ok = (
            qtype != PER_GROUP
            and not quant.is_float8
            and scales in (dtypes.F32.onnx, dtypes.F16.onnx)
        )
        if node.metadata_props.get(ORIGIN) == CONTRIB_DOMAIN and contrib_ok:
            return CONTRIB_DOMAIN
        if not missing:
            return ""
        if contrib_ok:
            return CONTRIB_DOMAIN
        version, what = missing[0]
        raise Skip(
            "opset",
            f"{what} needs opset >= {version}; the model has {opset} (and com.microsoft Q/DQ "
            "has no such form)",
        )

    @staticmethod
    def _fit(values: np.ndarray, quant: dtypes.DType, qtype: str) -> np.ndarray:
        shape: tuple[int, ...] = (
            values.shape if qtype == PER_GROUP else () if qtype == PER_TENSOR else (values.size,)
        )
        if quant.is_float8:
            if np.any(values):
                raise Skip("float8-zero-point", "float8 zero points must be zero")
            return np.zeros(shape, quant.numpy)
        low, high = quant.int_range
        if np.any(values < low) or np.any(values > high):
            raise Skip(
                "zero-point-range",
                f"zero points {values.tolist()} do not fit {quant.name}, ONNX's zp type",
            )
        return values.reshape(shape).astype(quant.numpy)

    def _zero_point(
        self,
        node: ir.Node,
        zero_point: ir.Value | None,
        quant: dtypes.DType,
        qtype: str,
        scale: ir.Value,
        factory: ConstantFactory,
    ) -> ir.Value | None:
        base = node.name or node.op_type
        if zero_point is None and qtype == PER_GROUP:
            return None  # ONNX's zero point is optional; blocked ones would need src's rank
        if zero_point is None:
            count = 1
            if qtype == PER_CHANNEL:
                shape = scale.shape
                if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
                    raise Skip("unknown-shape", "no zps and the channel count is unknown")
                count = shape[0]
            zeros = self._fit(np.zeros(count, np.int64), quant, qtype)
            return factory.constant(f"{base}_zero_point", zeros, node, like=scale)
        if elem_type(zero_point) == quant.onnx and qtype in (PER_CHANNEL, PER_GROUP):
            return zero_point
        if elem_type(zero_point) == quant.onnx:
            return self._as_scalar(node, zero_point, factory)
        values = constant_array(zero_point)
        if values is None:
            raise Skip(
                "runtime-zero-point",
                f"zps of type {dtypes.onnx_name(int(elem_type(zero_point) or 0))} computed at "
                f"run time cannot become an ONNX zero point of type {quant.name}",
            )
        zps = self._fit(values.astype(np.int64), quant, qtype)
        return factory.constant(f"{base}_zero_point", zps, node, like=zero_point)

    @staticmethod
    def _as_scalar(node: ir.Node, value: ir.Value, factory: ConstantFactory) -> ir.Value:
        array = constant_array(value)
        if array is not None:
            # A scalar that conversion made 1-D ("<name>_1d") gets its own name back.
            name = value.name or "scale"
            base = name[: -len(_1D)] if name.endswith(_1D) else f"{name}_scalar"
            scalar = array.reshape(())
            tensor = typed_tensor(scalar, elem_type(value)) if typed_fields(value) else None  # type: ignore[arg-type]
            return factory.constant(base, scalar, node, like=value, tensor=tensor)
        return factory.reshaped(value, [], node, "scalar")


def _one_channel(value: ir.Value, source: ir.Value, axis: int) -> bool:
    """``value`` is a one-element 1-D constant the original had (conversion's own copies are
    named "<name>_1d") and ``source``'s dimension ``axis`` is 1: ONNX reads it per-axis, the
    same values as per-tensor."""
    array = constant_array(value)
    shape = value_shape(source)
    if array is None or array.shape != (1,) or (value.name or "").endswith(_1D) or not shape:
        return False
    return -len(shape) <= axis < len(shape) and shape[axis] == 1


def _blocks(group_shape: object) -> tuple[int, int]:
    """(axis, block_size) of a group_shape that groups along one axis, as ONNX's blocks do."""
    groups = [int(g) for g in group_shape] if isinstance(group_shape, (list, tuple)) else []
    if not groups:
        raise Skip("blocks", "per_group without group_shape")
    grouped = [axis for axis, size in enumerate(groups) if size != 1]
    if len(grouped) > 1:
        raise Skip(
            "blocks", f"group_shape {groups} groups along several axes; ONNX blocks along one"
        )
    axis = grouped[0] if grouped else 0
    return axis, groups[axis]
