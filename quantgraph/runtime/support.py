"""Which nodes of a model a backend runs: every spec op tried alone on it.

A session stops at the first node its backend refuses; a user moving a model onto oneDNN (or
onto the python backend, which cannot carry 4-bit or f16 tensors) wants the whole list. Each
spec node (subgraphs too) becomes a one-node model: its
constant inputs stay constants, the others become graph inputs of the types and shapes ONNX's
shape inference finds (unknown dims taken as 1), and it runs once on ones (scales and zero
points fed at run time are then 1: the strict case, as oneDNN refuses some rows only for
non-zero zero points). A node is ``runs``, ``refused`` with oneDNN's (or quantgraph's) one-line
reason, or ``unknown`` when its inputs cannot be made (a type or shape inference does not know).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from ..backends import BackendUnavailable
from ..errors import QuantgraphError, one_line
from ..ir.shape_inference import negative_dims_unknown
from ..ir.walk import all_graphs, proto_graphs, spec_op

RUNS, REFUSED, UNKNOWN = "runs", "refused", "unknown"


@dataclass(frozen=True)
class NodeSupport:
    node: str
    op: str
    status: str  # RUNS, REFUSED or UNKNOWN
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def node_support(
    model: ir.Model, backend: str = "onednn", arithmetic: str | None = None
) -> list[NodeSupport]:
    """Every spec node of ``model`` tried alone on ``backend``, in graph order."""
    from ..ir.onnx_schemas import register

    register()
    proto = ir.to_proto(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(negative_dims_unknown(proto))
    except Exception:  # what inference cannot say stays unknown
        inferred = proto
    types = _value_types(inferred)
    opsets = list(proto.opset_import)
    found = []
    for graph in all_graphs(model):
        initializers = graph.initializers.values() if isinstance(graph, ir.Graph) else ()
        constants = {str(v.name): v.const_value for v in initializers}
        for node in graph:
            op = spec_op(node)
            if op is None:
                continue
            single = _single(node, op.name, constants, types, opsets)
            found.append(
                single
                if isinstance(single, NodeSupport)
                else _run(*single, backend, arithmetic, node.name or "", op.name)
            )
    return found


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    types: dict[str, onnx.TypeProto] = {}
    for graph in proto_graphs(model.graph):
        for value in [*graph.input, *graph.value_info, *graph.output]:
            if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
                types.setdefault(value.name, value.type)
    return types


def _single(
    node: ir.Node,
    op: str,
    constants: dict[str, ir.TensorProtocol | None],
    types: dict[str, onnx.TypeProto],
    opsets: list[onnx.OperatorSetIdProto],
) -> NodeSupport | tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The node alone as a model and its feeds; UNKNOWN when an input cannot be made."""
    inputs, initializers, feeds, names = [], [], {}, []
    for index, value in enumerate(node.inputs):
        if value is None:
            names.append("")
            continue
        local = f"in{index}"
        names.append(local)
        constant = value.const_value
        if constant is None:
            constant = constants.get(value.name or "")
        if isinstance(constant, ir.ExternalTensor):  # the node's model carries its data
            constant = ir.Tensor(constant.numpy(), dtype=constant.dtype)
        if constant is not None:
            initializers.append(ir.serde.serialize_tensor(constant))
            initializers[-1].name = local
            continue
        type_proto = types.get(value.name or "")
        if type_proto is None:
            return NodeSupport(
                node.name or "", op, UNKNOWN, f"the type of input '{value.name}' is unknown"
            )
        tensor = type_proto.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim]
        if not tensor.HasField("shape"):
            return NodeSupport(
                node.name or "", op, UNKNOWN, f"the shape of input '{value.name}' is unknown"
            )
        inputs.append(helper.make_tensor_value_info(local, tensor.elem_type, shape))
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        feeds[local] = np.ones(shape, dtype)
    proto_node = ir.serde.serialize_node(node)
    del proto_node.input[:]
    proto_node.input.extend(names)
    del proto_node.output[1:]
    proto_node.output[0] = "out"
    from ..testing import make_model

    imports = {o.domain: o.version for o in opsets}
    model = make_model(
        [proto_node],
        inputs,
        [onnx.ValueInfoProto(name="out")],
        initializers,
        opset=imports.pop("", 21),
        domains=imports,
        graph_name="node",
        check=False,
    )
    return model, feeds


def _run(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    backend: str,
    arithmetic: str | None,
    name: str,
    op: str,
) -> NodeSupport:
    from ..testing import quiet_session_options
    from .session import InferenceSession

    options = quiet_session_options(optimize=True)  # a refusal is the answer, not a log line
    try:
        session = InferenceSession(
            model.SerializeToString(), backend, arithmetic=arithmetic, options=options
        )
    except BackendUnavailable:
        raise  # the backend itself is missing: not a property of the node
    except Exception as error:  # onnxruntime's errors carry the kernel's reason
        return NodeSupport(name, op, REFUSED, one_line(error))
    try:
        session.run(None, feeds)
    except QuantgraphError as error:
        return NodeSupport(name, op, REFUSED, one_line(error))
    except Exception as error:  # the kernel's own run-time refusal
        return NodeSupport(name, op, REFUSED, one_line(error))
    return NodeSupport(name, op, RUNS)


__all__ = ["REFUSED", "RUNS", "UNKNOWN", "NodeSupport", "node_support"]
