"""ONNX shape inference on a serialized copy: hints of types and shapes, and the fix that keeps
a negative declared dim from aborting it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx_ir as ir

from .values import Shape
from .walk import proto_graphs

if TYPE_CHECKING:
    import onnx


def inferred_values(model: ir.Model) -> dict[str, tuple[ir.DataType | None, Shape | None]]:
    """Element type and shape (None for symbolic dims) that ONNX shape inference finds for the
    model's values, by name (main graph).

    Run on a serialized copy: nothing it infers is written into ``model`` (the user's
    value_info stays as it was). Empty when inference fails: it is only a hint.
    """
    import onnx

    try:
        proto = negative_dims_unknown(ir.to_proto(model))
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:
        return {}
    found: dict[str, tuple[ir.DataType | None, Shape | None]] = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        if not info.type.HasField("tensor_type"):
            continue
        tensor = info.type.tensor_type
        dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim
            )
        found[info.name] = (dtype, shape)
    return found


def negative_dims_unknown(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Every negative dim value of ``proto``'s declared shapes made unknown (in place; returned).

    For a serialized copy about to meet ONNX's shape inference: a ``-1`` (as Paddle2ONNX
    declares) that reaches Slice's inference trips a ``std::clamp`` assertion that aborts the
    process (onnx 1.23); onnxruntime reads such dims as unknown too."""

    for graph in proto_graphs(proto.graph):
        for info in (*graph.input, *graph.output, *graph.value_info):
            if not info.type.HasField("tensor_type"):
                continue
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.ClearField("dim_value")
    return proto
