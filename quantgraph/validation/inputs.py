"""Inputs that make sense for a model: shapes for its symbolic dims, values its consumers take.

What the graph says decides, in this order: ``--val-range`` for a value range and ``--dim`` for
a symbolic dim; a dim the model's metadata pins (a ``metadata_props`` key equal to the dim's
name with an integer value); the spatial dims of an image-like input (rank 4 with 1, 3 or 4
channels: NCHW or NHWC) default to 224 (:data:`SPATIAL_SIZES` are tried in turn when the
original refuses one); any other symbolic dim is 1.

Integer inputs are traced through Cast, Identity, Unsqueeze, Squeeze, Reshape, Flatten and Add
or Sub of a constant to what consumes them: indices of Gather, GatherElements or GatherND are
drawn inside the indexed dimension (less the constant added on the way); the sequence_lens of
an RNN, GRU or LSTM between 1 and the sequence length; counts and sizes (TopK's k, OneHot's
depth, Tile's repeats, ConstantOfShape's shape, Range's limit) between 1 and 8. Other integers
lie in [-100, 100] (clipped to the type); booleans are booleans; floats are standard normal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from .._ir import constant_array
from ..errors import ModelError

SPATIAL_DEFAULT = 224
SPATIAL_SIZES = (224, 256, 320, 384, 416, 512, 640, 128, 96, 64, 32)
DEFAULT_DIM = 1
INTEGER_RANGE = (-100, 100)
COUNT_RANGE = (1, 8)
_PASS_THROUGH = {"Cast", "Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten"}
_COUNTS = {"TopK": 1, "OneHot": 1, "Tile": 1, "ConstantOfShape": 0, "Range": 1}
_RNNS = {"RNN", "GRU", "LSTM"}


@dataclass(frozen=True)
class InputSpec:
    """One generated input: its type, shape, value range and why that range."""

    name: str
    dtype: ir.DataType
    shape: tuple[int, ...]
    low: float
    high: float
    why: str

    def to_dict(self) -> dict[str, object]:
        bounded = np.isfinite(self.low) and np.isfinite(self.high)
        return {
            "dtype": str(self.dtype.numpy()),  # numpy's name, as every report spells types
            "shape": list(self.shape),
            "range": [self.low, self.high] if bounded else None,
            "why": self.why,
        }

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        np_type = self.dtype.numpy()
        if np_type.kind == "b":
            return rng.integers(0, 2, self.shape).astype(bool)
        if np_type.kind in "iu":
            info = np.iinfo(np_type)
            low, high = max(int(self.low), int(info.min)), min(int(self.high), int(info.max))
            return rng.integers(low, high, self.shape, endpoint=True).astype(np_type)
        if np_type.kind == "f":
            if not (np.isfinite(self.low) and np.isfinite(self.high)):
                return rng.standard_normal(self.shape).astype(np_type)
            return rng.uniform(self.low, self.high, self.shape).astype(np_type)
        raise ModelError(
            f"input '{self.name}': cannot generate values of type {self.dtype.name}; "
            "pass inputs with --inputs"
        )


def parse_val_range(text: str) -> tuple[str, tuple[float, float]]:
    """``NAME:LOW,HIGH`` -> (NAME, (LOW, HIGH)); ValueError with what is wrong."""
    match = re.fullmatch(r"(.+):([^,]+),([^,]+)", text)
    if match is None:
        raise ValueError(f"{text!r}: expected NAME:LOW,HIGH")
    try:
        low, high = float(match.group(2)), float(match.group(3))
    except ValueError:
        raise ValueError(f"{text!r}: LOW and HIGH must be numbers") from None
    if not low <= high:
        raise ValueError(f"{text!r}: LOW must not exceed HIGH")
    return match.group(1), (low, high)


def plan_inputs(
    model: ir.Model,
    *,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    spatial: int = SPATIAL_DEFAULT,
) -> list[InputSpec]:
    """What to generate for each fed input of ``model`` (see the module doc)."""
    dims = dict(dims or {})
    ranges = dict(val_ranges or {})
    graph = model.graph
    fed = [v for v in graph.inputs if not v.is_initializer() and v.name]
    unknown = sorted(set(ranges) - {v.name for v in fed})
    if unknown:
        raise ModelError(f"--val-range names no input of the model: {', '.join(unknown)}")
    pinned = _metadata_dims(model)
    plans = []
    _inferred.clear()  # graphs of an earlier call may be gone, and their ids reused
    for value in fed:
        assert value.name is not None
        if value.dtype is None or value.shape is None:
            raise ModelError(
                f"input '{value.name}' has no tensor type and shape to generate from; "
                "pass inputs with --inputs"
            )
        shape = _shape(value, dims, pinned, spatial)
        if value.name in ranges:
            low, high = ranges[value.name]
            plans.append(InputSpec(value.name, value.dtype, shape, low, high, "--val-range"))
        else:
            plans.append(_by_use(value, shape, dims, pinned, spatial))
    _inferred.clear()
    return plans


def has_spatial_dims(model: ir.Model) -> bool:
    """Whether some input has symbolic spatial dims that default to SPATIAL_DEFAULT."""
    for value in model.graph.inputs:
        positions = _spatial_positions(value)
        if value.shape is not None and any(not isinstance(value.shape[p], int) for p in positions):
            return True
    return False


def _metadata_dims(model: ir.Model) -> dict[str, int]:
    pinned = {}
    for key, text in model.metadata_props.items():
        if text.strip().lstrip("-").isdigit() and int(text) > 0:
            pinned[key] = int(text)
    return pinned


def _spatial_positions(value: ir.Value) -> tuple[int, ...]:
    shape = value.shape
    if shape is None or len(shape) != 4 or value.dtype is None:
        return ()
    if not value.dtype.is_floating_point():
        return ()
    if isinstance(shape[1], int) and shape[1] in (1, 3, 4):
        return (2, 3)  # NCHW
    if isinstance(shape[3], int) and shape[3] in (1, 3, 4):
        return (1, 2)  # NHWC
    return ()


def _shape(
    value: ir.Value, dims: Mapping[str, int], pinned: Mapping[str, int], spatial: int
) -> tuple[int, ...]:
    assert value.shape is not None
    spatial_at = _spatial_positions(value)
    shape = []
    for index, dim in enumerate(value.shape):
        if isinstance(dim, int):
            shape.append(dim)
            continue
        name = str(dim.value) if dim.value is not None else ""
        if name in dims:
            shape.append(int(dims[name]))
        elif name in pinned:
            shape.append(pinned[name])
        elif index in spatial_at:
            shape.append(spatial)
        else:
            shape.append(DEFAULT_DIM)
    return tuple(shape)


def _uses(value: ir.Value, offset: int = 0) -> Iterator[tuple[ir.Node, int, int]]:
    """(consumer, input index, constant added on the way) past pass-through ops."""
    for node, index in value.uses():
        if node.op_type in _PASS_THROUGH and index == 0 and node.outputs:
            yield from _uses(node.outputs[0], offset)
        elif _is_shift(node, index):
            step = int(np.asarray(constant_array(node.inputs[1])).reshape(-1)[0])
            yield from _uses(node.outputs[0], offset + (step if node.op_type == "Add" else -step))
        else:
            yield node, index, offset


def _is_shift(node: ir.Node, index: int) -> bool:
    """``x + c`` or ``x - c`` for a scalar integer constant c (x the node's first input)."""
    if node.op_type not in ("Add", "Sub") or index != 0 or len(node.inputs) != 2:
        return False
    other = constant_array(node.inputs[1])
    return other is not None and other.size == 1 and other.dtype.kind in "iu"


def _dim_of(value: ir.Value | None, axis: int, shape_of: Mapping[str, int]) -> int | None:
    if value is None:
        return None
    if value.shape is None:
        array = constant_array(value)
        if array is not None:
            return array.shape[axis] if -array.ndim <= axis < array.ndim else None
        # A computed value (an RNN's X after a DequantizeLinear): as shape inference finds it.
        dims = _inferred_shapes(value).get(value.name or "")
        if dims is None or not -len(dims) <= axis < len(dims):
            return None
        found = dims[axis]
        return found if isinstance(found, int) else shape_of.get(found) if found else None
    if not -len(value.shape) <= axis < len(value.shape):
        return None
    dim = value.shape[axis]
    if isinstance(dim, int):
        return dim
    return shape_of.get(str(dim.value)) if dim.value is not None else None


_inferred: dict[int, dict[str, tuple[int | str | None, ...]]] = {}


def _inferred_shapes(value: ir.Value) -> dict[str, tuple[int | str | None, ...]]:
    """Shapes (symbolic dims by name) ONNX's shape inference finds for the values of the graph
    ``value`` is in, on a serialized copy; inferred once per graph and plan_inputs call."""
    graph = value.graph
    if graph is None:
        return {}
    key = id(graph)  # plan_inputs clears the cache around each call
    if key not in _inferred:
        _inferred[key] = _infer(graph)
    return _inferred[key]


def _infer(graph: ir.Graph) -> dict[str, tuple[int | str | None, ...]]:
    import onnx

    model = ir.Model(graph, ir_version=10)
    try:
        found = onnx.shape_inference.infer_shapes(ir.to_proto(model)).graph
    except Exception:  # a hint only
        return {}
    shapes: dict[str, tuple[int | str | None, ...]] = {}
    for info in found.value_info:
        if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
            shapes[info.name] = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in info.type.tensor_type.shape.dim
            )
    return shapes


