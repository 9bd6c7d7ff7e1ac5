"""Dynamic ops in their most explicit form: qtype and axis written, an absent zps made an
explicit zero of the quantized type. Meaning is unchanged (these are the spec's defaults).

Kernels that cannot read defaults or optional inputs (onnxruntime-extensions' Python ops) need
this form; what cannot be made explicit raises :class:`NoExplicitForm`.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..ir.rewrite import ConstantFactory
from ..ir.values import optional_input, value_shape
from ..ir.walk import GraphLike, spec_op
from ..spec import DEFAULT_QUANTIZED, PER_CHANNEL, PER_GROUP, dst_type, dtypes, resolve_axis
from .node_rewrite import NodeRewritePass


class NoExplicitForm(ValueError):
    """A node whose zero zps cannot be made: no zps type, or an unknown channel count."""


class ExplicitFormPass(NodeRewritePass):
    """Dynamic ops get explicit qtype and axis attributes and an explicit zero zps input."""

    def matches(self, node: ir.Node) -> bool:
        op = spec_op(node)
        return op is not None and not op.is_static

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        op = spec_op(node)
        assert op is not None
        changed = False
        for name in ("qtype", "axis"):
            if name not in node.attributes:
                default = op.defaults[name]
                node.attributes[name] = (
                    ir.AttrString(name, default)
                    if isinstance(default, str)
                    else ir.AttrInt64(name, int(str(default)))
                )
                changed = True
        if optional_input(node, 2) is None:
            zero = self._zero(node, factory)
            node.resize_inputs(3)
            node.replace_input_with(2, zero)
            changed = True
        return (node.op_type, "explicit") if changed else None

    @staticmethod
    def _zero(node: ir.Node, factory: ConstantFactory) -> ir.Value:
        op = spec_op(node)
        assert op is not None
        if op.is_quantize:  # zps of the dst type
            raw = dst_type(op, output_dtype=node.attributes.get_int("output_dtype", 0))
        else:  # zps of the src type
            source = node.inputs[0].dtype if node.inputs[0] is not None else None
            raw = int(source) if source is not None else DEFAULT_QUANTIZED.onnx
        zp_type = dtypes.from_onnx(raw)
        if zp_type is None or zp_type.is_float8 or zp_type == dtypes.F32:
            raise NoExplicitForm(f"{op.name} node '{node.name}': no zps type for {zp_type}")
        count = 1
        attributes = op.with_defaults({name: a.value for name, a in node.attributes.items()})
        if attributes["qtype"] == PER_GROUP:  # zps of the scales' shape
            scales = optional_input(node, 1)
            shape = value_shape(scales) if scales is not None else None
            if shape is None or any(d is None for d in shape):
                raise NoExplicitForm(
                    f"{op.name} node '{node.name}': the scales' shape is unknown, so an "
                    "explicit zero zps cannot be made"
                )
            dims = tuple(int(d) for d in shape if d is not None)
            zero = np.zeros(dims, zp_type.numpy)
            name = f"quantgraph_zero_{zp_type.name}_{'x'.join(map(str, dims))}"
            return factory.constant(name, zero, node)
        if attributes["qtype"] == PER_CHANNEL:
            scales = optional_input(node, 1)
            shape = value_shape(scales) if scales is not None else None
            src_shape = value_shape(node.inputs[0]) if node.inputs[0] is not None else None
            if shape and shape[0] is not None:
                count = shape[0]
            elif src_shape is not None:
                axis = resolve_axis(int(attributes["axis"]), len(src_shape))  # type: ignore[call-overload]
                known = src_shape[axis] if axis is not None else None
                if known is None:
                    raise NoExplicitForm(
                        f"{op.name} node '{node.name}': the channel count is "
                        "unknown, so an explicit zero zps cannot be made"
                    )
                count = known
        zero = np.zeros(count, zp_type.numpy)
        return factory.constant(f"quantgraph_zero_{zp_type.name}_{count}", zero, node)
