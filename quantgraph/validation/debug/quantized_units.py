"""The units of quantized formats without Q/DQ pairs, between tensors the float model computes.

quantize_dynamic writes DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (the scales) ->
Mul where the float model has one MatMul, and names the last output as the MatMul's; a
MatMulNBits (or a QOperator node) takes a float node's place the same way. Such a unit, fed
the float model's values of the tensors it reads, against the float model's value of the
tensor it computes, is the error the unit introduces by itself: its weights' and its
activations' quantization together (these formats have no Q/DQ pair to tell them apart, as
:mod:`.qparams` and :mod:`.node_error` do for QDQ models).

A unit is found backwards from a tensor the float model also computes, through the nodes that
compute it, up to tensors the float model computes and constants; it counts when it holds a
quantized node (:data:`quantgraph.validation.compare.error_stats.QUANTIZED_OPS`, QLinear*) other
than Q/DQ.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

import onnx

from ..compare.error_stats import QDQ_DOMAINS, QUANTIZED_OPS

MAX_NODES = 32  # a longer way between two known tensors is no unit of one node
_PAIR_OPS = ("QuantizeLinear", "DequantizeLinear")


@dataclass(frozen=True)
class Unit:
    """The nodes computing ``target`` from float-known tensors (``inputs``) and constants."""

    target: str
    nodes: tuple[onnx.NodeProto, ...]  # in graph order
    inputs: tuple[str, ...]
    constants: tuple[str, ...]
    quantized: onnx.NodeProto  # the quantized node the unit is named after


def is_quantized_compute(node: onnx.NodeProto) -> bool:
    """A quantized node that computes (MatMulInteger, MatMulNBits, QLinearConv, ...), not a
    QuantizeLinear/DequantizeLinear."""
    if node.domain not in QDQ_DOMAINS or node.op_type in _PAIR_OPS:
        return False
    return node.op_type in QUANTIZED_OPS or node.op_type.startswith("QLinear")


def units(
    graph: onnx.GraphProto, known: Set[str], constants: Set[str], measured: Set[str]
) -> list[Unit]:
    """Every unit of ``graph`` (see the module doc) computing a tensor in ``known`` that is
    not in ``measured`` (tensors the QDQ figures already cover)."""
    made: dict[str, tuple[int, onnx.NodeProto]] = {
        out: (index, node) for index, node in enumerate(graph.node) for out in node.output if out
    }
    found = []
    for node in graph.node:
        for target in node.output[:1]:
            if target and target in known and target not in measured:
                unit = _unit(target, made, known, constants)
                if unit is not None:
                    found.append(unit)
    return found


def _unit(
    target: str,
    made: Mapping[str, tuple[int, onnx.NodeProto]],
    known: Set[str],
    constants: Set[str],
) -> Unit | None:
    chosen: dict[int, onnx.NodeProto] = {}
    inputs: dict[str, None] = {}
    read: dict[str, None] = {}
    waiting = [made[target]]
    while waiting:
        index, node = waiting.pop()
        if index in chosen:
            continue
        if len(chosen) == MAX_NODES or any(a.g.node or a.graphs for a in node.attribute):
            return None  # too far apart, or a subgraph reading outer values
        chosen[index] = node
        for name in node.input:
            if not name:
                continue
            if name in constants:
                read[name] = None
            elif name in known:
                inputs[name] = None
            elif name in made:
                waiting.append(made[name])
            else:
                return None  # a value the float model has no value for
    quantized = [node for _, node in sorted(chosen.items()) if is_quantized_compute(node)]
    if not quantized:
        return None
    ordered = tuple(node for _, node in sorted(chosen.items()))
    return Unit(target, ordered, tuple(inputs), tuple(read), quantized[-1])
