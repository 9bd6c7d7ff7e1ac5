"""The places a float fallback can act on in a QDQ model, each counted once.

* A *chain*: the Q->DQ pairs that carry one quantization through ops that only move values
  (Reshape, Transpose, Pad, Slice, ...): quantize_static writes DQ -> Reshape -> Q with the
  same scale and zero point after the Reshape, so keeping one of them in float keeps nothing
  that matters; the chain is kept in float whole (every tensor of it goes to
  :func:`~quantgraph.passes.floating.keep_float.keep_float`).
* A node's *weights*: a compute node reading DQ(constant) (a weight, with no Q before it). The
  QDQ model has no float form of it; the float model does, under the node's name
  (``keep_float(..., float_model=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...ir.values import constant_array, optional_input
from .keep_float import is_weight_dequantize, pair_source

# Ops that move or select values without computing new ones: a Q after one with the
# parameters of the DQ before it re-quantizes exactly what was quantized.
MOVING_OPS = frozenset(
    (
        "Reshape", "Transpose", "Pad", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Identity",
        "MaxPool", "Gather", "Split", "Expand", "DepthToSpace", "SpaceToDepth", "Resize", "Tile",
    )
)  # fmt: skip
CHAIN, WEIGHTS = "chain", "weights"


@dataclass(frozen=True)
class FloatCandidate:
    """One place to keep in float: ``names`` are what keep_float takes (a chain's tensors, or
    the node's name for its weights); ``name`` is the first of them, ``kind`` chain or weights,
    ``op_type`` QuantizeLinear for a chain, the node's op type for weights."""

    kind: str
    names: tuple[str, ...]
    op_type: str

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def label(self) -> str:
        if self.kind == WEIGHTS:
            # keep_float gives the named node its float inputs too: say so, or a gain that
            # comes from an input reads as the weights'
            return f"weights and inputs of '{self.name}' ({self.op_type})"
        more = len(self.names) - 1
        aliases = f" (+{more} alias{'es' if more > 1 else ''} sharing its scale)" if more else ""
        return f"tensor '{self.name}'{aliases}"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "name": self.name, "names": list(self.names),
                "op_type": self.op_type}  # fmt: skip


def float_candidates(model: ir.Model) -> list[FloatCandidate]:
    """Every chain and weighted node of ``model``'s main graph, in graph order."""
    graph = model.graph
    quantizes: dict[str, ir.Node] = {}
    for node in graph:
        if _is_quantize(node) and node.inputs and node.inputs[0] is not None:
            source = node.inputs[0]
            if source.name:
                quantizes.setdefault(source.name, node)
    parent = {name: name for name in quantizes}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name, quantize in quantizes.items():
        producer = quantize.inputs[0].producer() if quantize.inputs[0] is not None else None
        if producer is None or producer.op_type not in MOVING_OPS or not producer.inputs:
            continue
        upstream = pair_source(producer.inputs[0])
        dequantize = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        if upstream is None or not upstream.name or upstream.name not in quantizes:
            continue
        if dequantize is not None and _same_parameters(dequantize, quantize):
            parent[root(name)] = root(upstream.name)
    groups: dict[str, list[str]] = {}
    for name in quantizes:  # graph order of the Qs
        groups.setdefault(root(name), []).append(name)
    found = [FloatCandidate(CHAIN, tuple(names), "QuantizeLinear") for names in groups.values()]
    for node in graph:
        computes = node.op_type not in ("DequantizeLinear", "QuantizeLinear")
        if computes and node.name and any(is_weight_dequantize(v) for v in node.inputs):
            found.append(FloatCandidate(WEIGHTS, (node.name,), node.op_type))
    return found


def _is_quantize(node: ir.Node) -> bool:
    return node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx", "com.microsoft")


def _same_parameters(dequantize: ir.Node, quantize: ir.Node) -> bool:
    for index in (1, 2):
        a = constant_array(optional_input(dequantize, index))
        b = constant_array(optional_input(quantize, index))
        if (a is None) != (b is None):
            return False
        if a is not None and b is not None and not np.array_equal(a.reshape(-1), b.reshape(-1)):
            return False
    return True
