"""Reading values: a node's optional inputs, constants, element types and static shapes."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

Shape = tuple[int | None, ...]
CACHE_BELOW = 1 << 20  # constant arrays of fewer bytes are cached on their value


def optional_input(node: ir.Node, index: int) -> ir.Value | None:
    """The node's input ``index``, None when it is absent or left empty."""
    return node.inputs[index] if len(node.inputs) > index else None


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The value's array when it is an initializer or comes from a Constant node, else None.

    Cached on the value (``meta``): a scale shared by thousands of nodes is read once. A
    weight is not: cached, it would hold its bytes (an external one its map of the file) for
    the model's life; read again, it is a view or a new map of its range.
    """
    if value is None or value.is_graph_input():
        return None  # an initializer that is also an input can be fed: not a constant
    if "quantgraph.constant" in value.meta:
        cached: np.ndarray | None = value.meta["quantgraph.constant"]
        return cached
    tensor = ir.convenience.get_const_tensor(value)
    array = None if tensor is None else tensor.numpy()
    if array is None or array.nbytes < CACHE_BELOW:
        value.meta["quantgraph.constant"] = array
    return array


def constant_tensor(value: ir.Value | None) -> ir.TensorProtocol | None:
    """The value's tensor when it is an initializer or comes from a Constant node, else None
    (the values :func:`constant_array` takes), its data not read: shape and type are known
    without, and an external tensor stays on disk."""
    if value is None or value.is_graph_input():
        return None
    return ir.convenience.get_const_tensor(value)


def tensor_dims(tensor: ir.TensorProtocol) -> tuple[int, ...]:
    """A tensor's shape as ints (a tensor's dims are all known)."""
    return tuple(int(d) for d in tensor.shape.numpy())


def _constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    # An initializer's tensor, or the value attribute of the Constant node producing it.
    if value.const_value is not None:
        return value.const_value
    return ir.convenience.get_const_tensor(value)


def elem_type(value: ir.Value | None) -> ir.DataType | None:
    """A value's element type: declared, or its constant's."""
    if value is None:
        return None
    if value.dtype is not None:
        return value.dtype
    tensor = _constant_tensor(value)
    return tensor.dtype if tensor is not None else None


def value_shape(value: ir.Value) -> tuple[int | None, ...] | None:
    """Static shape with None for symbolic dims, or None when the rank is unknown."""
    shape: ir.ShapeProtocol | None = value.shape
    if shape is None:
        tensor = _constant_tensor(value)
        shape = tensor.shape if tensor is not None else None
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in shape)
