"""Where a fed input's values end up, and which range the op that reads them there accepts.

Values are followed through ops that pass them on unchanged or pick among them (Cast, Identity,
Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Expand, Tile, Slice, Split, Concat, Gather and
GatherElements/GatherND of the value itself, TopK's values, ReduceMax/ReduceMin, Min, Max, Clip,
Where's branches) and through Add or Sub of a scalar integer constant (which shifts the range).
Where they are read: the indices of Gather, GatherElements, GatherND or com.microsoft's
GatherBlockQuantized stay inside the indexed
dimension; the sequence_lens of an RNN, GRU or LSTM lie in [1, sequence length]; counts and sizes
(TopK's k, OneHot's depth, Tile's repeats, ConstantOfShape's shape, Range's limit) in [1, 8].
A bound is sufficient, not necessary: every value in it is one the consumer accepts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import onnx_ir as ir

from ...ir.values import constant_array
from ...ir.walk import spec_op
from .inference import infer

COUNT_RANGE = (1, 8)
# Ops whose first input's values reach their outputs unchanged (or a selection of them).
_FIRST_INPUT = {
    "Cast",
    "CastLike",
    "Identity",
    "Unsqueeze",
    "Squeeze",
    "Reshape",
    "Flatten",
    "Transpose",
    "Expand",
    "Tile",
    "Slice",
    "Split",
    "Gather",
    "GatherElements",
    "GatherND",
    "ReduceMax",
    "ReduceMin",
    "Clip",
}
_ANY_INPUT = {"Concat", "Min", "Max"}
_OUTPUTS = {"TopK": 1}  # only the first output (values) carries the input's values
_COUNTS = {"TopK": 1, "OneHot": 1, "Tile": 1, "ConstantOfShape": 0, "Range": 1}
_RNNS = {"RNN", "GRU", "LSTM"}


@dataclass(frozen=True)
class Use:
    """An op that reads a value: node, input index, constant added on the way, ops passed."""

    node: ir.Node
    index: int
    offset: int
    path: tuple[str, ...]


def _passes(node: ir.Node, index: int) -> bool:
    if node.op_type in _ANY_INPUT:
        return True
    if node.op_type == "Where":
        return index in (1, 2)
    return index == 0 and (node.op_type in _FIRST_INPUT or node.op_type in _OUTPUTS)


def uses(value: ir.Value) -> Iterator[Use]:
    """The ops that read ``value``'s values, past ops that pass them on (each value once)."""
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[ir.Value, int, tuple[str, ...]]] = [(value, 0, ())]
    while stack:
        current, offset, path = stack.pop()
        if (id(current), offset) in seen:
            continue
        seen.add((id(current), offset))
        for node, index in current.uses():
            if _passes(node, index):
                outputs = list(node.outputs)[: _OUTPUTS.get(node.op_type, len(node.outputs))]
                stack.extend((out, offset, (*path, node.op_type)) for out in outputs)
            elif (step := _shift(node, index)) is not None:
                stack.append((node.outputs[0], offset + step, (*path, node.op_type)))
            else:
                yield Use(node, index, offset, path)


def _shift(node: ir.Node, index: int) -> int | None:
    """c for ``x + c``, -c for ``x - c`` (c a scalar integer constant, x at ``index``)."""
    if node.op_type not in ("Add", "Sub") or len(node.inputs) != 2 or not node.outputs:
        return None
    if node.op_type == "Sub" and index != 0:
        return None
    other = constant_array(node.inputs[1 - index])
    if other is None or other.size != 1 or other.dtype.kind not in "iu":
        return None
    step = int(other.reshape(-1)[0])
    return step if node.op_type == "Add" else -step


class Sizes:
    """Concrete sizes of a model's values for one plan: fed inputs as planned; other values as
    declared, as constants are, or as ONNX's shape inference finds them from the planned inputs
    (computed lazily, once)."""

    def __init__(self, model: ir.Model, planned: Mapping[str, tuple[int, ...]]) -> None:
        self._model = model
        self._planned = planned
        self._inferred: dict[str, tuple[int | None, ...]] | None = None

    def dim(self, value: ir.Value | None, axis: int) -> int | None:
        shape = self.shape(value)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        return shape[axis]

    def shape(self, value: ir.Value | None) -> tuple[int | None, ...] | None:
        if value is None:
            return None
        if value.name is not None and value.name in self._planned:
            return self._planned[value.name]
        if value.shape is not None and all(isinstance(d, int) and d >= 0 for d in value.shape):
            return tuple(int(d) for d in value.shape)  # type: ignore[arg-type]
        array = constant_array(value)
        if array is not None:
            return tuple(array.shape)
        if self._inferred is None:
            found = infer(self._model, self._planned)
            self._inferred = {name: dims for name, (_, dims) in found.items()}
        return self._inferred.get(value.name or "")


