"""Keep named tensors or nodes of a QDQ model in float: remove their Q->DQ pairs.

The answer to "what if this layer were not quantized?" (``validate --sensitivity`` asks it,
``convert --keep-float`` writes it). A *tensor* name removes every QuantizeLinear that reads
that tensor with the DequantizeLinear(s) after it: every consumer then reads the float tensor.
A *node* name (a compute node; a tensor of the same name wins) makes that node alone read
float: each of its inputs that is DQ(Q(T)) becomes T; the pair stays for its other
consumers. Weights (DQ of a constant, no Q) have no float form in a QDQ model and stay as they are.

A Q whose representable range starts at 0 (zero point = the type's minimum) clamps negatives
away: quantize_static folds a Relu into that clamp (Conv -> Q, no Relu left), so removing the
pair would remove the Relu. The float tensor (when a node computes it: a graph input has no
Relu to fold) then goes through a Relu, which restores it and changes nothing where T was
non-negative anyway; a computed tensor whose Q really clips negatives keeps that clipping.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from ..errors import ModelError
from ..ir.names import Names
from ..ir.values import constant_array, optional_input

_DOMAINS = ("", "ai.onnx", "com.microsoft")


def _is(node: ir.Node | None, op_type: str) -> bool:
    return node is not None and node.op_type == op_type and node.domain in _DOMAINS


def pair_source(value: ir.Value | None) -> ir.Value | None:
    """T when ``value`` is the output of DQ(Q(T)) (an activation's Q->DQ pair), else None."""
    dq = None if value is None else value.producer()
    if not _is(dq, "DequantizeLinear") or dq is None or not dq.inputs:
        return None
    q = dq.inputs[0].producer() if dq.inputs[0] is not None else None
    if not _is(q, "QuantizeLinear") or q is None or not q.inputs:
        return None
    return q.inputs[0]


def quantized_names(graph: ir.Graph) -> tuple[set[str], set[str]]:
    """(tensors some QuantizeLinear reads, named nodes reading some DQ(Q(T))) of ``graph``."""
    tensors = {
        n.inputs[0].name
        for n in graph
        if _is(n, "QuantizeLinear") and n.inputs and n.inputs[0] is not None and n.inputs[0].name
    }
    nodes = {
        n.name
        for n in graph
        if n.name and not _is(n, "DequantizeLinear") and any(pair_source(v) for v in n.inputs)
    }
    return tensors, nodes


def keep_float(model: ir.Model, names: Sequence[str], label: str = "the model") -> ir.Model:
    """Remove, in place, the Q->DQ pairs of each named tensor or node of ``model``'s main graph
    (see the module's doc); a name that is neither raises ModelError naming it."""
    graph = model.graph
    tensors, nodes = quantized_names(graph)
    for name in names:
        if name not in tensors and name not in nodes:
            raise ModelError(
                f"--keep-float: {label} has no quantized tensor or node named '{name}' "
                "(a tensor a QuantizeLinear reads, or a node reading a Q->DQ pair)"
            )
    by_name = {n.name: n for n in graph if n.name}
    relus: dict[str, ir.Value] = {}
    new_names = Names.of(model)
    for name in names:
        is_tensor = name in tensors  # a tensor's name wins over a node's of the same name
        for node in list(graph) if is_tensor else [by_name[name]]:
            for index, value in enumerate(node.inputs):
                source = pair_source(value)
                if source is None or value is None or (is_tensor and source.name != name):
                    continue
                kept = _float_of(graph, value, source, relus, new_names)
                node.replace_input_with(index, kept)
        for index, value in enumerate(list(graph.outputs)):  # DQ(Q(T)) as a graph output
            source = pair_source(value)
            if is_tensor and source is not None and source.name == name and value.name:
                kept = _float_of(graph, value, source, relus, new_names)
                output_name = value.name
                value.name = new_names.unique(f"{output_name}_quantized")
                kept.name = output_name  # the graph output keeps its name
                graph.outputs[index] = kept
    _drop_unused_pairs(graph)
    return model


def _float_of(
    graph: ir.Graph,
    pair_output: ir.Value,
    source: ir.Value,
    relus: dict[str, ir.Value],
    names: Names,
) -> ir.Value:
    """What replaces DQ(Q(source)): ``source``, through a Relu where the Q clamps at 0."""
    dq = pair_output.producer()
    q = dq.inputs[0].producer() if dq is not None and dq.inputs[0] is not None else None
    if q is None or source.producer() is None or not _clamps_at_zero(q):
        return source  # a graph input has no Relu folded into its Q
    key = source.name or str(id(source))
    if key not in relus:
        relu = ir.node("Relu", [source], name=names.unique(f"{q.name or key}_kept_float_relu"))
        relu.outputs[0].name = names.unique(f"{key}_kept_float")
        if source.dtype is not None:
            relu.outputs[0].dtype = source.dtype
        relu.outputs[0].shape = source.shape
        graph.insert_before(q, relu)
        relus[key] = relu.outputs[0]
    return relus[key]


def _clamps_at_zero(q: ir.Node) -> bool:
    """Whether Q's zero point is its type's minimum (absent: uint8 0), so Q clamps at 0."""
    zp_value = optional_input(q, 2)
    if zp_value is None:
        return True
    zp = constant_array(zp_value)
    if zp is None or zp.dtype.kind not in "iu":
        return False
    return bool(np.all(zp == np.iinfo(zp.dtype).min))


def _drop_unused_pairs(graph: ir.Graph) -> None:
    """Remove the DQ then Q nodes nothing reads any more (graph outputs count as reads)."""
    outputs = set(graph.outputs)
    for op_type in ("DequantizeLinear", "QuantizeLinear"):
        for node in list(graph):
            if not _is(node, op_type):
                continue
            if all(not v.uses() and v not in outputs for v in node.outputs):
                graph.remove(node, safe=True)
