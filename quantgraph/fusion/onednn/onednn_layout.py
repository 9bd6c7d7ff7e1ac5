"""Channels-last partitions: int8 convolutions want NXC data, and a partition described NCX
reorders its activations on every call. A partition whose activations are all rank-4 and
layout-free around its convolutions and pooling (per-tensor Quantize/Dequantize, element-wise
ops, an Add of two such tensors) is described NXC instead; the session's graph then gets a
Transpose to NHWC before each such input and back after each such output, and a Transpose back
that only feeds Transposes to NHWC cancels with them, so a chain of partitions runs NHWC end to
end with one Transpose in and one out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import onnx_ir as ir

from ...spec import OPS
from . import onednn_description as description
from .onednn_description import Op, Tensor, string

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
LAYOUT_OPS = ("Convolution", "MaxPool", "AvgPool")  # data_format NCX -> NXC
# Ops whose arithmetic is the same in either layout (element by element, one scale).
FREE = ("ReLU", "Clamp", "Sigmoid", "Tanh", "HardSwish", "GELU", "Elu", "LeakyReLU", "Abs")
# The static spec ops, oneDNN's Quantize and Dequantize: layout-free when per_tensor.
STATIC_KINDS = frozenset(op.static_form.name for op in OPS.values())
TAG = "quantgraph.onednn.layout"  # metadata of the Transposes this module inserts


def channels_last(
    tensors: dict[int, Tensor], ops: tuple[Op, ...]
) -> tuple[dict[int, Tensor], tuple[Op, ...], set[int]] | None:
    """The partition's tensors and ops described NXC and the ids of its NHWC activations;
    None when some op would compute differently in NHWC (or nothing has a layout)."""
    act: set[int] = set()
    for op in ops:
        if op.kind in LAYOUT_OPS:
            act.update((op.inputs[0], op.outputs[0]))
    if not act:
        return None
    changed = True
    while changed:  # spread through the layout-free ops to every activation they touch
        changed = False
        for op in ops:
            data = [op.inputs[0], *op.outputs] if op.inputs else list(op.outputs)
            if op.kind in ("Add", "Multiply", "Subtract"):
                data = [*op.inputs, *op.outputs]
            if op.kind in LAYOUT_OPS or not act.intersection(data):
                continue
            if not _free(op, tensors):
                return None
            if not act.issuperset(data):
                act.update(data)
                changed = True
    for t in act:
        dims = tensors[t].dims
        if dims is None or len(dims) != 4 or tensors[t].const:
            return None
    new_tensors = {
        t: replace(v, dims=_permute(v.dims, TO_NHWC)) if t in act else v for t, v in tensors.items()
    }
    new_ops = tuple(_nxc(op) if op.kind in LAYOUT_OPS else op for op in ops)
    return new_tensors, new_ops, act


def _free(op: Op, tensors: dict[int, Tensor]) -> bool:
    if op.kind in FREE:
        return True
    if op.kind in STATIC_KINDS:
        return op.attr("qtype") == ("per_tensor",)
    if op.kind in ("Add", "Multiply", "Subtract"):
        ranks = {len(tensors[t].dims or ()) for t in op.inputs}
        return ranks == {4} and not any(tensors[t].const for t in op.inputs)
    return False


def _nxc(op: Op) -> Op:
    attrs = tuple(
        (name, string("NXC")) if name == "data_format" else (name, value)
        for name, value in op.attrs
    )
    return replace(op, attrs=attrs)


def _permute(
    dims: tuple[int | None, ...] | None, order: tuple[int, ...]
) -> tuple[int | None, ...] | None:
    return None if dims is None else tuple(dims[i] for i in order)


def text(
    tensors: dict[int, Tensor], ops: Iterable[Op], inputs: tuple[int, ...], outputs: tuple[int, ...]
) -> str:
    used = sorted({t for o in ops for t in (*o.inputs, *o.outputs)})
    return description.text([tensors[t] for t in used], list(ops), inputs, outputs)


def transpose(graph: ir.Graph, value: ir.Value, order: tuple[int, ...], name: str) -> ir.Value:
    """A Transpose of ``value`` appended to ``graph`` (the caller sorts), its output typed."""
    node = ir.Node("", "Transpose", [value], attributes=[ir.AttrInt64s("perm", list(order))])
    node.name = name
    node.metadata_props[TAG] = "1"
    out = node.outputs[0]
    out.name = name
    out.type = value.type
    if value.shape is not None:
        out.shape = ir.Shape([value.shape[i] for i in order])
    graph.append(node)
    return out


def cancel(graph: ir.Graph) -> int:
    """Transposes back to NCHW whose readers are Transposes to NHWC: each of those reads the
    NHWC tensor directly instead. Returns how many Transposes went."""
    removed = 0
    for node in list(graph):
        if node.metadata_props.get(TAG) != "1" or _perm(node) != TO_NCHW:
            continue
        source = node.inputs[0]
        assert source is not None
        for use in list(node.outputs[0].uses()):
            reader = use.node
            if reader.metadata_props.get(TAG) == "1" and _perm(reader) == TO_NHWC:
                if reader.outputs[0].is_graph_output():
                    continue
                reader.outputs[0].replace_all_uses_with(source)
                graph.remove(reader, safe=True)
                removed += 1
        if not node.outputs[0].uses() and not node.outputs[0].is_graph_output():
            graph.remove(node, safe=True)
            removed += 1
    return removed


def _perm(node: ir.Node) -> tuple[int, ...]:
    attr = node.attributes.get("perm")
    return () if attr is None else tuple(attr.value)
