"""How much memory a run of the original on one plan of inputs needs, estimated from shapes
before anything runs (the search never runs a plan over the budget: :mod:`.search`).

estimate = weights + inputs + SCRATCH_FACTOR x (the peak bytes of the tensors the run holds at
once). Weights are the initializers and Constant values. The peak follows the graph's node
order: a node's outputs are allocated while its inputs are alive, and a tensor is freed after
its last reader (graph outputs, and with ``keep_all`` every tensor, live to the end). Sizes come
from ONNX shape inference with the inputs at their planned sizes (:mod:`.inference`). The factor
covers what shapes do not show: kernels' scratch (a Conv's im2col buffer is several times its
input), onnxruntime's arena rounding, and the outputs copied back to numpy.

A tensor inference cannot size (a dim it leaves open, a custom op's output) is never counted as
empty: it counts as its known dims, or as its node's largest input if that is larger, and the
estimate says how many tensors were counted so (``unresolved``). Weights never stand in for such
a size, nor do tensors computed from weights alone (a dequantized weight of a converted model):
a MatMul of an activation of unknown size by a 113 MB dequantized weight is not 113 MB, and the
converted model's estimate would otherwise be the original's many times over (a converted 3.8B
decoder's 128-token prefill: 17.7 GiB against the original's 2.7 GiB, its KV-cache outputs each
counted as a weight). Tensors inside subgraphs
(If/Loop/Scan bodies) are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import onnx_ir as ir

from ...ir.values import constant_tensor
from .inference import infer

SCRATCH_FACTOR = 2
_UNKNOWN_ITEM_BYTES = 4  # a tensor of unknown type counts as float32


@dataclass(frozen=True)
class Estimate:
    """Bytes a run needs: ``total`` of which ``weights``; ``unresolved`` tensors were sized
    conservatively (the module doc)."""

    total: int
    weights: int
    unresolved: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"bytes": self.total, "weights": self.weights, "unresolved": self.unresolved}


def _bytes(elements: int, dtype: ir.DataType | None) -> int:
    if dtype is None or dtype == ir.DataType.UNDEFINED:
        return elements * _UNKNOWN_ITEM_BYTES
    return (elements * dtype.bitwidth + 7) // 8


def weight_bytes(model: ir.Model) -> int:
    total = 0
    for value in model.graph.initializers.values():
        if value.const_value is not None:
            total += value.const_value.nbytes
    for node in model.graph:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            attribute = node.attributes.get("value")
            if attribute is not None and attribute.type == ir.AttributeType.TENSOR:
                total += attribute.as_tensor().nbytes
    return total


def estimate(
    model: ir.Model,
    planned: Mapping[str, tuple[int, ...]],
    *,
    keep_all: bool = False,
    weights: int | None = None,
) -> Estimate:
    """The estimate for fed inputs of ``planned`` sizes (the module doc); ``weights`` when the
    caller has them already (they do not change between plans)."""
    graph = model.graph
    inferred = infer(model, planned)
    weights = weight_bytes(model) if weights is None else weights
    sizes: dict[int, int] = {}  # id(value) -> bytes
    inputs = 0
    for value in graph.inputs:
        if value.name is not None and value.name in planned:
            elements: int = math.prod(planned[value.name])
            sizes[id(value)] = _bytes(elements, value.dtype)
            inputs += sizes[id(value)]
    nodes = list(graph)
    last_use: dict[int, int] = {}
    order = {id(node): index for index, node in enumerate(nodes)}
    for index, node in enumerate(nodes):
        for read in node.inputs:
            if read is not None:
                last_use[id(read)] = index
    for node in nodes:  # a reader inside a subgraph: alive until the end
        for made in node.outputs:
            if any(id(user) not in order for user, _ in made.uses()):
                last_use[id(made)] = len(nodes)
    for output in graph.outputs:
        last_use[id(output)] = len(nodes)
    unresolved = live = peak = 0
    from_weights: set[int] = set()  # ids of node outputs computed from weights alone
    for index, node in enumerate(nodes):
        reads = [v for v in node.inputs if v is not None]
        if reads and all(id(v) in from_weights or constant_tensor(v) is not None for v in reads):
            from_weights.update(id(v) for v in node.outputs)
        largest_input = max(
            (sizes.get(id(v), 0) for v in reads if id(v) not in from_weights), default=0
        )
        for value in node.outputs:
            size, known = _size(value, inferred, largest_input)
            unresolved += not known
            sizes[id(value)] = size
            live += size
        peak = max(peak, live)
        touched = {id(v): v for v in [*node.inputs, *node.outputs] if v is not None}
        for key, touched_value in touched.items():
            if touched_value.producer() is None:
                continue  # a fed input or a weight: counted apart
            ends = len(nodes) if keep_all else last_use.get(key, index)
            if ends <= index:
                live -= sizes.get(key, 0)
    return Estimate(weights + inputs + SCRATCH_FACTOR * peak, weights, unresolved)


def _size(
    value: ir.Value,
    inferred: Mapping[str, tuple[int, tuple[int | None, ...]]],
    largest_input: int,
) -> tuple[int, bool]:
    """A node output's bytes, and whether its shape was known."""
    dtype = value.dtype
    dims: tuple[int | None, ...] | None = None
    if value.name is not None and value.name in inferred:
        elem, dims = inferred[value.name]
        dtype = dtype or (ir.DataType(elem) if elem else None)
    elif value.shape is not None and all(isinstance(d, int) for d in value.shape):
        dims = tuple(int(d) for d in value.shape)  # type: ignore[arg-type]
    if dims is not None and all(d is not None for d in dims):
        return _bytes(math.prod(d or 0 for d in dims), dtype), True
    known = _bytes(math.prod(d for d in dims or () if d is not None), dtype)
    return max(known, largest_input), False
