"""Keep named tensors or nodes of a QDQ model in float: remove their Q->DQ pairs.

The answer to "what if this layer were not quantized?" (``validate --sensitivity`` asks it,
``convert --keep-float`` writes it). A *tensor* name removes every QuantizeLinear that reads
that tensor with the DequantizeLinear(s) after it: every consumer then reads the float tensor.
A *node* name (a compute node; a tensor of the same name wins) makes that node alone read
float: each of its inputs that is DQ(Q(T)) becomes T; the pair stays for its other
consumers. Weights (DQ of a constant, no Q) have no float form in a QDQ model: they stay as they
are, unless ``float_model`` is given, where a named node's weights become the float model's
(its node of the same name, the input at the same position): the node then computes in float
with the weights the quantizer started from.

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

from ...errors import ModelError
from ...ir.names import Names
from ...ir.values import constant_array, optional_input

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


def is_weight_dequantize(value: ir.Value | None) -> bool:
    """Whether ``value`` is DQ(constant): a weight, which has no Q before it."""
    dq = None if value is None else value.producer()
    if not _is(dq, "DequantizeLinear") or dq is None or not dq.inputs or dq.inputs[0] is None:
        return False
    source = dq.inputs[0]
    producer = source.producer()
    return source.const_value is not None or (
        producer is not None and producer.op_type == "Constant"
    )


def weights_named(model: ir.Model, names: Sequence[str]) -> list[str]:
    """The ``names`` that name a node with quantized weights and no quantized tensor: their
    float weights are only in the float model (``keep_float(..., float_model=...)``)."""
    tensors, _ = quantized_names(model.graph)
    weighted = {n.name for n in model.graph if n.name and any(map(is_weight_dequantize, n.inputs))}
    return [name for name in names if name in weighted and name not in tensors]


def keep_float(
    model: ir.Model,
    names: Sequence[str],
    label: str = "the model",
    float_model: ir.Model | None = None,
) -> ir.Model:
    """Remove, in place, the Q->DQ pairs of each named tensor or node of ``model``'s main graph
    (see the module's doc); a name that is neither raises ModelError naming it. With
    ``float_model``, a named node's weights become the float model's too."""
    graph = model.graph
    tensors, nodes = quantized_names(graph)
    weighted = set()
    if float_model is not None:
        weighted = {n.name for n in graph if n.name and any(map(is_weight_dequantize, n.inputs))}
    for name in names:
        if name not in tensors and name not in nodes and name not in weighted:
            raise ModelError(
                f"--keep-float: {label} has no quantized tensor or node named '{name}' "
                "(a tensor a QuantizeLinear reads, or a node reading a Q->DQ pair"
                + (", or a node with quantized weights)" if float_model is not None else ")")
            )
    by_name = {n.name: n for n in graph if n.name}
    if float_model is not None:
        _float_weights(model, [n for n in names if n not in tensors and n in weighted], float_model)
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
                if kept.type is None:  # a graph output is declared with its type
                    kept.type, kept.shape = value.type, kept.shape or value.shape
                value.name = new_names.unique(f"{output_name}_quantized")
                kept.name = output_name  # the graph output keeps its name
                graph.outputs[index] = kept
    _drop_unused_pairs(graph)
    return model


def _float_weights(model: ir.Model, names: Sequence[str], float_model: ir.Model) -> None:
    """Each named node's DQ(weight) inputs replaced by the float model's constants."""
    graph = model.graph
    twins = {n.name: n for n in float_model.graph if n.name}
    by_name = {n.name: n for n in graph if n.name}
    taken = {v.name for v in graph.initializers.values() if v.name}
    for name in names:
        node, twin = by_name[name], twins.get(name)
        for index, value in enumerate(node.inputs):
            if not is_weight_dequantize(value):
                continue
            float_value = optional_input(twin, index) if twin is not None else None
            array = constant_array(float_value)
            if array is None or value is None or array.dtype.kind != "f":
                raise ModelError(
                    f"--keep-float: the float model has no constant float input {index} of a "
                    f"node named '{name}' (the weights to keep in float)"
                )
            known = value.shape
            if known is not None and known.is_static() and tuple(known) != array.shape:
                raise ModelError(
                    f"--keep-float: node '{name}' input {index}: the float model's weight is "
                    f"{list(array.shape)}, the quantized one {list(known)}"
                )
            base = float_value.name if float_value is not None and float_value.name else name
            unique, number = base, 1
            while unique in taken:
                unique, number = f"{base}_float{number}", number + 1
            taken.add(unique)
            kept = ir.Value(
                name=unique,
                shape=ir.Shape(array.shape),
                type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                const_value=ir.tensor(array, name=unique),
            )
            graph.register_initializer(kept)
            node.replace_input_with(index, kept)


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
    """Remove the DQ then Q nodes nothing reads any more (graph outputs count as reads), and
    the quantized weights only they read."""
    outputs = set(graph.outputs)
    for op_type in ("DequantizeLinear", "QuantizeLinear"):
        for node in list(graph):
            if not _is(node, op_type):
                continue
            if all(not v.uses() and v not in outputs for v in node.outputs):
                inputs = [v for v in node.inputs if v is not None]
                graph.remove(node, safe=True)
                for value in inputs:
                    unused = not value.uses() and not value.is_graph_input()
                    if value.is_initializer() and unused and value.name:
                        graph.initializers.pop(value.name, None)
