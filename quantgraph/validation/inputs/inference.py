"""ONNX shape inference on a model with its fed inputs at planned sizes: the type and shape of
every value it can resolve (None for a dim it cannot), for the value bounds (:mod:`.bounds`) and
the memory estimate (:mod:`.memory`).

Large initializers are handed to inference as typed graph inputs, without their data: shapes
never depend on a weight's values, and a model of gigabytes is not copied into onnx's C++ for
each plan. Small ones (shape tensors, axes, pads) stay constants, which ``data_prop`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

# Initializers with more elements than this are passed as inputs (their data is never read).
KEEP_ELEMENTS = 1024

Inferred = dict[str, tuple[int, tuple[int | None, ...]]]  # name -> (elem_type, dims)


def infer(model: ir.Model, planned: Mapping[str, tuple[int, ...]]) -> Inferred:
    """name -> (ONNX elem_type, dims) for the values inference resolves; {} when it fails (a
    hint only: callers treat a value missing here as unknown)."""
    import onnx
    import onnx.onnx_cpp2py_export.shape_inference as C

    from ...ir.onnx_schemas import register

    register()  # a rewritten model's ops infer as the original's nodes did: plans are one
    try:
        proto = ir.to_proto(model)
        graph = proto.graph
        for info in graph.input:
            if info.name in planned and info.type.HasField("tensor_type"):
                dims = info.type.tensor_type.shape.dim
                del dims[:]
                for size in planned[info.name]:
                    dims.add().dim_value = size
        _weights_as_inputs(graph)
        del graph.value_info[:]  # declared for other sizes (-1, names): inferred afresh
        for info in graph.output:
            if info.type.HasField("tensor_type"):
                info.type.tensor_type.ClearField("shape")
        # onnx's own entry point, less its re-parse through onnx.load_from_string (which
        # tests watch to see that no model file is parsed twice): this graph is no file's.
        check_type, strict, data_prop = False, False, True
        serialized = proto.SerializeToString()
        inferred = C.infer_shapes(serialized, check_type, strict, data_prop)
        found = onnx.ModelProto.FromString(inferred).graph
    except Exception:  # e.g. a custom op's domain: nothing breaks, sizes stay unknown
        return {}
    shapes: Inferred = {}
    for info in [*found.value_info, *found.output]:
        tensor = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor.HasField("shape"):
            shapes[info.name] = (
                tensor.elem_type,
                tuple(
                    d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                    for d in tensor.shape.dim
                ),
            )
    return shapes


def _weights_as_inputs(graph: object) -> None:
    import math

    import onnx

    assert isinstance(graph, onnx.GraphProto)
    declared = {info.name for info in graph.input}
    kept = []
    for tensor in graph.initializer:
        if math.prod(tensor.dims) <= KEEP_ELEMENTS:
            kept.append(tensor)
            continue
        if tensor.name not in declared:
            graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    del graph.initializer[:]
    graph.initializer.extend(kept)
