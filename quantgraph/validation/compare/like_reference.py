"""The reference of a comparison whose original onnxruntime computes with another arithmetic
than the spec form means: a copy of the original, in memory, changed only where onnxruntime's
kernel departs from that arithmetic, so that what is left between the two sides is rounding.

* A com.microsoft MatMulNBits with ``accuracy_level`` >= 1 gets ``accuracy_level`` 0. At 4
  onnxruntime quantizes A to int8 per block and sums in int32 (measured 0.004-0.02 apart from
  DequantizeLinear + MatMul on layers of 64-256 inputs); at 0 it dequantizes B and sums in
  float32, as the spec form does: the same arithmetic up to the order of the sums (at most
  3.6e-7 apart on those layers).
* On a CPU whose int8 kernels add u8 x s8 product pairs in saturating int16 (x86 without VNNI:
  :func:`quantgraph.cpu.cpu`), each constant int8 weight that MatMulInteger, ConvInteger,
  QLinearConv, QLinearMatMul or QGemm multiplies with uint8 activations is stored as uint8
  w + 128 with zero point zp + 128: the same integers w - zp, which onnxruntime's u8 x u8 kernels
  sum exactly in int32, as ONNX defines these ops (a quantize_dynamic encoder's first MatMul was
  0.55 apart from the exact sums on such a CPU).

The original itself still runs: its distance to the rewritten model is given beside the verdict
(never part of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnx_ir as ir
from onnx import numpy_helper

from ...cpu import cpu
from ...ir.walk import all_graphs, proto_graphs

CONTRIB = "com.microsoft"
NBITS = "MatMulNBits"
ACCURACY = "accuracy_level"
# op -> (activation input, its zero point input, weight input, weight zero point input)
INTEGER_KERNELS = {
    ("", "MatMulInteger"): (0, 2, 1, 3),
    ("", "ConvInteger"): (0, 2, 1, 3),
    ("", "QLinearConv"): (0, 2, 3, 5),
    ("", "QLinearMatMul"): (0, 2, 3, 5),
    (CONTRIB, "QGemm"): (0, 2, 3, 5),
}
SUFFIX = "_as_uint8"  # the uint8 copy of an int8 weight or zero point


@dataclass(frozen=True)
class Change:
    """One node of the original changed in the reference, and how."""

    node: str
    op_type: str
    change: str

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LikeReference:
    """The changed copy (``proto``) and what was changed in it."""

    proto: onnx.ModelProto
    changes: tuple[Change, ...]

    @property
    def accuracy_levels(self) -> list[int]:
        return sorted({int(c.change.split()[1]) for c in self.changes if c.op_type == NBITS})

    @property
    def unsaturated(self) -> int:
        return sum(c.op_type != NBITS for c in self.changes)

    def describe(self) -> str:
        """What the reference is, in a few words for the comparison line."""
        parts = []
        nbits = len(self.changes) - self.unsaturated
        if nbits:
            levels = "/".join(map(str, self.accuracy_levels))
            parts.append(f"accuracy_level 0 on {_count(nbits, 'MatMulNBits node')} (was {levels})")
        if self.unsaturated:
            parts.append(f"int8 weights as uint8 +128 on {_count(self.unsaturated, 'node')}")
        return "original [a copy in memory: " + "; ".join(parts) + "]"

    def why(self) -> str:
        parts = []
        if len(self.changes) > self.unsaturated:
            parts.append(
                "accuracy_level >= 1 makes onnxruntime's MatMulNBits quantize A to int8 per "
                "block and sum in int32 (or compute in float16), where the spec form dequantizes "
                "the weight and sums in float32, as accuracy_level 0 does: the reference is the "
                "original at accuracy_level 0, the same arithmetic up to the order of the sums"
            )
        if self.unsaturated:
            parts.append(
                f"this CPU ({cpu().isa}, no VNNI) adds u8 x s8 product pairs in saturating "
                "int16 in onnxruntime's integer kernels; the same weights as uint8 w+128 with "
                "zero point zp+128 are the same integers w - zp, which its u8 x u8 kernels sum "
                "exactly in int32, as ONNX defines the ops and the spec form computes"
            )
        return "; ".join(parts) + "; the original as onnxruntime runs it is compared beside"

    def original_note(self) -> str:
        """Why the original itself is further away (the informational comparison)."""
        parts = []
        if len(self.changes) > self.unsaturated:
            levels = "/".join(map(str, self.accuracy_levels))
            parts.append(f"its MatMulNBits at accuracy_level {levels}")
        if self.unsaturated:
            parts.append("its u8 x s8 integer kernels saturating int16 pair sums on this CPU")
        return "the original as onnxruntime runs it: " + " and ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.describe(),
            "why": self.why(),
            "changed_nodes": [c.to_dict() for c in self.changes],
        }


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def like_reference(model: ir.Model, rewritten: ir.Model) -> LikeReference | None:
    """The reference copy of ``model`` for its converted form ``rewritten`` (a node the
    rewritten model still has as it was is left as it is), or None when onnxruntime already
    computes the spec form's arithmetic for every converted node (then the original is its own
    reference)."""
    kinds = {NBITS, *(op for _, op in INTEGER_KERNELS)}
    kept = {n.name or "" for g in all_graphs(rewritten) for n in g if n.op_type in kinds}
    if not _candidates(model, kept):
        return None  # nothing to change: no copy of the model is made
    proto = ir.to_proto(model)
    changes = _accuracy_zero(proto, kept)
    if cpu().int8_products_saturate:
        changes += _unsaturated(proto, _initializer_arrays(model), kept)
    return LikeReference(proto, tuple(changes)) if changes else None


def _candidates(model: ir.Model, kept: set[str]) -> bool:
    """Whether ``model`` has a node the reference may change (a quick look before a copy)."""
    saturates = cpu().int8_products_saturate
    for graph in all_graphs(model):
        for node in graph:
            if (node.name or "") in kept:
                continue
            if node.op_type == NBITS and node.attributes.get_int(ACCURACY, 0) >= 1:
                return True
            domain = "" if node.domain == "ai.onnx" else node.domain
            if saturates and (domain, node.op_type) in INTEGER_KERNELS:
                return True
    return False


def _accuracy_zero(proto: onnx.ModelProto, kept: set[str]) -> list[Change]:
    changes = []
    for graph in proto_graphs(proto.graph):
        for node in graph.node:
            if node.op_type != NBITS or node.domain != CONTRIB or node.name in kept:
                continue
            for attribute in node.attribute:
                if attribute.name == ACCURACY and attribute.i >= 1:
                    changes.append(Change(node.name, NBITS, f"accuracy_level {attribute.i} -> 0"))
                    attribute.i = 0
    return changes


def _initializer_arrays(model: ir.Model) -> dict[str, ir.Value]:
    found: dict[str, ir.Value] = {}
    for graph in all_graphs(model):
        if isinstance(graph, ir.Graph):
            found.update({k: v for k, v in graph.initializers.items() if v.const_value})
    return found


def _unsaturated(
    proto: onnx.ModelProto, values: dict[str, ir.Value], kept: set[str]
) -> list[Change]:
    """Store each constant int8 weight (and its zero point) read with uint8 activations as
    uint8 + 128, under a new name, on the nodes that read it so."""
    changes = []
    graphs = list(proto_graphs(proto.graph))
    dynamic = {
        o
        for g in graphs
        for n in g.node
        if n.op_type == "DynamicQuantizeLinear"
        for o in n.output[:1]
    }
    replaced: set[str] = set()
    for graph in graphs:
        added: dict[str, onnx.TensorProto] = {}
        for node in graph.node:
            domain = "" if node.domain == "ai.onnx" else node.domain
            slots = INTEGER_KERNELS.get((domain, node.op_type))
            if slots is None or node.name in kept:
                continue
            if not _uint8_activation(node, slots, values, dynamic):
                continue
            weight, zp_name = _input(node, slots[2]), _input(node, slots[3])
            array = _array(values, weight)
            zp = _array(values, zp_name) if zp_name else np.zeros((), np.int8)
            if array is None or array.dtype != np.int8 or zp is None or zp.dtype != np.int8:
                continue
            while len(node.input) <= slots[3]:
                node.input.append("")
            node.input[slots[2]] = _shifted(added, weight, array)
            node.input[slots[3]] = _shifted(added, zp_name or f"{node.name}_zero_point", zp)
            replaced.update((weight, zp_name))
            changes.append(
                Change(node.name, node.op_type, "int8 weight as uint8 w+128, zero point zp+128")
            )
        graph.initializer.extend(added.values())
    _drop_unread(graphs, replaced)
    return changes


def _drop_unread(graphs: list[onnx.GraphProto], names: set[str]) -> None:
    """The int8 originals no node reads any more (a copy of a large model holds one form)."""
    read = {i for g in graphs for n in g.node for i in n.input}
    read |= {o.name for g in graphs for o in g.output}
    for graph in graphs:
        kept = [t for t in graph.initializer if t.name not in names or t.name in read]
        if len(kept) != len(graph.initializer):
            del graph.initializer[:]
            graph.initializer.extend(kept)


def _shifted(added: dict[str, onnx.TensorProto], name: str, array: np.ndarray) -> str:
    new = name + SUFFIX
    if new not in added:
        shifted = (array.astype(np.int16) + 128).astype(np.uint8)
        added[new] = numpy_helper.from_array(shifted, new)
    return new


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if len(node.input) > index else ""


def _array(values: dict[str, ir.Value], name: str) -> np.ndarray | None:
    value = values.get(name)
    if value is None or value.const_value is None:
        return None
    return value.const_value.numpy()


def _uint8_activation(
    node: onnx.NodeProto,
    slots: tuple[int, int, int, int],
    values: dict[str, ir.Value],
    dynamic: set[str],
) -> bool:
    """Whether the node's activation is uint8: its zero point's type, else what produces it
    (quantize_dynamic's DynamicQuantizeLinear gives uint8)."""
    zp = _array(values, _input(node, slots[1]))
    if zp is not None:
        return bool(zp.dtype == np.uint8)
    return _input(node, slots[0]) in dynamic
