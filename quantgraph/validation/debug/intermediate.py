"""Every tensor both models compute under the same name, exposed as outputs to compare.

quantgraph keeps names: a rewritten node's output has the name the original node's had, so
the two runs line up by name, and the original's node order says which differing tensor came
first. Only the main graph's values are exposed (subgraph values live in their own scopes).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
import onnx_ir as ir

from ...ir.loadable import graph_only
from ...ir.mapped_data import external_folders, map_external
from ...ir.model_files import copy_model
from ...ir.shape_inference import negative_dims_unknown
from ...ir.walk import GraphLike, spec_op


@dataclass(frozen=True)
class Producer:
    """The node that computes a tensor: its name and op type, in the original model."""

    node: str
    op_type: str


def with_all_outputs(
    model: ir.Model | onnx.ModelProto, base: ir.Model | None = None
) -> tuple[ir.Model, list[str]]:
    """A copy of ``model`` whose graph also outputs every typed value its main-graph nodes
    compute, and those values' names in node order (its weights are ``model``'s: read from
    the same files, never copied into a proto for inference). A proto's external weights are
    read from the folder ``base``'s are (a copy of ``base`` changed in memory)."""
    from ...ir.onnx_schemas import register

    register()  # the rewritten model's ops need their schemas for inference
    if isinstance(model, onnx.ModelProto):
        model = _from_proto(model, base)
    inferred = onnx.shape_inference.infer_shapes(negative_dims_unknown(graph_only(model)))
    typed = {
        info.name: info.type
        for info in (*inferred.graph.value_info, *inferred.graph.output)
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type
    }
    exposed = copy_model(model)
    present = {o.name for o in exposed.graph.outputs}
    names = []
    for node in exposed.graph:
        for value in node.outputs:
            name = value.name
            if name and name in typed:
                names.append(name)
                if name not in present:
                    value.type = ir.serde.deserialize_type_proto_for_type(typed[name])
                    value.shape = ir.serde.deserialize_type_proto_for_shape(typed[name])
                    exposed.graph.outputs.append(value)
                    present.add(name)
    return exposed, names


def _from_proto(proto: onnx.ModelProto, base: ir.Model | None) -> ir.Model:
    model = ir.from_proto(proto)
    folders = {} if base is None else external_folders(base)
    if folders:
        map_external(model, folders)
    return model


def producers(graph: GraphLike) -> dict[str, Producer]:
    """Each main-graph value's producing node (name and op type)."""
    found = {}
    for node in graph:
        for value in node.outputs:
            if value.name:
                found[value.name] = Producer(node.name or "", node.op_type)
    return found


def after_quantization(graph: GraphLike) -> dict[str, str]:
    """For a quantized model compared with its float original: each tensor that is quantized
    and dequantized again, mapped to the dequantized tensor, which is what the next layer
    reads (as onnxruntime's ``qdq_loss_debug`` pairs a float activation with its post-QDQ
    value). quantize_static folds a Relu into Q's clamp, so the pre-QDQ tensor of that name
    still holds negatives: comparing it with the float Relu's output would measure nothing."""
    found: dict[str, str] = {}
    for node in graph:
        if not _is_qdq(node, quantize=True) or not node.inputs or node.inputs[0] is None:
            continue
        source = node.inputs[0].name
        for use in node.outputs[0].uses():
            consumer = use.node
            if _is_qdq(consumer, quantize=False) and consumer.outputs[0].name and source:
                found.setdefault(source, consumer.outputs[0].name)
    return found


def _is_qdq(node: ir.Node, *, quantize: bool) -> bool:
    op = spec_op(node)
    if op is not None:
        return op.is_quantize == quantize
    wanted = "QuantizeLinear" if quantize else "DequantizeLinear"
    return node.op_type == wanted and node.domain in ("", "ai.onnx", "com.microsoft")
