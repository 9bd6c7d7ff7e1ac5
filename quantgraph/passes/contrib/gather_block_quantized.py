"""com.microsoft GatherBlockQuantized  ->  Gather(q), Gather(scales)[, Gather(zps)] ->
DynamicDequantize(per_group) [-> Slice].

What MatMulNBitsQuantizer writes for an embedding table (op_types_to_quantize with "Gather":
int4 or uint4 data + uint4 zero points) and Olive's RTN (uint8 data packing 4 or 8 bits, packed
uint8 zero points, MatMulNBits' conventions):

GatherBlockQuantized(data, indices, scales, zp?){gather_axis g, quantize_axis a, block_size B}
    ->  rows  = Gather(q, indices, axis=g)          q: data as one 8-bit value per element
        s     = Gather(scales, indices, axis=g)     the original scales initializer, unchanged
        z     = Gather(zps, indices, axis=g)        zero points as 8-bit values
        out   = DynamicDequantize(rows, s, z){per_group, group_shape B on a', 1 elsewhere}
        [-> Slice(out, 0:K on a') when K is not whole blocks: q is padded along a]

Only the gathered rows are dequantized (a 50k vocabulary is never expanded). ONNX's Gather
takes no 4-bit types, so q holds one value per byte (s8/u8): twice the packed table, a quarter
of the float one. onnxruntime computes ``float(q - zp) * scale`` per element, the spec's
formula. Its zero point when there is none: 2^(bits-1) for uint8 data (q becomes signed,
q - 2^(bits-1), without zps, as in :mod:`.matmul_nbits`), 0 for int4/uint4 data.

Differences kept by design: an index out of range gives GatherBlockQuantized a row of zeros and
Gather an error. quantize_axis == gather_axis (each gathered row's scale is a block's of rows)
is left alone ("gather-axis"). The node that keeps the output records what lowering needs
(metadata ``quantgraph.gather_block_quantized``): :mod:`.restore_gather_block` gives the node
back with the same bytes.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx_ir as ir

from ...ir.derived_tensors import derived
from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import (
    constant_array,
    constant_tensor,
    elem_type,
    optional_input,
    tensor_dims,
    value_shape,
)
from ...ir.walk import GraphLike
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE, OPSET_VERSION, PER_GROUP, dtypes
from ..node_rewrite import NodeRewritePass, import_spec_domain
from ..report import RewriteReport, Skip
from . import nbits_layout as layout
from .matmul_nbits import CONTRIB, new_node

RECORD = "quantgraph.gather_block_quantized"  # node metadata: JSON of what lowering needs
_ATTRIBUTES = ("gather_axis", "quantize_axis", "block_size", "bits")
DEFAULTS = {"gather_axis": 0, "quantize_axis": 1, "block_size": 128, "bits": 4}  # the kernel's
_FOUR_BIT = {ir.DataType.INT4: "s", ir.DataType.UINT4: "u"}


def is_gather_block_quantized(node: ir.Node) -> bool:
    return node.domain == CONTRIB and node.op_type == "GatherBlockQuantized"


class GatherBlockQuantizedPass(NodeRewritePass):
    """Rewrites every GatherBlockQuantized whose table is constant into Gathers of the
    quantized rows and the spec's per_group DynamicDequantize of those rows."""

    op_types = frozenset({"GatherBlockQuantized"})

    def matches(self, node: ir.Node) -> bool:
        return is_gather_block_quantized(node)

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        import_spec_domain(model, report, ("GatherBlockQuantized",))

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        attrs = _attributes(node)
        source, indices, scale = (optional_input(node, i) for i in range(3))
        zp_value = optional_input(node, 3)
        if source is None or indices is None or scale is None:
            raise Skip("missing-input", "data, indices and scales are required")
        # Shapes and types only: the table is read when the result is written (derived).
        data, scales = constant_tensor(source), constant_tensor(scale)
        if data is None or scales is None:
            raise Skip("runtime-weight", "data or scales is not a constant (an initializer)")
        data_type = elem_type(source)
        bits, block = attrs["bits"], attrs["block_size"]
        packed = data_type == ir.DataType.UINT8
        if not packed and data_type not in _FOUR_BIT:
            raise Skip(
                "quantized-type", f"data of type {_numpy_name(data)}: int4, uint4, uint8 taken"
            )
        if bits not in (layout.BITS if packed else (4,)):
            raise Skip("quantized-type", f"{bits}-bit data: the spec has 4 and 8 bits")
        data_shape = tensor_dims(data)
        rank = len(data_shape)
        g, a = (_axis(attrs[name], rank) for name in ("gather_axis", "quantize_axis"))
        if g == a:
            raise Skip(
                "gather-axis",
                "quantize_axis equals gather_axis: a gathered row's scale is its block's of "
                "rows, which per_group over the gathered rows cannot express",
            )
        if packed and (g != 0 or a != rank - 1):
            raise Skip("packed-layout", "uint8 data needs gather_axis 0 and the last quantize_axis")
        if block < 16 or block & (block - 1):
            raise Skip("packed-layout", f"block_size {block} is not a power of 2 from 16")
        values_shape = (*data_shape[:-1], data_shape[-1] * 8 // bits) if packed else data_shape
        extent = values_shape[a]
        blocks = -(-extent // block)
        want = (*values_shape[:a], blocks, *values_shape[a + 1 :])
        scales_shape = tensor_dims(scales)
        if scales_shape != want:
            raise Skip("packed-layout", f"scales {list(scales_shape)} are not {list(want)}")
        scale_type = dtypes.from_onnx(int(elem_type(scale) or 0))
        if scale_type is None or scale_type not in DYNAMIC_DEQUANTIZE.scales_types:
            raise Skip("scale-type", f"scales of type {_numpy_name(scales)} are not the spec's")
        index_shape = value_shape(indices)
        if index_shape is None:
            raise Skip("unknown-shape", "the indices' rank is unknown: group_shape needs it")

        zps, zp_padding = _zero_points(zp_value, data_type, bits, scales_shape)
        signed = (packed and zps is None) or data_type == ir.DataType.INT4
        table_shape = list(values_shape)
        table_shape[a] = blocks * block
        table_of = functools.partial(
            _table,
            packed=packed,
            bits=bits,
            axis=a,
            shape=tuple(table_shape),
            data_shape=data_shape,
            signed=signed,
        )
        q_type = layout.onnx_type(8, signed)  # one value a byte: Gather takes no 4-bit types

        base = node.name or factory.unique_name("GatherBlockQuantized")
        kind = f"{'s' if signed else 'u'}{bits}"

        def gather(value: ir.Value, name: str, dtype: ir.DataType) -> ir.Value:
            made = new_node(
                ("", "Gather", None),
                [value, indices],
                [ir.AttrInt64("axis", g)],
                factory.unique_name(f"{base}_{name}"),
                factory,
                (dtype, None),
            )
            graph.insert_before(node, made)
            return made.outputs[0]

        table = factory.tensor_constant(
            f"{source.name or base}_{kind}_8bit",
            derived(table_of, [data], q_type, table_shape),
            node,
            key=("gather_block_quantized table", id(source), bits, a, block, signed),
        )
        inputs: list[ir.Value | None] = [
            gather(table, "rows", q_type),
            gather(scale, "scales", ir.DataType(scale_type.onnx)),
        ]
        if zps is not None:
            zp_name = (zp_value.name if zp_value is not None else None) or f"{base}_zero_points"
            z = factory.constant(f"{zp_name}_8bit", zps, node)
            inputs.append(gather(z, "zero_points", ir.DataType(int(elem_type(z) or 0))))
        out_rank = rank - 1 + len(index_shape)
        at = a if a < g else a + len(index_shape) - 1
        group = [1] * out_rank
        group[at] = block
        attributes = [ir.AttrString("qtype", PER_GROUP), ir.AttrInt64s("group_shape", group)]
        record = {
            "node": node.name or "",
            "attributes": {k: v for k, v in attrs.items() if k in node.attributes},
            "data": [source.name, int(data_type or 0), list(data_shape)],
            "zero_points": _named(zp_value),
            "zero_point_padding": zp_padding,
            "extent": extent,
            "domain_version": node.version,
        }
        self.stale += list(node.inputs)
        float_type = ir.DataType(scale_type.onnx)
        if blocks * block != extent:  # the short last block: sliced off after dequantization
            dequantize = new_node(
                (DOMAIN, DYNAMIC_DEQUANTIZE.name, OPSET_VERSION),
                inputs,
                attributes,
                factory.unique_name(f"{base}_dequantize"),
                factory,
                (float_type, None),
            )
            graph.insert_before(node, dequantize)
            unpad: list[ir.Value | None] = [
                dequantize.outputs[0],
                factory.constant("quantgraph_zero_1", np.zeros(1, np.int64), node),
                factory.constant(f"quantgraph_ends_{extent}", np.array([extent], np.int64), node),
                factory.constant(f"quantgraph_axes_{at}", np.array([at], np.int64), node),
            ]
            replace_node(node, ("", "Slice", None), unpad, [], float_type)
        else:
            op = (DOMAIN, DYNAMIC_DEQUANTIZE.name, OPSET_VERSION)
            replace_node(node, op, inputs, attributes, float_type)
        node.metadata_props[RECORD] = json.dumps(record, sort_keys=True)
        detail = f"{kind} rows gathered, then per_group {group}, {scale_type.name} scales"
        if blocks * block != extent:
            detail += f", last block padded {extent} -> {blocks * block} and sliced"
        return DYNAMIC_DEQUANTIZE.name, detail


def _attributes(node: ir.Node) -> dict[str, int]:
    unknown = sorted(set(node.attributes) - set(_ATTRIBUTES))
    if unknown:
        raise Skip("unknown-attribute", f"unknown attributes {unknown}")
    return {name: node.attributes.get_int(name, default) for name, default in DEFAULTS.items()}


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise Skip("packed-layout", f"axis {axis} is out of range for data of rank {rank}")
    return axis % rank


def _table(
    data: np.ndarray,
    *,
    packed: bool,
    bits: int,
    axis: int,
    shape: tuple[int, ...],
    data_shape: tuple[int, ...],
    signed: bool,
) -> np.ndarray:
    """The table as one 8-bit value per element (uint8 bytes; int8's when ``signed``), zeros
    past the data along ``axis`` (whole blocks). Packed uint8 data is unpacked along its last
    axis (``axis``), 2^(bits-1) subtracted when ``signed``; int4/uint4 data (its stored bytes,
    ``data_shape`` values in ONNX's flat packing) is widened, int4 sign-extended."""
    if packed:
        return layout.unpacked_rows(data, bits, shape[axis], signed)
    count = int(np.prod(data_shape))
    values = layout.unpack(data, 4, count).reshape(data_shape)
    if signed:  # int4: the nibble's two's complement as int8 (uint8 arithmetic wraps)
        values ^= 0x08
        values -= 0x08
    table = np.zeros(shape, np.uint8)
    index = tuple(
        slice(0, data_shape[axis]) if d == axis else slice(None) for d in range(len(shape))
    )
    table[index] = values
    return table


def _numpy_name(tensor: ir.TensorProtocol) -> str:
    """The type as numpy names it (what the messages said when they read the arrays)."""
    return str(np.dtype(tensor.dtype.numpy()))


def _zero_points(
    value: ir.Value | None, data_type: ir.DataType | None, bits: int, shape: tuple[int, ...]
) -> tuple[np.ndarray | None, object]:
    """(zero points as 8-bit values (int8 for int4 data) of the scales' shape or None, the
    packed bytes' unused high bits for lower). Absent ones of int4/uint4 data are 0: no zps."""
    if value is None:
        return None, []
    array = constant_array(value)
    if array is None:
        raise Skip("runtime-weight", "zero_points is not a constant")
    if elem_type(value) != data_type:
        raise Skip("zero-point-shape", f"zero_points of type {array.dtype}, not the data's")
    if data_type != ir.DataType.UINT8:
        if tuple(array.shape) != shape:
            raise Skip("zero-point-shape", f"zero_points {list(array.shape)} are not {list(shape)}")
        return array.astype(np.int8 if data_type == ir.DataType.INT4 else np.uint8), []
    width = -(-shape[-1] * bits // 8)
    if tuple(array.shape) != (*shape[:-1], width):
        raise Skip(
            "zero-point-shape", f"packed zero_points {list(array.shape)} are not [..., {width}]"
        )
    unpacked = layout.unpack(array, bits, width * 8 // bits)
    rest = unpacked[..., shape[-1] :]
    padding: object = []
    if rest.size:
        padding = int(rest.flat[0]) if np.all(rest == rest.flat[0]) else rest.tolist()
    return unpacked[..., : shape[-1]].copy(), padding


def _named(value: ir.Value | None) -> list[object]:
    if value is None:
        return []
    array = constant_array(value)
    return [value.name, int(elem_type(value) or 0), list(array.shape) if array is not None else []]
