"""Types and shapes of a model's values, for the oneDNN description.

ONNX's shape inference stops at ops it has no schema for: every value after an onnxruntime
contrib op (onnxruntime-genai's ``SimplifiedLayerNormalization``,
``SkipSimplifiedLayerNormalization``, ``GroupQueryAttention``) is left without a type, so its
MatMuls and their SiLU became Wildcards and oneDNN could form no gated-MLP partition.
onnxruntime's own symbolic shape inference (``onnxruntime.tools.symbolic_shape_infer``) knows
those ops: it fills what ONNX's leaves unknown.
It runs on a copy without the large weights (their types and shapes as graph inputs), so a
multi-gigabyte model is never serialized whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx_ir as ir
import onnx_ir.passes.common

if TYPE_CHECKING:
    import onnx

BIG_TENSOR = 1024  # bytes: larger constants go to the inference as typed inputs only


def infer(model: ir.Model) -> None:
    """Fill the types and shapes of ``model``'s main-graph values that ONNX's shape inference
    and then onnxruntime's symbolic one know (spec ops included: their schemas are
    registered). Shapes only refine the description: a failed inference changes nothing."""
    from ...ir.onnx_schemas import register

    register()
    try:
        inferred = ir.passes.common.ShapeInferencePass()(model).model
    except Exception:  # shapes only refine the description
        inferred = model
    if inferred is not model:
        _merge(model, {v.name: v for n in inferred.graph for v in n.outputs if v.name})
    if all(v.type is not None for n in model.graph for v in n.outputs if v.name):
        return
    _merge(model, _symbolic(model))


def _merge(model: ir.Model, known: dict[str, ir.Value]) -> None:
    for node in model.graph:
        for value in node.outputs:
            other = known.get(value.name or "")
            if other is None:
                continue
            if value.type is None and other.type is not None:
                value.type = other.type
            if value.shape is None and other.shape is not None:
                value.shape = other.shape


def _symbolic(model: ir.Model) -> dict[str, ir.Value]:
    """The values onnxruntime's symbolic shape inference types, by name ({} when it fails)."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        proto = _without_weights(model)
        # Its infer_shapes() writes sym_shape_infer_temp.onnx into the current directory and
        # raises where some shape stays unknown; its steps, run here, keep what it did infer.
        inference = SymbolicShapeInference(2**31 - 1, True, False, 0)
        inference._preprocess(proto)
        while inference.run_:
            inference._infer_impl()
        inferred = inference.out_mp_
    except Exception:  # shapes only refine the description
        return {}
    found: dict[str, ir.Value] = {}
    for info in inferred.graph.value_info:
        tensor = info.type.tensor_type
        if not info.type.HasField("tensor_type") or not tensor.elem_type:
            continue
        value = ir.Value(name=info.name)
        value.type = ir.TensorType(ir.DataType(tensor.elem_type))
        if tensor.HasField("shape"):
            value.shape = ir.Shape(
                [
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in tensor.shape.dim
                ]
            )
        found[info.name] = value
    return found


def _without_weights(model: ir.Model) -> onnx.ModelProto:
    """``model`` as a proto whose constants over BIG_TENSOR bytes are typed graph inputs
    (``model`` itself is left as it was)."""
    graph = model.graph
    initializers = list(graph.initializers.values())
    inputs = len(graph.inputs)
    big = [v for v in initializers if v.const_value is None or v.const_value.nbytes > BIG_TENSOR]
    try:
        for value in big:
            if value.const_value is not None:
                value.shape = value.shape or ir.Shape(value.const_value.shape.numpy())
                value.dtype = value.dtype or value.const_value.dtype
            graph.initializers.pop(value.name or "")
            graph.inputs.append(value)
        return ir.serde.serialize_model(model)
    finally:
        while len(graph.inputs) > inputs:  # one by one: each value then knows it is no input
            graph.inputs.pop()
        graph.initializers.clear()
        for value in initializers:  # in their order
            graph.initializers[value.name or ""] = value
