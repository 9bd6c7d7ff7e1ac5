"""Spec ops in their most explicit form: the shape the Python backend's kernels accept.

StaticToDynamicPass:  Quantize(x){scales, zps}  ->  DynamicQuantize(x, scales_const, zps_const)
ExplicitFormPass:     writes qtype/axis, adds zero zps where absent

Both keep meaning: a static op is defined as the dynamic op with constant scales and zps.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..spec import DOMAIN, OPSET_VERSION, PER_CHANNEL, PER_TENSOR, SpecError, dtypes, resolve_axis
from ..spec import get as get_spec
from ._graph import (
    ConstantFactory,
    all_graphs,
    remove_if_unused,
    replace_node,
    used_names,
    value_shape,
)


class StaticToDynamicPass(ir.passes.InPlacePass):
    """Static Quantize/Dequantize become their dynamic siblings with constant inputs."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._stale: list[ir.Value | None] = []
        modified = False
        taken = used_names(model)
        for graph in list(all_graphs(model)):
            factory = ConstantFactory(graph, graph is model.graph, taken)
            for node in list(graph):
                if node.domain != DOMAIN or node.op_type not in ("Quantize", "Dequantize"):
                    continue
                quantize = node.op_type == "Quantize"
                scales = node.attributes.get_floats("scales")
                if scales is None:
                    raise SpecError(
                        node.op_type, node.name or "", "missing-attribute", name="scales"
                    )
                zps = node.attributes.get_ints("zps")
                if quantize:
                    out = node.attributes.get_int("output_dtype", 0)
                    zp_type = dtypes.from_onnx(out) if out else dtypes.U8
                else:
                    source = node.inputs[0].dtype if node.inputs[0] is not None else None
                    zp_type = dtypes.S32 if source is None else dtypes.from_onnx(int(source))
                if zp_type is None or zp_type.is_float8 or zp_type == dtypes.F32:
                    raise ValueError(
                        f"{node.op_type} node '{node.name}' uses "
                        f"{zp_type or 'an unknown type'}, which has no dynamic op"
                    )
                if not quantize:
                    zp_type = dtypes.S32  # DynamicDequantize takes s32 zps: any s32 value fits
                zp_values = np.asarray(zps if zps is not None else [0] * len(scales), np.int64)
                low, high = zp_type.int_range
                if np.any(zp_values < low) or np.any(zp_values > high):
                    raise ValueError(
                        f"{node.op_type} node '{node.name}': zps {zps} do not fit "
                        f"{zp_type.name}, the dynamic op's zps type"
                    )
                base = node.name or node.op_type
                scale_value = factory.constant(
                    f"{base}_scales", np.asarray(scales, np.float32), node
                )
                zp_value = factory.constant(f"{base}_zps", zp_values.astype(zp_type.numpy), node)
                attributes = [
                    a
                    for name, a in node.attributes.items()
                    if name not in ("scales", "zps", "output_dtype")
                ]
                self._stale += replace_node(
                    node,
                    (DOMAIN, f"Dynamic{node.op_type}", OPSET_VERSION),
                    [node.inputs[0], scale_value, zp_value],
                    attributes,
                    ir.DataType(zp_type.onnx if quantize else dtypes.F32.onnx),
                )
                modified = True
        remove_if_unused(self._stale)
        return ir.passes.PassResult(model, modified)


class ExplicitFormPass(ir.passes.InPlacePass):
    """Dynamic ops get explicit qtype and axis attributes and an explicit zero zps input."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._stale: list[ir.Value | None] = []
        modified = False
        taken = used_names(model)
        for graph in list(all_graphs(model)):
            factory = ConstantFactory(graph, graph is model.graph, taken)
            for node in list(graph):
                if node.domain != DOMAIN or not node.op_type.startswith("Dynamic"):
                    continue
                spec = get_spec(node.op_type)
                for name in ("qtype", "axis"):
                    if name not in node.attributes:
                        default = spec.attribute(name).default
                        node.attributes[name] = (
                            ir.AttrString(name, default)
                            if isinstance(default, str)
                            else ir.AttrInt64(name, int(str(default)))
                        )
                        modified = True
                if len(node.inputs) < 3 or node.inputs[2] is None:
                    zero = self._zero(node, factory)
                    node.resize_inputs(3)
                    node.replace_input_with(2, zero)
                    modified = True
        remove_if_unused(self._stale)
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _zero(node: ir.Node, factory: ConstantFactory) -> ir.Value:
        if node.op_type == "DynamicQuantize":
            out = node.attributes.get_int("output_dtype", 0)
            zp_type = dtypes.from_onnx(out) if out else dtypes.U8
        else:
            source = node.inputs[0].dtype if node.inputs[0] is not None else None
            zp_type = dtypes.from_onnx(int(source)) if source is not None else dtypes.U8
        if zp_type is None or zp_type.is_float8 or zp_type == dtypes.F32:
            raise ValueError(f"{node.op_type} node '{node.name}': no zps type for {zp_type}")
        count = 1
        if node.attributes.get_string("qtype", PER_TENSOR) == PER_CHANNEL:
            scales = node.inputs[1]
            shape = value_shape(scales) if scales is not None else None
            src_shape = value_shape(node.inputs[0]) if node.inputs[0] is not None else None
            if shape and shape[0] is not None:
                count = shape[0]
            elif src_shape is not None:
                axis = resolve_axis(node.attributes.get_int("axis", 1), len(src_shape))
                known = src_shape[axis] if axis is not None else None
                if known is None:
                    raise ValueError(
                        f"{node.op_type} node '{node.name}': the channel count is "
                        "unknown, so an explicit zero zps cannot be made"
                    )
                count = known
        zero = np.zeros(count, zp_type.numpy)
        return factory.constant(f"quantgraph_zero_{zp_type.name}_{count}", zero, node)
