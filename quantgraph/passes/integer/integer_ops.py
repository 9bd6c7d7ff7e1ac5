"""quantize_dynamic's integer ops  ->  DynamicDequantize of both operands and a float op.

What onnxruntime's ``quantize_dynamic`` writes (transformers.js ``model_quantized``, optimum's
dynamic quantization), per MatMul or Conv:

    a, sa, za = DynamicQuantizeLinear(x)
    s = Mul(sa, sw)                                     (sw [N] with per_channel)
    y = Mul(Cast(MatMulInteger(a, w, za, zw), to=float), s)     (ConvInteger alike)

becomes

    y = MatMul(DynamicDequantize(a, sa, za), DynamicDequantize(w, sw, zw))      (Conv alike)

Each operand is the output of a DynamicQuantizeLinear (its scale and zero point are that node's,
made 1-D) or a constant (its scale is the other input of the scales' Mul): per_tensor, or
per_channel on the last axis where the weight's scale is a vector of a MatMulInteger. The
original sums (a - za)(w - zw) in int32 and scales once; the rewritten form sums the dequantized
operands in float32, so the two are close, not equal (quantgraph.validation.compare.integer_sums).

The float op records what it replaced (metadata ``quantgraph.integer_op``): nodes, names,
the order of the Muls' inputs, the weight scale's and zero point's shapes;
:mod:`.restore_integer_ops` gives the original nodes back with the same bytes.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import onnx
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory
from ...ir.values import constant_array, optional_input
from ...ir.walk import GraphLike, is_standard, only_user
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE, OPSET_VERSION, PER_CHANNEL, PER_TENSOR
from ..node_rewrite import NodeRewritePass, import_spec_domain
from ..report import RewriteReport, Skip

RECORD = "quantgraph.integer_op"  # node metadata: JSON of what lowering needs
FLOAT_OP = {"MatMulInteger": "MatMul", "ConvInteger": "Conv"}
_DQL = "DynamicQuantizeLinear"
_CHAIN = (
    "its int32 result is not Cast to float and multiplied by the product of its operands' scales "
    "(quantize_dynamic's chain)"
)


def _only_user(value: ir.Value) -> ir.Node | None:
    user = only_user(value)
    return user if user is not None and is_standard(user) else None


class _Operand:
    """One operand: quantized values, scale, zero point (None: 0), and whether it is dynamic."""

    def __init__(self, q: ir.Value, scale: ir.Value | None, zp: ir.Value | None, dynamic: bool):
        self.q, self.scale, self.zp, self.dynamic = q, scale, zp, dynamic


class IntegerOpsPass(NodeRewritePass):
    """Rewrites MatMulInteger / ConvInteger with quantize_dynamic's scale chain; the others
    stay (listed as other formats), with the reason."""

    op_types = frozenset(FLOAT_OP)

    def matches(self, node: ir.Node) -> bool:
        return node.op_type in FLOAT_OP and is_standard(node)

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        import_spec_domain(model, report, FLOAT_OP)

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        if not hasattr(self, "_dequantized"):
            self._dequantized: dict[int, ir.Value] = {}
        op = node.op_type
        if len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
            raise Skip("node-arity", f"{op} needs A and B")
        cast = _only_user(node.outputs[0])
        if cast is None or cast.op_type != "Cast" or cast.attributes.get_int("to", 0) != 1:
            raise Skip("scale-chain", f"{op}: {_CHAIN}")
        final = _only_user(cast.outputs[0])
        if final is None or final.op_type != "Mul" or len(final.inputs) != 2:
            raise Skip("scale-chain", f"{op}: {_CHAIN}")
        cast_index = 0 if final.inputs[0] is cast.outputs[0] else 1
        product = final.inputs[1 - cast_index]
        scales = product.producer() if product is not None else None
        if scales is None or scales.op_type != "Mul" or not is_standard(scales):
            raise Skip("scale-chain", f"{op}: {_CHAIN}")
        operands = [self._operand(node, i) for i in (0, 1)]
        _pair_scales(operands, scales, op)
        a, w = operands
        if not a.dynamic or (w.dynamic and op == "ConvInteger"):
            raise Skip("runtime-weight", f"{op}: A must come from a DynamicQuantizeLinear")

        base = node.name or factory.unique_name(op)
        record: dict[str, object] = {
            "op": op,
            "node": node.name or "",
            "version": node.version,
            "integer": node.outputs[0].name,
            "cast": [cast.name or "", cast.outputs[0].name],
            "scales": [
                scales.name or "",
                product.name if product else "",
                [v is a.scale for v in scales.inputs],
            ],
            "final": [final.name or "", cast_index],
            "zero_points": [v is not None for v in node.inputs[2:4]],
        }
        detail: list[str] = []
        inputs: list[ir.Value] = []
        for index, operand in enumerate(operands):
            if operand.dynamic:
                inputs.append(self._dynamic(graph, node, operand, factory, base))
                detail.append("A: per_tensor from its DynamicQuantizeLinear")
                continue
            dequantized, text, weight = self._constant(node, operand, factory, base, op)
            inputs.append(dequantized)
            record[f"weight{index}"] = weight
            detail.append(f"{'AB'[index]}: {text}")

        self.stale += [*node.inputs, *scales.inputs, product]
        former_final = list(final.inputs)
        final.op_type, final.version = FLOAT_OP[op], None
        final.replace_input_with(0, inputs[0])
        final.replace_input_with(1, inputs[1])
        for name, attribute in node.attributes.items():
            final.attributes[name] = attribute
        final.metadata_props[RECORD] = json.dumps(record, sort_keys=True)
        graph.remove([cast, node], safe=True)
        if product is not None and not product.uses() and not product.is_graph_output():
            graph.remove(scales, safe=True)
        self.stale += former_final
        return FLOAT_OP[op], "; ".join(detail) + f", then float {FLOAT_OP[op]}"

    def _operand(self, node: ir.Node, index: int) -> _Operand:
        q = node.inputs[index]
        assert q is not None
        zp = optional_input(node, 2 + index)
        producer = q.producer()
        if producer is not None and producer.op_type == _DQL and is_standard(producer):
            if q is not producer.outputs[0] or zp is not producer.outputs[2]:
                raise Skip(
                    "scale-chain",
                    f"{node.op_type}: input {index} is not its "
                    "DynamicQuantizeLinear's values with that node's zero point",
                )
            return _Operand(q, producer.outputs[1], zp, True)
        if constant_array(q) is None:
            raise Skip(
                "runtime-weight",
                f"{node.op_type}: input {index} is neither a DynamicQuantizeLinear output nor a "
                "constant",
            )
        if zp is not None and constant_array(zp) is None:
            raise Skip(
                "runtime-zero-point",
                f"{node.op_type}: the constant operand's zero point is not a constant",
            )
        return _Operand(q, None, zp, False)

    def _dynamic(
        self,
        graph: GraphLike,
        node: ir.Node,
        operand: _Operand,
        factory: ConstantFactory,
        base: str,
    ) -> ir.Value:
        cached = self._dequantized.get(id(operand.q))  # one per DynamicQuantizeLinear output
        if cached is not None:
            return cached
        assert operand.scale is not None and operand.zp is not None
        inputs: list[ir.Value | None] = [
            operand.q,
            factory.reshaped(operand.scale, [1], node, "1d", ir.DataType.FLOAT),
            factory.reshaped(operand.zp, [1], node, "1d", ir.DataType.UINT8),
        ]
        out = _dequantize(
            graph,
            node,
            inputs,
            [ir.AttrString("qtype", PER_TENSOR)],
            factory,
            f"{operand.q.name or base}_dequantized",
        )
        self._dequantized[id(operand.q)] = out
        return out

    @staticmethod
    def _constant(
        node: ir.Node, operand: _Operand, factory: ConstantFactory, base: str, op: str
    ) -> tuple[ir.Value, str, list[object]]:
        q = constant_array(operand.q)
        scale = constant_array(operand.scale)
        assert q is not None
        if scale is None or scale.dtype != np.float32:
            raise Skip("scale-type", f"{op}: the weight's scale is not a float32 constant")
        zp = constant_array(operand.zp) if operand.zp is not None else None
        if q.dtype not in (np.int8, np.uint8) or (zp is not None and zp.dtype != q.dtype):
            raise Skip(
                "quantized-type",
                f"{op}: weight {q.dtype} / zero point "
                f"{None if zp is None else zp.dtype}: the spec takes s8/u8",
            )
        count = max(scale.size, 1 if zp is None else zp.size)
        channels = q.shape[-1] if op == "MatMulInteger" and q.ndim >= 2 else None
        if count != 1 and (
            count != channels
            or scale.size not in (1, count)
            or (zp is not None and zp.size not in (1, count))
        ):
            raise Skip(
                "zero-point-shape",
                f"{op}: weight scale {list(scale.shape)} / zero "
                f"point {None if zp is None else list(zp.shape)} are neither per tensor "
                "nor per column of B",
            )
        scales = np.broadcast_to(scale.reshape(-1), (count,)).copy()
        attrs = [ir.AttrString("qtype", PER_TENSOR if count == 1 else PER_CHANNEL)]
        if count != 1:
            attrs.append(ir.AttrInt64("axis", q.ndim - 1))
        assert operand.scale is not None
        inputs: list[ir.Value | None] = [
            operand.q,
            factory.constant(f"{operand.scale.name or base}_1d", scales, node, like=operand.scale),
        ]
        if zp is not None:
            assert operand.zp is not None
            zps = np.broadcast_to(zp.reshape(-1), (count,)).copy()
            inputs.append(
                factory.constant(f"{operand.zp.name or base}_1d", zps, node, like=operand.zp)
            )
        graph = node.graph
        assert graph is not None
        out = _dequantize(
            graph, node, inputs, attrs, factory, f"{operand.q.name or base}_dequantized"
        )
        record: list[object] = [
            saved(operand.scale),
            None if operand.zp is None else saved(operand.zp),
        ]
        kind = "s8" if q.dtype == np.int8 else "u8"
        text = f"{kind} constant, " + (
            "per_tensor" if count == 1 else f"per_channel axis {q.ndim - 1}"
        )
        return out, text, record


def saved(value: ir.Value) -> list[object]:
    """[name, base64 of the TensorProto]: the constant as its producer encoded it (float_data or
    raw_data), so that lowering gives the same bytes back."""
    tensor = ir.convenience.get_const_tensor(value)  # an initializer or a Constant node's
    if tensor is None:
        return [value.name, None]
    proto = ir.serde.serialize_tensor(tensor)
    return [value.name, base64.b64encode(proto.SerializeToString()).decode("ascii")]


def restored(record: list[object]) -> ir.TensorProtocol | None:
    """The tensor :func:`saved` recorded, or None."""
    name, encoded = record
    if not isinstance(encoded, str):
        return None
    proto = onnx.TensorProto.FromString(base64.b64decode(encoded))
    proto.name = str(name)
    return ir.serde.deserialize_tensor(proto)


def _pair_scales(operands: list[_Operand], scales: ir.Node, op: str) -> None:
    """Each operand's scale: a dynamic one's is its DynamicQuantizeLinear's; a constant one's is
    the scales' Mul's other input."""
    given = list(scales.inputs)
    if len(given) != 2:
        raise Skip("scale-chain", f"{op}: {_CHAIN}")
    rest = list(given)
    for operand in operands:
        if operand.dynamic:
            if operand.scale not in rest:
                raise Skip("scale-chain", f"{op}: {_CHAIN}")
            rest.remove(operand.scale)
    for operand in operands:
        if not operand.dynamic:
            operand.scale = rest.pop() if rest else None
            if operand.scale is None or constant_array(operand.scale) is None:
                raise Skip("scale-chain", f"{op}: {_CHAIN}")


def _dequantize(
    graph: GraphLike,
    before: ir.Node,
    inputs: list[ir.Value | None],
    attributes: list[ir.Attr],
    factory: ConstantFactory,
    name: str,
) -> ir.Value:
    node = ir.Node(
        DOMAIN,
        DYNAMIC_DEQUANTIZE.name,
        inputs,
        attributes,
        name=factory.unique_name(name),
        version=OPSET_VERSION,
        num_outputs=1,
    )
    out = node.outputs[0]
    out.name = factory.unique_name(name)
    out.type = ir.TensorType(ir.DataType.FLOAT)
    source = inputs[0]
    if source is not None and source.shape is not None:
        out.shape = ir.Shape(source.shape)
    graph.insert_before(before, node)
    return out
