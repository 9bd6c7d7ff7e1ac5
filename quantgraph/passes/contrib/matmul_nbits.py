"""com.microsoft MatMulNBits  ->  DynamicDequantize(per_group) -> MatMul [-> Add].

What transformers.js' ``model_q4``, onnxruntime-genai and Olive's RTN write:

MatMulNBits(A, B[N, k_blocks, blob], scales, zp?, g_idx?, bias?){K, N, bits, block_size}
    ->  W = DynamicDequantize(q[Kp, N], scales'[k_blocks, N], zp'?){per_group, [block_size, 1]}
        [-> Slice(W, 0:K on axis 0) when K is not whole blocks: Kp = k_blocks * block_size]
        -> MatMul(A, W) [-> Add(bias)]

q is B unpacked and transposed into a standard 4/8-bit initializer: the layout onnxruntime's
own QDQ form has (DQ axis 0, block_size), which it re-fuses into MatMulNBits at ENABLE_ALL.
No zero point means 2^(bits-1) in MatMulNBits (0 in ONNX/spec): q becomes signed, q - 2^(bits-1),
without zps (s4/s8, what the quantizer's symmetric QDQ form is). Packed zero points become u4/u8
zps; float ones ("typed") too when they are integers of the range, else the node stays.
dst is the scales' type, which MatMulNBits ties to A's: the MatMul runs in A's type, no Cast.
g_idx (act-order, deprecated) is taken only when it is the identity k // block_size and the zero
points are not packed (onnxruntime's g_idx kernel reads packed ones otherwise: measured, 1.32).

The node that keeps the output records the original attributes, initializer names and shapes
(metadata ``quantgraph.matmul_nbits``): :mod:`.restore_nbits` gives the MatMulNBits back with
the same bytes (the padding of a short last block is kept in q for that).
"""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx_ir as ir

from ...ir.derived_tensors import derived
from ...ir.rewrite import ConstantFactory
from ...ir.values import (
    constant_array,
    constant_tensor,
    elem_type,
    optional_input,
    tensor_dims,
)
from ...ir.walk import GraphLike
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE, OPSET_VERSION, PER_GROUP, dtypes
from ..node_rewrite import NodeRewritePass, import_spec_domain
from ..qdq.short_blocks import PADDED
from ..report import RewriteReport, Skip
from . import nbits_layout as layout

CONTRIB = "com.microsoft"
RECORD = "quantgraph.matmul_nbits"  # node metadata: JSON of what lowering needs
_ATTRIBUTES = ("K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked")
_ZP_ABSENT, _ZP_PACKED, _ZP_TYPED = "absent", "packed", "typed"


def is_matmul_nbits(node: ir.Node) -> bool:
    return node.domain == CONTRIB and node.op_type == "MatMulNBits"


