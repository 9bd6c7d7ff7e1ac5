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

from ..spec import DOMAIN, PER_CHANNEL, PER_TENSOR, default_output_dtype, dtypes
from ._graph import (
    ConstantFactory,
    GraphLike,
    all_graphs,
    constant_array,
    elem_type,
    opset_version,
    remove_if_unused,
    replace_node,
    used_names,
)
from .qdq_to_spec import RewriteResult, Skip
from .report import ConvertedNode, RewriteReport, SkippedNode

FLOAT8_OPSET = 19  # ONNX Q/DQ learn float8 types in opset 19
PER_AXIS_OPSET = 13


class SpecToQdqPass(ir.passes.InPlacePass):
    """Rewrites quantgraph ops in every graph, subgraph and function into ONNX Q/DQ."""

    def call(self, model: ir.Model) -> RewriteResult:
        self._stale: list[ir.Value | None] = []
        report = RewriteReport()
        taken = used_names(model)
        for graph in list(all_graphs(model)):
            factory = ConstantFactory(graph, graph is model.graph, taken)
            where = "" if graph is model.graph else (graph.name or "")
            for node in list(graph):
                if node.domain != DOMAIN:
                    continue
                op_type = node.op_type  # the rewrite changes the node in place
                try:
                    new_op, detail = self._lower(model, graph, node, factory)
                except Skip as reason:
                    report.skipped.append(
                        SkippedNode(node.name or "", node.op_type, str(reason), where)
                    )
                    continue
                report.converted_nodes.append(
                    ConvertedNode(node.name or "", op_type, new_op, detail, where)
                )
        if report.converted_nodes and not report.skipped:
            still_used = any(n.domain == DOMAIN for g in all_graphs(model) for n in g)
            if not still_used:
                model.opset_imports.pop(DOMAIN, None)
                for function in model.functions.values():
                    function.opset_imports.pop(DOMAIN, None)
        remove_if_unused(self._stale)
        return RewriteResult(model, modified=bool(report.converted_nodes), report=report)

    def _lower(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        quantize = node.op_type in ("DynamicQuantize", "Quantize")
        if node.op_type not in ("DynamicQuantize", "DynamicDequantize", "Quantize", "Dequantize"):
            raise Skip(f"unknown quantgraph op {node.op_type}")
        qtype = node.attributes.get_string("qtype", PER_TENSOR)
        axis = node.attributes.get_int("axis", 1)
        source = node.inputs[0]
        if source is None:
            raise Skip("src is missing")

        if node.op_type.startswith("Dynamic"):
            scale = node.inputs[1] if len(node.inputs) > 1 else None
            zero_point = node.inputs[2] if len(node.inputs) > 2 else None
            if scale is None:
                raise Skip("scales input is missing")
            zp_type = dtypes.from_onnx(int(elem_type(zero_point))) if zero_point else None  # type: ignore[arg-type]
            if quantize:
                wanted = node.attributes.get_int("output_dtype", 0)
                quant = dtypes.from_onnx(wanted) if wanted else default_output_dtype(zp_type)
            else:
                raw = elem_type(source)
                quant = dtypes.from_onnx(int(raw)) if raw is not None else zp_type
            if quant is None:
                raise Skip("the quantized type is unknown")
            scale_in = self._scale(graph, node, scale, qtype, factory)
            zp_in = self._zero_point(graph, node, zero_point, quant, qtype, scale, factory)
        else:
            scales = node.attributes.get_floats("scales")
            if scales is None:
                raise Skip("attribute scales is missing")
            zps = node.attributes.get_ints("zps")
            if quantize:
                wanted = node.attributes.get_int("output_dtype", 0)
                quant = dtypes.from_onnx(wanted) if wanted else dtypes.U8
            else:
                raw = elem_type(source)
                quant = dtypes.from_onnx(int(raw)) if raw is not None else None
            if quant is None:
                raise Skip("the quantized type is unknown")
            scale_array = np.asarray(scales, np.float32)
            if qtype == PER_TENSOR:
                scale_array = scale_array.reshape(())
            base = node.name or node.op_type
            scale_in = factory.constant(f"{base}_scale", scale_array, node)
            zp_values = np.asarray(zps if zps is not None else np.zeros(len(scales)), np.int64)
            zp_in = factory.constant(f"{base}_zero_point", self._fit(zp_values, quant, qtype), node)
            scale = None

        opset = opset_version(model, graph) or 0
        if quant.is_float8 and opset < FLOAT8_OPSET:
            raise Skip(f"float8 Q/DQ needs opset >= {FLOAT8_OPSET}; the model has {opset}")
        if qtype == PER_CHANNEL and opset < PER_AXIS_OPSET:
            raise Skip(f"per-axis Q/DQ needs opset >= {PER_AXIS_OPSET}; the model has {opset}")
        attributes: list[ir.Attr] = []
        if qtype == PER_CHANNEL:
            attributes.append(ir.AttrInt64("axis", axis))
        op_type = "QuantizeLinear" if quantize else "DequantizeLinear"
        self._stale += replace_node(
            node,
            ("", op_type, None),
            [source, scale_in, zp_in],
            attributes,
            ir.DataType(quant.onnx if quantize else dtypes.F32.onnx),
        )
        detail = f"{quant.name}, " + (f"axis {axis}" if qtype == PER_CHANNEL else "per_tensor")
        return op_type, detail

    @staticmethod
    def _fit(values: np.ndarray, quant: dtypes.DType, qtype: str) -> np.ndarray:
        shape: tuple[int, ...] = () if qtype == PER_TENSOR else (values.size,)
        if quant.is_float8:
            if np.any(values):
                raise Skip("float8 zero points must be zero")
            return np.zeros(shape, quant.numpy)
        low, high = quant.int_range
        if np.any(values < low) or np.any(values > high):
            raise Skip(f"zero points {values.tolist()} do not fit {quant.name}, ONNX's zp type")
        return values.reshape(shape).astype(quant.numpy)

    def _scale(
        self,
        graph: GraphLike,
        node: ir.Node,
        scale: ir.Value,
        qtype: str,
        factory: ConstantFactory,
    ) -> ir.Value:
        if qtype != PER_TENSOR:
            return scale
        return self._as_scalar(graph, node, scale, factory)

    def _zero_point(
        self,
        graph: GraphLike,
        node: ir.Node,
        zero_point: ir.Value | None,
        quant: dtypes.DType,
        qtype: str,
        scale: ir.Value,
        factory: ConstantFactory,
    ) -> ir.Value:
        base = node.name or node.op_type
        if zero_point is None:
            count = 1
            if qtype == PER_CHANNEL:
                shape = scale.shape
                if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
                    raise Skip("no zps and the channel count is unknown")
                count = shape[0]
            return factory.constant(
                f"{base}_zero_point", self._fit(np.zeros(count, np.int64), quant, qtype), node
            )
        if elem_type(zero_point) == quant.onnx and qtype == PER_CHANNEL:
            return zero_point
        if elem_type(zero_point) == quant.onnx:
            return self._as_scalar(graph, node, zero_point, factory)
        values = constant_array(zero_point)
        if values is None:
            raise Skip(
                f"zps of type {dtypes.onnx_name(int(elem_type(zero_point) or 0))} computed at "
                f"run time cannot become an ONNX zero point of type {quant.name}"
            )
        return factory.constant(
            f"{base}_zero_point", self._fit(values.astype(np.int64), quant, qtype), node
        )

    @staticmethod
    def _as_scalar(
        graph: GraphLike, node: ir.Node, value: ir.Value, factory: ConstantFactory
    ) -> ir.Value:
        array = constant_array(value)
        if array is not None:
            return factory.constant(f"{value.name}_scalar", array.reshape(()), node)
        return factory.reshaped(value, [], node, "scalar")
