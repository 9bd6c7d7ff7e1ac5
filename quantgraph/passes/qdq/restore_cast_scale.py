"""The way back for :mod:`.cast_scale`: a DynamicDequantize with the conversion's record  ->
Cast [-> Sub] -> Mul with the original names, attributes and initializers (the weight is the
same initializer, never copied; scale and zero point get their names, shapes and float type
back). Runs before :class:`.spec_to_qdq.SpecToQdqPass`; a dequantize someone changed since (its
inputs are no longer constants) is left to the Q/DQ lowering.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.values import constant_array, optional_input
from ...ir.walk import GraphLike
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE
from ..node_rewrite import NodeRewritePass
from .cast_scale import RECORD


class RestoreCastScalePass(NodeRewritePass):
    """Gives each recorded DynamicDequantize its Cast [-> Sub] -> Mul back."""

    op_types = frozenset({DYNAMIC_DEQUANTIZE.name})

    def matches(self, node: ir.Node) -> bool:
        return (
            node.domain == DOMAIN
            and node.op_type == DYNAMIC_DEQUANTIZE.name
            and RECORD in node.metadata_props
        )

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        record: dict[str, Any] = json.loads(node.metadata_props[RECORD])
        source = node.inputs[0]
        scales = constant_array(optional_input(node, 1))
        zps = constant_array(optional_input(node, 2))
        if source is None or scales is None or (record["zero_point"] is None) != (zps is None):
            return None
        target = ir.DataType(dict((n, v) for n, v in record["cast"][2])["to"])
        float_type = target.numpy()
        cast_versions = record["versions"]
        cast_name, cast_out, cast_attributes = record["cast"]
        cast = _node(
            "Cast",
            [source],
            [ir.AttrInt64(name, value) for name, value in cast_attributes],
            (cast_name, cast_out, cast_versions[0]),
            factory,
            target,
        )
        graph.insert_before(node, cast)
        last = cast.outputs[0]
        self.stale += list(node.inputs)
        if record["sub"] is not None:
            z_name, z_shape = record["zero_point"]
            zp = _constant(factory, z_name, _shaped(zps, z_shape, float_type), node, node.inputs[2])
            sub_name, sub_out = record["sub"]
            sub = _node(
                "Sub", [last, zp], [], (sub_name, sub_out, cast_versions[1]), factory, target
            )
            graph.insert_before(node, sub)
            last = sub.outputs[0]
        s_name, s_shape = record["scale"]
        scale = _constant(
            factory, s_name, _shaped(scales, s_shape, float_type), node, node.inputs[1]
        )
        (scale_second,) = record["mul"]
        pair: list[ir.Value | None] = [last, scale] if scale_second else [scale, last]
        replace_node(node, ("", "Mul", cast_versions[2]), pair, [], target)
        node.metadata_props.pop(RECORD)
        return "Mul", "Cast" + (" -> Sub" if record["sub"] is not None else "") + " -> Mul"


def _shaped(array: np.ndarray | None, shape: list[int], dtype: np.dtype) -> np.ndarray:
    assert array is not None
    flat = array.astype(dtype).reshape(-1)
    return (flat[:1] if int(np.prod(shape)) == 1 else flat).reshape(shape)  # per_tensor: one


def _constant(
    factory: ConstantFactory, name: str, array: np.ndarray, before: ir.Node, now: ir.Value | None
) -> ir.Value:
    """The initializer ``name`` when it still holds ``array`` (a scale the conversion reused or
    another node shares), else a new constant named ``name``, beside the one the dequantize
    reads (``now``: in the graph holding it, an outer one for a captured initializer)."""
    graph = now.graph if now is not None and now.is_initializer() else factory.graph
    if isinstance(graph, ir.Graph) and name in graph.initializers:
        value = graph.initializers[name]
        current = constant_array(value)
        if (
            current is not None
            and current.dtype == array.dtype
            and current.shape == array.shape
            and current.tobytes() == array.tobytes()
        ):
            return value
    return factory.constant(name, array.copy(), before, like=now)  # ascontiguousarray: 0-d -> 1-D


def _node(
    op_type: str,
    inputs: list[ir.Value | None],
    attributes: list[ir.Attr],
    names: tuple[str, str, int | None],
    factory: ConstantFactory,
    dtype: ir.DataType,
) -> ir.Node:
    name, output, version = names
    node = ir.Node("", op_type, inputs, attributes, name=name, version=version, num_outputs=1)
    node.outputs[0].name = factory.unique_name(output)
    node.outputs[0].type = ir.TensorType(dtype)
    return node
