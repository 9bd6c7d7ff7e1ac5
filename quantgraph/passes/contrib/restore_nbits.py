"""The way back for :mod:`.matmul_nbits`: DynamicDequantize [-> Slice] -> MatMul [-> Add] with
the conversion's record  ->  the original com.microsoft MatMulNBits.

Runs before :class:`.spec_to_qdq.SpecToQdqPass`, so a converted MatMulNBits model lowers to
MatMulNBits (same attributes, same initializer names and bytes), not to its QDQ form;
``lower(to_qdq=True)`` leaves this pass out. A chain someone changed since (another user of the
weight, a different op) is not the record's any more: it is left to the Q/DQ lowering.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import onnx_ir as ir

from ...ir.derived_tensors import derived
from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array, constant_tensor, optional_input, tensor_dims
from ...ir.walk import GraphLike, is_standard, only_user
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE
from ..node_rewrite import NodeRewritePass
from ..qdq.short_blocks import PADDED
from . import nbits_layout as layout
from .matmul_nbits import CONTRIB, RECORD


class RestoreMatMulNBitsPass(NodeRewritePass):
    """Folds each recorded chain back into its MatMulNBits."""

    op_types = frozenset({DYNAMIC_DEQUANTIZE.name})

    def matches(self, node: ir.Node) -> bool:
        return node.domain == DOMAIN and node.op_type == DYNAMIC_DEQUANTIZE.name

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        chain = recorded_chain(node)
        if chain is None:
            return None
        *between, last = chain
        record: dict[str, Any] = json.loads(last.metadata_props[RECORD])
        attrs: dict[str, int] = record["attributes"]
        bits, block, k = attrs.get("bits", 4), attrs["block_size"], attrs["K"]
        # Shapes and types only: the weights are read when the result is written (derived).
        src_value, scale_value = node.inputs[0], optional_input(node, 1)
        src, scales = constant_tensor(src_value), constant_tensor(scale_value)
        zps = constant_array(optional_input(node, 2))
        kind = record["zero_points"][0]
        if src is None or scales is None or (kind != "absent") != (zps is not None):
            return None
        signed = kind == "absent"  # conversion subtracted MatMulNBits' implicit zero point
        b_name, b_shape = record["B"]
        n = attrs["N"]
        width = int(np.prod(b_shape)) // n  # bytes of a row of B
        padded = width * 8 // bits
        if src.dtype != layout.onnx_type(bits, signed) or tensor_dims(src) != (padded, n):
            return None  # not the tensor conversion wrote
        s_name, s_shape = record["scales"]
        nodes = record.get("constant_nodes", [])

        def home(index: int, name: str) -> ir.Value | None:  # beside the converted constant
            return None if name in nodes else optional_input(node, index)

        b_of = functools.partial(
            layout.matmul_nbits_bytes, n=n, padded=padded, bits=bits, signed=signed
        )
        s_of = functools.partial(_untransposed, tuple(s_shape))
        inputs: list[ir.Value | None] = [
            (between[-1] if last.op_type == "Add" else last).inputs[0],  # A
            factory.tensor_constant(
                b_name,
                derived(b_of, [src], ir.DataType.UINT8, b_shape),
                node,
                like=home(0, b_name),
                key=("matmul_nbits B back", id(src_value), n, padded, bits, signed),
            ),
            factory.tensor_constant(
                s_name,
                derived(s_of, [scales], scales.dtype, s_shape),
                node,
                like=home(1, s_name),
                key=("matmul_nbits scales back", id(scale_value), tuple(s_shape)),
            ),
        ]
        if zps is not None:
            _, z_name, z_shape, z_type = record["zero_points"]
            if kind == "packed":
                width = int(np.prod(z_shape)) // n
                columns = zps.astype(np.uint8).T
                padding = record.get("zero_point_padding", [])
                if padding != []:  # the last byte's unused bits, as the original had them
                    extra = width * 8 // bits - columns.shape[1]
                    fill = np.broadcast_to(np.asarray(padding, np.uint8), (n, extra))
                    columns = np.concatenate([columns, fill], axis=1)
                zp_array = layout.pack(columns, bits, width)
            else:
                zp_array = zps.astype(np.uint8).T.astype(ir.DataType(z_type).numpy())
            inputs.append(
                factory.constant(z_name, zp_array.reshape(z_shape), node, like=home(2, z_name))
            )
        if record["g_idx"]:
            g_name, g_shape = record["g_idx"]
            identity = (np.arange(k) // block).astype(np.int32).reshape(g_shape)
            g_idx = factory.constant(g_name, identity, node, like=node.inputs[0])
            inputs += [None] * (4 - len(inputs)) + [g_idx]
        if last.op_type == "Add":
            inputs += [None] * (5 - len(inputs)) + [last.inputs[1]]

        self.stale += [*node.inputs, *(v for n in between for v in n.inputs)]
        restore_contrib_node(model, graph, last, "MatMulNBits", record, inputs, attrs)
        last.metadata_props.pop(RECORD)
        for dead in reversed([node, *between]):  # users first
            graph.remove(dead, safe=True)
        node.name = record["node"] or node.name  # the report names the node restored
        kind_text = {"absent": "no zero points", "packed": "packed zero points"}
        return "MatMulNBits", (
            f"{bits}-bit, block_size {block}, K {k}, N {n}, "
            + kind_text.get(kind, "float zero points")
            + (", bias" if last.op_type == "Add" else "")
        )


def _untransposed(shape: tuple[int, ...], scales: np.ndarray) -> np.ndarray:
    """Converted scales [k_blocks, N] -> MatMulNBits' ``shape`` ([N, k_blocks] or flat)."""
    return np.ascontiguousarray(scales.T).reshape(shape)


