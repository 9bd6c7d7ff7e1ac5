"""Static ops as their dynamic siblings with constant inputs (the spec defines them so):

Quantize(x){scales, zps}    ->  DynamicQuantize(x, scales_const, zps_const)
Dequantize(q){scales, zps}  ->  DynamicDequantize(q, scales_const, zps_const)

The dynamic ops have no float8 rows and take s8/u8/s32 zps: what they cannot express raises
:class:`NoDynamicForm` (a backend that needs this form says so to its user).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..ir.rewrite import ConstantFactory, replace_node
from ..ir.walk import GraphLike, spec_op
from ..spec import OPSET_VERSION, SpecError, dst_type, dtypes
from .node_rewrite import NodeRewritePass


class NoDynamicForm(ValueError):
    """A static op whose types or zero points its dynamic sibling cannot take."""


class StaticToDynamicPass(NodeRewritePass):
    """Static Quantize/Dequantize become their dynamic siblings with constant inputs."""

    def matches(self, node: ir.Node) -> bool:
        op = spec_op(node)
        return op is not None and op.is_static

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        op = spec_op(node)
        assert op is not None
        dynamic = op.dynamic_form
        scales = node.attributes.get_floats("scales")
        if scales is None:
            raise SpecError(op.name, node.name or "", "missing-attribute", name="scales")
        zps = node.attributes.get_ints("zps")
        if op.is_quantize:
            output_dtype = node.attributes.get_int("output_dtype", 0)
            quantized = dtypes.from_onnx(dst_type(op, output_dtype=output_dtype))
        else:
            source = node.inputs[0].dtype if node.inputs[0] is not None else None
            quantized = dtypes.S32 if source is None else dtypes.from_onnx(int(source))
        if quantized is None or quantized.is_float8 or quantized == dtypes.F32:
            raise NoDynamicForm(
                f"{op.name} node '{node.name}' uses "
                f"{quantized or 'an unknown type'}, which has no dynamic op"
            )
        # A quantize op's zps have its dst type; DynamicDequantize takes any s32 value.
        zp_type = quantized if op.is_quantize else dtypes.S32
        zp_values = np.asarray(zps if zps is not None else [0] * len(scales), np.int64)
        low, high = zp_type.int_range
        if np.any(zp_values < low) or np.any(zp_values > high):
            raise NoDynamicForm(
                f"{op.name} node '{node.name}': zps {list(zps or [])} do not fit "
                f"{zp_type.name}, the dynamic op's zps type"
            )
        base = node.name or op.name
        scale_value = factory.constant(f"{base}_scales", np.asarray(scales, np.float32), node)
        zp_value = factory.constant(f"{base}_zps", zp_values.astype(zp_type.numpy), node)
        # scales/zps become inputs; output_dtype goes too: the zps type says it now.
        moved = {"scales", "zps", "output_dtype"}
        kept = [a for name, a in node.attributes.items() if name not in moved]
        self.stale += replace_node(
            node,
            (node.domain, dynamic.name, OPSET_VERSION),
            [node.inputs[0], scale_value, zp_value],
            kept,
            ir.DataType(dst_type(dynamic, zps=zp_type.onnx)),
        )
        return dynamic.name, ""
