"""A model's whole graph moved into If branches or a Loop body (issue #34: published formats
inside subgraphs). The form's weights stay initializers of the outer graph (captured from outer
scope), become initializers of the body, or Constant nodes in the body."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WEIGHTS = ("outer", "body", "constant")
LOOP_TRIPS = 2


def _copy(
    graph: onnx.GraphProto, prefix: str, weights: str
) -> tuple[onnx.GraphProto, list[onnx.TensorProto]]:
    """``graph`` with every name but its inputs' prefixed, as a body without inputs; the
    initializers the outer graph must hold (``weights`` == outer) come back apart."""
    keep = {i.name for i in graph.input}

    def name(old: str) -> str:
        return old if old in keep or not old else prefix + old

    nodes = []
    for tensor in graph.initializer:
        renamed = onnx.TensorProto()
        renamed.CopyFrom(tensor)
        renamed.name = name(tensor.name)
        if weights == "constant":
            nodes.append(
                helper.make_node(
                    "Constant", [], [renamed.name], name=f"constant_{renamed.name}", value=renamed
                )
            )
    for node in graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        if node.name:
            copy.name = name(node.name)
        copy.input[:] = [name(i) for i in node.input]
        copy.output[:] = [name(o) for o in node.output]
        nodes.append(copy)
    outputs = []
    for out in graph.output:
        info = onnx.ValueInfoProto()
        info.CopyFrom(out)
        info.name = name(out.name)
        outputs.append(info)
    initializers = []
    for tensor in graph.initializer:
        renamed = onnx.TensorProto()
        renamed.CopyFrom(tensor)
        renamed.name = name(tensor.name)
        initializers.append(renamed)
    body = helper.make_graph(
        nodes, prefix.rstrip("_"), [], outputs, initializers if weights == "body" else []
    )
    return body, initializers if weights == "outer" else []


def in_if(model: onnx.ModelProto, weights: str) -> onnx.ModelProto:
    """The graph as both branches of one If on a new bool input ``cond``."""
    graph = model.graph
    then, then_weights = _copy(graph, "then_", weights)
    other, else_weights = _copy(graph, "else_", weights)
    node = helper.make_node(
        "If",
        ["cond"],
        [o.name for o in graph.output],
        name="if",
        then_branch=then,
        else_branch=other,
    )
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    outer = helper.make_graph(
        [node],
        f"{graph.name}_if",
        [*graph.input, cond],
        list(graph.output),
        then_weights + else_weights,
    )
    return _model(model, outer)


def in_loop(model: onnx.ModelProto, weights: str) -> onnx.ModelProto:
    """The graph as the body of a Loop of LOOP_TRIPS iterations, its outputs scan outputs."""
    graph = model.graph
    body, body_weights = _copy(graph, "body_", weights)
    body.input.extend(
        [
            helper.make_tensor_value_info("iteration", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ]
    )
    body.node.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"))
    body.output.insert(0, helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []))
    trips = numpy_helper.from_array(np.array(LOOP_TRIPS, np.int64), "trips")
    node = helper.make_node(
        "Loop", ["trips", ""], [o.name for o in graph.output], name="loop", body=body
    )
    outputs = []
    for out in graph.output:
        tensor = out.type.tensor_type
        dims = [d.dim_param or d.dim_value for d in tensor.shape.dim]
        outputs.append(
            helper.make_tensor_value_info(out.name, tensor.elem_type, [LOOP_TRIPS, *dims])
        )
    outer = helper.make_graph(
        [node], f"{graph.name}_loop", list(graph.input), outputs, [trips, *body_weights]
    )
    return _model(model, outer)


def _model(model: onnx.ModelProto, graph: onnx.GraphProto) -> onnx.ModelProto:
    nested = helper.make_model(graph, opset_imports=list(model.opset_import))
    nested.ir_version = model.ir_version
    onnx.checker.check_model(nested)
    return nested