def recorded_chain(dequantize: ir.Node) -> list[ir.Node] | None:
    """[Slice?, MatMul, Add?] from ``dequantize`` to the node holding the record, or None."""
    found: list[ir.Node] = []
    current = dequantize
    while True:
        user = only_user(current.outputs[0])
        if user is None or not is_standard(user):
            return None
        if user.op_type == "Slice" and PADDED in user.metadata_props and not found:
            found.append(user)
        elif (
            user.op_type == "MatMul"
            and user.inputs[1] is current.outputs[0]
            and not (found and found[-1].op_type == "MatMul")
        ):
            found.append(user)
            if RECORD in user.metadata_props:
                return found
        elif (
            user.op_type == "Add"
            and found[-1:] == [current]
            and current.op_type == "MatMul"
            and user.inputs[0] is current.outputs[0]
        ):
            found.append(user)
            return found if RECORD in user.metadata_props else None
        else:
            return None
        current = user


def restore_contrib_node(
    model: ir.Model,
    graph: GraphLike,
    node: ir.Node,
    op_type: str,
    record: dict[str, Any],
    inputs: list[ir.Value | None],
    attrs: dict[str, int],
) -> list[ir.Value | None]:
    """``node`` made the com.microsoft ``op_type`` node conversion recorded (its domain version
    from ``record``, integer attributes ``attrs``), the domain imported where it now runs;
    returns ``node``'s former inputs (:func:`replace_node`). An untyped output takes the type
    of the scales (input 2 of both ops: the output's type, float16 in a float16 model)."""
    scales = inputs[2] if len(inputs) > 2 else None
    dtype = scales.dtype if scales is not None and scales.dtype is not None else None
    former = replace_node(
        node,
        (CONTRIB, op_type, record.get("domain_version")),
        inputs,
        [ir.AttrInt64(name, value) for name, value in attrs.items()],
        dtype or ir.DataType.FLOAT,
    )
    model.opset_imports.setdefault(CONTRIB, 1)
    if isinstance(graph, ir.Function):
        graph.opset_imports.setdefault(CONTRIB, 1)
    return former