def bound(use: Use, sizes: Sizes) -> tuple[int, int, str] | None:
    """[low, high] the op of ``use`` accepts at that input (before the offset), and why."""
    node, index = use.node, use.index
    label = f"'{node.name}' ({node.op_type})" if node.name else node.op_type
    op = node.op_type
    found: tuple[int, int, str] | None = None
    if op in ("Gather", "GatherElements", "GatherBlockQuantized") and index == 1:
        # GatherBlockQuantized (com.microsoft) gives zeros out of range, its rewrite an error
        axis = node.attributes.get_int("gather_axis" if op[-1] == "d" else "axis", 0)
        size = sizes.dim(node.inputs[0], axis)
        if size:
            found = 0, size - 1, f"indices of {label}, axis {axis} of size {size}"
    elif op == "GatherND" and index == 1:
        shape = sizes.shape(node.inputs[0])
        known = [s for s in shape or () if s]
        if shape and known:
            found = 0, min(known) - 1, f"indices of {label}, dims {list(shape)}"
    elif op in _RNNS and index == 4:
        layout = node.attributes.get_int("layout", 0)
        length = sizes.dim(node.inputs[0], 1 if layout else 0)
        if length:
            found = 1, length, f"sequence_lens of {label}, sequence length {length}"
    elif _COUNTS.get(op) == index:
        found = (*COUNT_RANGE, f"a count or size of {label}")
    if found is None:
        return None
    low, high, why = found
    if use.path:
        why += f", through {' -> '.join(use.path)}"
    return low - use.offset, high - use.offset, why


def value_bounds(value: ir.Value, sizes: Sizes) -> list[tuple[int, int, str]]:
    """Every bound the uses of ``value`` put on its values."""
    found = (bound(use, sizes) for use in uses(value))
    return [b for b in found if b is not None]


def position_rows(model: ir.Model, fed: list[ir.Value]) -> tuple[int, str] | None:
    """The fewest rows of a constant table (or its dequantized form) that a Gather (or
    GatherBlockQuantized) reads at positions (a position embedding), and that node; None
    without one. Positions are indices that a fed input named like ``position_ids`` holds, or
    that are computed from a Range or a Slice of a constant without reading any fed input's
    values (its shape only, through Shape or Size): token ids choose rows by value, positions by
    place in the sequence. Only ops that keep a position a position (offsets, reshapes, casts:
    :data:`POSITION_OPS`) may lie between: T5's relative attention bias gathers from a table of
    32 buckets indexed through Abs, Log, Div, Min and Where, which map any distance to a bucket
    (a bucket table does not bound the sequence)."""
    best: tuple[int, str] | None = None
    for node in model.graph:
        if node.op_type not in ("Gather", "GatherBlockQuantized") or len(node.inputs) < 2:
            continue
        axis = node.attributes.get_int("gather_axis" if node.op_type[-1] == "d" else "axis", 0)
        if node.inputs[1] is None or axis != 0 or not _positions(node.inputs[1]):
            continue
        rows = _table_rows(node.inputs[0])
        if rows is not None and rows >= 2 and (best is None or rows < best[0]):
            best = rows, f"'{node.name}' ({node.op_type})" if node.name else f"a {node.op_type}"
    return best


# Ops between a Range (or a sliced constant) and a Gather that keep positions positions: their
# inputs that carry the positions (None: all of them; the others are sizes, axes, shapes).
POSITION_OPS: dict[str, tuple[int, ...] | None] = {
    "Add": None,
    "Sub": None,
    "Concat": None,
    "Cast": (0,),
    "Identity": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Expand": (0,),
    "Tile": (0,),
    "Transpose": (0,),
    "Slice": (0,),
    "Gather": (0,),
    "CumSum": (0,),
    "Constant": (),
    "ConstantOfShape": (),
}


def _positions(indices: ir.Value) -> bool:
    """Whether ``indices`` are positions (:func:`position_rows`)."""
    found = False
    seen: set[int] = set()
    stack = [indices]
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        producer = value.producer()
        if producer is None:
            if value.is_graph_input():
                if "position" not in (value.name or "").lower():
                    return False  # chosen by a fed input's values
                found = True
            continue
        op = producer.op_type
        if op in ("Shape", "Size"):
            continue
        if op == "Range" or (op == "Slice" and constant_array(producer.inputs[0]) is not None):
            found = True  # positions, whatever computed their bounds
            continue
        if op not in POSITION_OPS:
            return False  # a bucket or another function of the positions
        carried = POSITION_OPS[op]
        inputs = producer.inputs if carried is None else [producer.inputs[i] for i in carried]
        stack.extend(v for v in inputs if v is not None)
    return found


def _table_rows(value: ir.Value | None) -> int | None:
    """Rows of a rank-2 constant, read through a dequantization (ONNX's, com.microsoft's or
    quantgraph's), Cast or Identity."""
    while value is not None:
        array = constant_array(value)
        if array is not None:
            return int(array.shape[0]) if array.ndim == 2 else None
        producer = value.producer()
        if producer is None or not (producer.op_type in _TABLE_OPS or _dequantizes(producer)):
            return None
        value = producer.inputs[0] if producer.inputs else None
    return None


_TABLE_OPS = ("DequantizeLinear", "Cast", "Identity")


def _dequantizes(node: ir.Node) -> bool:
    op = spec_op(node)
    return op is not None and not op.is_quantize
