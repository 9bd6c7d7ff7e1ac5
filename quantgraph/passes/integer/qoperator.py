"""QOperator nodes  ->  DequantizeLinear of each quantized input -> the float op -> QuantizeLinear.

What ``quantize_static(..., quant_format=QuantFormat.QOperator)`` and optimum's exports write:
QLinearConv / QLinearMatMul (ONNX), QGemm, QLinearAdd, QLinearMul, QLinearConcat,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax
(com.microsoft). Each is a Q/DQ composition with the scales and zero points as inputs:

QLinearConv(x, sx, zx, w, sw, zw, sy, zy, B?)
    ->  Conv(DQ(x, sx, zx), DQ(w, sw, zw){axis 0}, DQ(B, sx * sw){int32, axis 0}) -> Q(sy, zy)

The Q/DQ this pass writes are standard; :class:`.qdq_to_spec.QdqToSpecPass`, after it, turns
them into the spec's ops (and leaves the int32 bias DequantizeLinear standard, as in a QDQ model).
Per-channel weights: axis 0 for QLinearConv, the last axis (columns) for QLinearMatMul, 0 or 1
for QGemm by transB. QGemm without y_scale keeps a float output (no QuantizeLinear).

The float op records the original node (metadata ``quantgraph.qoperator``: op, domain, version,
attributes, where each original input went): :mod:`.restore_qoperator` gives it back.

The composition computes in float32 where QLinearConv / QLinearMatMul / QGemm sum in int32 and
requantize with their own rounding: results may differ by a quantization step (see
:mod:`quantgraph.validation.compare.qoperator`).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...ir.domain_fields import explicit_empty_domain
from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array, elem_type, optional_input, value_shape
from ...ir.walk import GraphLike, opset_version
from ..node_rewrite import NodeRewritePass
from ..report import Skip

CONTRIB = "com.microsoft"
RECORD = "quantgraph.qoperator"  # node metadata on the float op: JSON of what lowering needs
_QUANTIZED = {ir.DataType.UINT8, ir.DataType.INT8}


@dataclass(frozen=True)
class Form:
    """One QOperator op: its float op, the input slots of each quantized operand (x, scale,
    zero point), of the output's (scale, zero point), of an int32 bias, and the attributes
    the float op does not take (name -> the only value converted)."""

    float_op: str
    operands: tuple[tuple[int, int, int], ...]
    output: tuple[int, int] | None
    bias: int | None = None
    dropped: tuple[str, ...] = ()


_UNARY = Form("", ((0, 1, 2),), (3, 4))
_BINARY = Form("", ((0, 1, 2), (3, 4, 5)), (6, 7))
FORMS: dict[tuple[str, str], Form] = {
    ("", "QLinearConv"): Form("Conv", ((0, 1, 2), (3, 4, 5)), (6, 7), bias=8),
    ("", "QLinearMatMul"): Form("MatMul", _BINARY.operands, _BINARY.output),
    (CONTRIB, "QGemm"): Form("Gemm", ((0, 1, 2), (3, 4, 5)), (7, 8), bias=6),
    (CONTRIB, "QLinearAdd"): Form("Add", _BINARY.operands, _BINARY.output),
    (CONTRIB, "QLinearMul"): Form("Mul", _BINARY.operands, _BINARY.output),
    (CONTRIB, "QLinearConcat"): Form("Concat", (), (0, 1)),  # operands: (2, 3, 4), (5, 6, 7)...
    (CONTRIB, "QLinearAveragePool"): Form(
        "AveragePool", _UNARY.operands, _UNARY.output, dropped=("channels_last",)
    ),
    (CONTRIB, "QLinearGlobalAveragePool"): Form(
        "GlobalAveragePool", _UNARY.operands, _UNARY.output, dropped=("channels_last",)
    ),
    (CONTRIB, "QLinearLeakyRelu"): Form("LeakyRelu", _UNARY.operands, _UNARY.output),
    (CONTRIB, "QLinearSigmoid"): Form("Sigmoid", _UNARY.operands, _UNARY.output),
    (CONTRIB, "QLinearSoftmax"): Form(
        "Softmax", _UNARY.operands, _UNARY.output, dropped=("opset",)
    ),
}
CONVERTED = {op for _, op in FORMS}


def form_of(node: ir.Node) -> Form | None:
    return op_form(node.domain, node.op_type)


def op_form(domain: str, op_type: str) -> Form | None:
    """The QOperator form of an op of ``domain``, None for any other."""
    return FORMS.get(("" if domain == "ai.onnx" else domain, op_type))


def encode_attribute(attribute: ir.Attr) -> str:
    proto = ir.serde.serialize_attribute(attribute)
    return base64.b64encode(proto.SerializeToString()).decode()


def decode_attribute(text: str) -> ir.Attr:
    from onnx import AttributeProto  # the proto class only: onnx-ir serializes to it

    proto = AttributeProto()
    proto.ParseFromString(base64.b64decode(text))
    attribute: ir.Attr = ir.serde.deserialize_attribute(proto)
    return attribute


class QOperatorPass(NodeRewritePass):
    """Rewrites every QOperator node it knows into Q/DQ around the float op; the others stay,
    with the reason."""

    op_types = frozenset(op_type for _, op_type in FORMS)

    def matches(self, node: ir.Node) -> bool:
        return form_of(node) is not None

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        form = form_of(node)
        assert form is not None
        operands = form.operands
        if node.op_type == "QLinearConcat":
            count = (len(node.inputs) - 2) // 3
            if count < 1 or len(node.inputs) != 2 + 3 * count:
                raise Skip(
                    "node-arity", f"{len(node.inputs)} inputs: not y_scale, y_zp, (x, s, zp)+"
                )
            operands = tuple((2 + 3 * i, 3 + 3 * i, 4 + 3 * i) for i in range(count))
        attributes = self._attributes(model, graph, node, form)
        output = form.output
        if output is not None and optional_input(node, output[0]) is None:
            if node.op_type != "QGemm":
                raise Skip("missing-input", "y_scale is required")
            output = None  # QGemm without y_scale: float output
        # The output's type: declared, else its zero point's (QOperator models often carry no
        # value_info), else the first operand's (an absent zero point means that type).
        out_type = elem_type(node.outputs[0])
        if out_type is None and output is not None:
            out_type = elem_type(optional_input(node, output[1]))
        if out_type is None:
            xi, _, zi = operands[0]
            out_type = elem_type(optional_input(node, zi)) or elem_type(optional_input(node, xi))
        if output is not None and out_type not in _QUANTIZED:
            raise Skip("quantized-type", f"output type {out_type}: the spec quantizes to u8/s8")
        version = opset_version(model, graph) or 0

        # slot of the original node -> where it went: ["in", float input, DQ input], ["out",
        # Q input], ["none"] (absent), ["bias", 0] (the int32 bias, float input 2)
        slots: list[list[object]] = [["none"] for _ in node.inputs]
        float_inputs: list[ir.Value | None] = []
        axes: list[int | None] = []
        base = node.name or factory.unique_name(node.op_type)
        for position, (xi, si, zi) in enumerate(operands):
            x, scale = optional_input(node, xi), optional_input(node, si)
            if x is None or scale is None:
                raise Skip("missing-input", f"input {xi} or its scale {si} is absent")
            axis = self._axis(node, position, x, scale, optional_input(node, zi), version)
            axes.append(axis)
            zero = optional_input(node, zi)
            dq_zero = zero if zero is not None else self._zero(x, out_type, factory, node)
            attrs = [ir.AttrInt64("axis", axis)] if axis is not None else []
            dq = _node(
                "DequantizeLinear",
                [x, scale, dq_zero],
                attrs,
                f"{base}_dq{position}",
                factory,
                x.shape,
            )
            graph.insert_before(node, dq)
            float_inputs.append(dq.outputs[0])
            slots[xi], slots[si] = ["in", position, 0], ["in", position, 1]
            if zero is not None:
                slots[zi] = ["in", position, 2]
        bias_detail = ""
        if form.bias is not None and optional_input(node, form.bias) is not None:
            bias = node.inputs[form.bias]
            assert bias is not None
            float_inputs.append(self._bias(node, bias, factory, graph, base))
            slots[form.bias] = ["bias", 0]
            bias_detail = ", int32 bias dequantized with s_x * s_w"
        if output is not None:
            slots[output[0]] = ["out", 1]
            if optional_input(node, output[1]) is not None:
                slots[output[1]] = ["out", 2]

        record = {
            "op": node.op_type,
            "domain": node.domain,
            "version": node.version,
            "attributes": [encode_attribute(a) for a in node.attributes.values()],
            "slots": slots,
        }
        if explicit_empty_domain(model, node):  # quantize_static's QLinearMatMul: domain ""
            record["domain_field"] = True
        encoded = json.dumps(record, sort_keys=True)
        former = list(node.inputs)
        self.stale += former
        if output is None:  # QGemm with a float output: the node becomes the float op
            replace_node(
                node, ("", form.float_op, None), float_inputs, attributes, ir.DataType.FLOAT
            )
            node.metadata_props[RECORD] = encoded
        else:
            float_node = _node(
                form.float_op,
                float_inputs,
                attributes,
                f"{base}_float",
                factory,
                node.outputs[0].shape,
            )
            float_node.metadata_props[RECORD] = encoded
            graph.insert_before(node, float_node)
            zero_y = optional_input(node, output[1])
            if zero_y is None:
                assert out_type is not None
                zero_y = factory.constant(
                    f"quantgraph_zero_{out_type.name.lower()}", np.zeros((), out_type.numpy()), node
                )
            scale_y = former[output[0]]
            replace_node(
                node,
                ("", "QuantizeLinear", None),
                [float_node.outputs[0], scale_y, zero_y],
                [],
                out_type or ir.DataType.UINT8,
            )
        channel_axes = [a for a in axes if a is not None]
        detail = (
            f"DequantizeLinear x{len(operands)} -> {form.float_op} -> "
            + ("QuantizeLinear" if output is not None else "float output")
            + (f"; per-channel weight, axis {channel_axes[0]}" if channel_axes else "")
            + bias_detail
        )
        return form.float_op, detail

    def _attributes(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, form: Form
    ) -> list[ir.Attr]:
        kept = [a for name, a in node.attributes.items() if name not in form.dropped]
        for name in form.dropped:
            attribute = node.attributes.get(name)
            if attribute is None:
                continue
            if name == "channels_last" and attribute.as_int() != 0:
                raise Skip("channels-last", "channels_last=1: the float op is channels-first")
            if name == "opset":
                softmax = opset_version(model, graph) or 0
                if (attribute.as_int() >= 13) != (softmax >= 13):
                    raise Skip(
                        "opset",
                        f"QLinearSoftmax of opset {attribute.as_int()} semantics in a model of "
                        f"opset {softmax}: Softmax's axis means another thing there",
                    )
        if node.op_type == "QGemm":
            for name in ("alpha", "beta"):
                attribute = node.attributes.get(name)
                if attribute is not None and attribute.as_float() != 1.0:
                    raise Skip("gemm-scaling", f"QGemm {name}={attribute.as_float()}: not 1")
        return kept

    @staticmethod
    def _axis(
        node: ir.Node,
        position: int,
        x: ir.Value,
        scale: ir.Value,
        zero: ir.Value | None,
        version: int,
    ) -> int | None:
        """None for a per-tensor operand, else the DequantizeLinear axis of a per-channel weight."""
        array = constant_array(scale)
        shape = scale.shape
        dims = list(array.shape) if array is not None else (list(shape.dims) if shape else None)
        if dims is None:
            raise Skip("unknown-shape", f"the shape of scale {scale.name} is unknown")
        if len(dims) == 0:
            return None
        weight = position == 1 and node.op_type in ("QLinearConv", "QLinearMatMul", "QGemm")
        if len(dims) != 1 or not weight:
            raise Skip("scale-rank", f"scale {scale.name} of shape {dims}: per-tensor expected")
        if version < 13:
            raise Skip(
                "opset", f"per-channel weight at opset {version}: DequantizeLinear has axis from 13"
            )
        known = value_shape(x)  # a Constant node's output has no declared shape
        rank = len(known) if known is not None else None
        if node.op_type == "QLinearConv":
            return 0
        if node.op_type == "QGemm":
            trans = node.attributes.get("transB")
            return 0 if trans is not None and trans.as_int() else 1
        if rank is None:
            raise Skip("unknown-shape", f"the rank of {x.name} is unknown")
        return rank - 1

    @staticmethod
    def _zero(
        x: ir.Value, fallback: ir.DataType | None, factory: ConstantFactory, node: ir.Node
    ) -> ir.Value:
        dtype = elem_type(x) or fallback
        if dtype not in _QUANTIZED:
            raise Skip("quantized-type", f"{x.name} is {dtype}: u8/s8 expected")
        assert dtype is not None
        return factory.constant(
            "quantgraph_zero_" + dtype.name.lower(), np.zeros((), dtype.numpy()), node
        )

    def _bias(
        self,
        node: ir.Node,
        bias: ir.Value,
        factory: ConstantFactory,
        graph: GraphLike,
        base: str,
    ) -> ir.Value:
        scales = [constant_array(optional_input(node, i)) for i in (1, 4)]
        values = constant_array(bias)
        if scales[0] is None or scales[1] is None or values is None:
            raise Skip("runtime-weight", "the bias or a scale it needs is not a constant")
        if values.dtype != np.int32:
            raise Skip("quantized-type", f"bias of type {values.dtype}: int32 expected")
        product = (scales[0].astype(np.float32) * scales[1].astype(np.float32)).astype(np.float32)
        attrs: list[ir.Attr] = []
        if product.ndim == 1:
            if values.ndim != 1 or values.shape[0] != product.shape[0]:
                raise Skip(
                    "scale-rank", f"bias {list(values.shape)} per channel {list(product.shape)}"
                )
            attrs = [ir.AttrInt64("axis", 0)]
        scale = factory.constant(f"{bias.name or base}_scale", product, node)
        dq = _node("DequantizeLinear", [bias, scale], attrs, f"{base}_bias", factory, bias.shape)
        graph.insert_before(node, dq)
        return dq.outputs[0]


def _node(
    op_type: str,
    inputs: list[ir.Value | None],
    attributes: list[ir.Attr],
    name: str,
    factory: ConstantFactory,
    shape: ir.Shape | None,
) -> ir.Node:
    name = factory.unique_name(name)
    node = ir.Node("", op_type, inputs, attributes, name=name, num_outputs=1)
    out = node.outputs[0]
    out.name = factory.unique_name(f"{name}_output")
    out.type = ir.TensorType(ir.DataType.FLOAT)
    if shape is not None:
        out.shape = ir.Shape(list(shape.dims))
    return node