def _by_use(
    value: ir.Value,
    shape: tuple[int, ...],
    dims: Mapping[str, int],
    pinned: Mapping[str, int],
    spatial: int,
) -> InputSpec:
    assert value.dtype is not None and value.name is not None
    np_type = value.dtype.numpy()
    name, dtype = value.name, value.dtype
    if np_type.kind == "b":
        return InputSpec(name, dtype, shape, 0, 1, "boolean")
    if np_type.kind not in "iu":
        return InputSpec(name, dtype, shape, -np.inf, np.inf, "standard normal")
    symbols = {**pinned, **dims}
    bounds: list[tuple[int, int, str]] = []
    for node, index, offset in _uses(value):
        found = _bounds_for(node, index, symbols)
        if found is not None:
            low, high, why = found
            bounds.append((low - offset, high - offset, why))
    if not bounds:
        low, high = INTEGER_RANGE
        return InputSpec(name, dtype, shape, low, high, "default")
    low = max(b[0] for b in bounds)
    high = min(b[1] for b in bounds)
    if low > high:
        raise ModelError(f"input '{name}': its uses ask for no common range ({bounds})")
    return InputSpec(name, dtype, shape, low, high, "; ".join(dict.fromkeys(b[2] for b in bounds)))


def _bounds_for(
    node: ir.Node, index: int, symbols: Mapping[str, int]
) -> tuple[int, int, str] | None:
    label = f"'{node.name}' ({node.op_type})" if node.name else node.op_type
    op = node.op_type
    if op in ("Gather", "GatherElements") and index == 1:
        axis = node.attributes.get_int("axis", 0)
        size = _dim_of(node.inputs[0], axis, symbols)
        if size:
            return 0, size - 1, f"indices of {label}, axis {axis} of size {size}"
    if op == "GatherND" and index == 1:
        data = node.inputs[0]
        if data is not None and data.shape is not None:
            sizes = [_dim_of(data, a, symbols) for a in range(len(data.shape))]
            known = [s for s in sizes if s]
            if known:
                return 0, min(known) - 1, f"indices of {label}, dims {sizes}"
    if op in _RNNS and index == 4:
        length = _dim_of(node.inputs[0], 0, symbols)
        if length:
            return 1, length, f"sequence_lens of {label}, sequence length {length}"
    if _COUNTS.get(op) == index:
        low, high = COUNT_RANGE
        return low, high, f"a count or size of {label}"
    return None


def describe(feeds: Mapping[str, np.ndarray]) -> str:
    """``x: float32[1,3,224,224], ids: int64[1,16]`` for messages."""
    return ", ".join(f"{k}: {v.dtype}[{','.join(map(str, v.shape))}]" for k, v in feeds.items())