class MatMulNBitsPass(NodeRewritePass):
    """Rewrites every MatMulNBits whose weight is constant into the spec's per_group
    DynamicDequantize and a standard MatMul; the others stay, with the reason."""

    op_types = frozenset({"MatMulNBits"})

    def matches(self, node: ir.Node) -> bool:
        return is_matmul_nbits(node)

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        import_spec_domain(model, report, ("MatMulNBits",))

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        attrs = _attributes(node)
        k, n, bits, block = attrs["K"], attrs["N"], attrs.get("bits", 4), attrs["block_size"]
        if bits not in layout.BITS:
            raise Skip("quantized-type", f"{bits}-bit weights: the spec has 4 and 8 bits")
        if attrs.get("weight_prepacked", 0):
            raise Skip("packed-layout", "weight_prepacked: B is in an execution provider's layout")
        if block <= 0 or k <= 0 or n <= 0:
            raise Skip("packed-layout", f"K={k}, N={n}, block_size={block}")
        if block * bits % 8:
            raise Skip("packed-layout", f"block_size {block} of {bits}-bit values: not whole bytes")
        blocks = -(-k // block)
        blob = block * bits // 8
        source, scale = optional_input(node, 1), optional_input(node, 2)
        # Shapes and types only: the weights are read when the result is written (derived).
        packed, scales = constant_tensor(source), constant_tensor(scale)
        if source is None or scale is None:
            raise Skip("missing-input", "B and scales are required")
        if packed is None or scales is None:
            raise Skip("runtime-weight", "B or scales is not a constant (an initializer)")
        if packed.dtype != ir.DataType.UINT8 or packed.size != n * blocks * blob:
            raise Skip(
                "packed-layout",
                f"B {_numpy_name(packed)} {_dims(packed)} is not uint8 [N={n}, {blocks}, {blob}]",
            )
        if scales.size != n * blocks:
            raise Skip("packed-layout", f"scales {_dims(scales)} are not [N={n}, {blocks}]")
        scale_type = dtypes.from_onnx(int(elem_type(scale) or 0))
        if scale_type is None or scale_type not in DYNAMIC_DEQUANTIZE.scales_types:
            raise Skip("scale-type", f"scales of type {_numpy_name(scales)} are not the spec's")
        zp_value = optional_input(node, 3)
        zp_kind, zps = self._zero_points(zp_value, bits, n, blocks)
        zp_padding: object = []  # packed zero points' unused high bits, kept for lower
        if zps is not None and zps.shape[1] > blocks:
            rest = zps[:, blocks:]
            zp_padding = int(rest.flat[0]) if np.all(rest == rest.flat[0]) else rest.tolist()
            zps = zps[:, :blocks]
        g_idx = optional_input(node, 4)
        _check_g_idx(g_idx, k, block, zp_kind)
        bias = optional_input(node, 5)

        padded = blocks * block
        base = node.name or factory.unique_name("MatMulNBits")
        signed = zp_kind == _ZP_ABSENT  # MatMulNBits' implicit 2^(bits-1): signed q, no zps
        q_type = layout.onnx_type(bits, signed)
        weight_of = functools.partial(
            layout.standard_weight, n=n, padded=padded, bits=bits, signed=signed
        )
        src = factory.tensor_constant(
            f"{source.name or base}_{'s' if signed else 'u'}{bits}",
            derived(weight_of, [packed], q_type, [padded, n]),
            node,
            like=source,
            key=("matmul_nbits B", id(source), n, padded, bits, signed),
        )
        inputs: list[ir.Value | None] = [
            src,
            factory.tensor_constant(
                f"{scale.name or base}_t",
                derived(functools.partial(_transposed, n), [scales], scales.dtype, [blocks, n]),
                node,
                like=scale,
                key=("matmul_nbits scales", id(scale), n, blocks),
            ),
        ]
        if zps is not None:
            zp_name = (zp_value.name if zp_value is not None else None) or f"{base}_zero_points"
            inputs.append(
                factory.constant(
                    f"{zp_name}_t", zps.T.astype(layout.unsigned_type(bits)), node, like=zp_value
                )
            )
        float_type = ir.DataType(scale_type.onnx)
        dequantize = new_node(
            (DOMAIN, DYNAMIC_DEQUANTIZE.name, OPSET_VERSION),
            inputs,
            [ir.AttrString("qtype", PER_GROUP), ir.AttrInt64s("group_shape", [block, 1])],
            factory.unique_name(f"{base}_weight"),
            factory,
            (float_type, [padded, n]),
        )
        graph.insert_before(node, dequantize)
        weight = dequantize.outputs[0]
        if padded != k:  # the short last block: sliced off after dequantization
            unpad = new_node(
                ("", "Slice", None),
                [
                    weight,
                    factory.constant("quantgraph_zero_1", np.zeros(1, np.int64), node),
                    factory.constant(f"quantgraph_ends_{k}", np.array([k], np.int64), node),
                    factory.constant("quantgraph_axes_0", np.zeros(1, np.int64), node),
                ],
                [],
                factory.unique_name(f"{base}_unpad"),
                factory,
                (float_type, [k, n]),
            )
            unpad.metadata_props[PADDED] = str(k)
            graph.insert_before(node, unpad)
            weight = unpad.outputs[0]

        record = {
            "node": node.name or "",
            "attributes": attrs,
            "B": [source.name, _dims(packed)],
            "scales": [scale.name, _dims(scales)],
            "zero_points": [zp_kind, *_named_shape(zp_value), int(elem_type(zp_value) or 0)],
            "g_idx": _named_shape(g_idx),
            "zero_point_padding": zp_padding,
            "domain_version": node.version,
        }
        # inputs given by Constant nodes (in a subgraph) come back as Constant nodes
        from_nodes = [v.name for v in (source, scale, zp_value) if v and _from_constant_node(v)]
        if from_nodes:
            record["constant_nodes"] = from_nodes
        former = list(node.inputs)
        a = node.inputs[0]
        if bias is None:
            product = node
            node.domain, node.op_type, node.version = "", "MatMul", None
            node.resize_inputs(2)
            node.replace_input_with(1, weight)
        else:
            product = new_node(
                ("", "MatMul", None),
                [a, weight],
                [],
                factory.unique_name(f"{base}_matmul"),
                factory,
                (float_type, None),
            )
            graph.insert_before(node, product)
            node.domain, node.op_type, node.version = "", "Add", None
            node.resize_inputs(2)
            node.replace_input_with(0, product.outputs[0])
            node.replace_input_with(1, bias)
        node.attributes.clear()
        node.metadata_props[RECORD] = json.dumps(record, sort_keys=True)
        self.stale += former
        kind = f"{'s' if zp_kind == _ZP_ABSENT else 'u'}{bits}"
        detail = f"{kind}, per_group [{block}, 1], {scale_type.name} scales"
        if padded != k:
            detail += f", last block padded {k} -> {padded} and sliced"
        detail += ", then MatMul" + (" + Add (bias)" if bias is not None else "")
        if "accuracy_level" in attrs:
            detail += f"; accuracy_level {attrs['accuracy_level']} kept for lower"
        if zp_kind == _ZP_TYPED:
            detail += "; float zero points as integers"
        return DYNAMIC_DEQUANTIZE.name, detail

    @staticmethod
    def _zero_points(
        value: ir.Value | None, bits: int, n: int, blocks: int
    ) -> tuple[str, np.ndarray | None]:
        """(kind, zero points as uint8 [N, k_blocks] (packed: with the padding values of the
        last byte after them) or None)."""
        if value is None:
            return _ZP_ABSENT, None
        array = constant_array(value)
        if array is None:
            raise Skip("runtime-weight", "zero_points is not a constant")
        if array.dtype == np.uint8:
            width = -(-blocks * bits // 8)
            if array.size != n * width:
                raise Skip(
                    "packed-layout",
                    f"packed zero_points {list(array.shape)} are not [{n}, {width}]",
                )
            return _ZP_PACKED, layout.unpack(array.reshape(n, width), bits, width * 8 // bits)
        if array.size != n * blocks:
            raise Skip(
                "zero-point-shape", f"zero_points {list(array.shape)} are not [{n}, {blocks}]"
            )
        wide = array.astype(np.float64).reshape(n, blocks)
        top = (1 << bits) - 1
        if (
            not np.all(np.isfinite(wide))
            or np.any(wide != np.round(wide))
            or np.any((wide < 0) | (wide > top))
        ):
            raise Skip(
                "float-zero-point",
                f"float zero points that are not integers in 0..{top}: the spec's zps are integers",
            )
        return _ZP_TYPED, wide.astype(np.uint8)


def _attributes(node: ir.Node) -> dict[str, int]:
    unknown = sorted(set(node.attributes) - set(_ATTRIBUTES))
    if unknown:
        raise Skip("unknown-attribute", f"unknown attributes {unknown}")
    found = {
        name: node.attributes.get_int(name, 0) for name in _ATTRIBUTES if name in node.attributes
    }
    missing = [name for name in ("K", "N", "block_size") if name not in found]
    if missing:
        raise Skip("missing-input", f"attribute(s) {', '.join(missing)} missing")
    return found


def _check_g_idx(value: ir.Value | None, k: int, block: int, zp_kind: str) -> None:
    if value is None:
        return
    if zp_kind == _ZP_PACKED:
        # Measured (onnxruntime 1.32): with any g_idx, even k // block_size, its kernel reads
        # packed zero points another way than without (outputs ~2 apart on 0.02 scales).
        raise Skip(
            "act-order",
            "g_idx with packed zero_points: onnxruntime's g_idx kernel reads packed zero points "
            "otherwise than MatMulNBits without g_idx, which the conversion computes",
        )
    array = constant_array(value)
    if array is None:
        raise Skip("runtime-weight", "g_idx is not a constant")
    identity = np.arange(k) // block
    if array.size != k or np.any(array.reshape(-1) != identity):
        raise Skip(
            "act-order",
            "g_idx is not k // block_size (act-order): channels of a group are not one block of "
            "K, which per_group cannot express",
        )


def _from_constant_node(value: ir.Value | None) -> bool:
    producer = value.producer() if value is not None else None
    return producer is not None and producer.op_type == "Constant"


def _named_shape(value: ir.Value | None) -> list[object]:
    if value is None:
        return []
    tensor = constant_tensor(value)
    return [value.name, _dims(tensor) if tensor is not None else []]


def _dims(tensor: ir.TensorProtocol) -> list[int]:
    return list(tensor_dims(tensor))


def _numpy_name(tensor: ir.TensorProtocol) -> str:
    """The type as numpy names it (what the messages said when they read the arrays)."""
    return str(np.dtype(tensor.dtype.numpy()))


def _transposed(n: int, scales: np.ndarray) -> np.ndarray:
    """Scales [N, k_blocks] (or flat) -> [k_blocks, N]."""
    return np.ascontiguousarray(scales.reshape(n, -1).T)


def new_node(
    op: tuple[str, str, int | None],
    inputs: list[ir.Value | None],
    attributes: list[ir.Attr],
    name: str,
    factory: ConstantFactory,
    output: tuple[ir.DataType, list[int] | None],
) -> ir.Node:
    domain, op_type, version = op
    node = ir.Node(domain, op_type, inputs, attributes, name=name, version=version, num_outputs=1)
    out = node.outputs[0]
    out.name = factory.unique_name(name)
    out.type = ir.TensorType(output[0])
    if output[1] is not None:
        out.shape = ir.Shape(output[1])
    return node
