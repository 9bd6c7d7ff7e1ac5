"""A model handed to onnxruntime with its large weights by reference, not copied.

onnxruntime takes a model as a file or as serialized bytes. Serializing copies every weight into
the protobuf (past 2 GiB it cannot be made at all), and serialized bytes cannot point into
external data (onnxruntime resolves it against the current directory, and refuses a file
outside the model's folder, symbolic links resolved). So the main graph's weights in external
data, and those made in memory above :data:`SMALLEST` bytes, are serialized as external
references without data and handed to onnxruntime from memory
(``SessionOptions.add_external_initializers``): an external weight as a view of the region of
its file it lives in (memory-mapped, read-only), a weight made in memory as its own array.
onnxruntime reads them in place; the views must outlive the session (:class:`Source` holds
them). A packed 4-bit weight goes as a byte array of its logical shape holding its packed bytes
at the start (onnxruntime's binding takes the array's shape as the tensor's and reads the
packed half): a view of its file where the file reaches that far, else its bytes read into a
new array whose second half is never touched. (Serialized, the 4-bit weights of a 1.1B
decoder's oneDNN candidate took 3.4 GiB at once: unpacked, packed into the protobuf and copied
by onnxruntime.) External weights in subgraphs are serialized with their bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ..ir.walk import subgraphs

SMALLEST = 1 << 16  # bytes: smaller weights made in memory are serialized as they are
PLACEHOLDER = "quantgraph-weight-in-memory"  # the location of a weight handed over from memory
# unsigned integers of each byte width: a weight's bytes as onnxruntime's binding takes them
_STORAGE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_NIBBLES = frozenset((ir.DataType.INT4, ir.DataType.UINT4))  # onnxruntime's packed types


@dataclass
class Source:
    """What onnxruntime loads: the serialized graph, and the arrays and OrtValues of the
    weights it reads from memory (kept alive as long as the session)."""

    model: bytes
    held: list[object] = field(default_factory=list)


def source(model: ir.Model, options: ort.SessionOptions) -> Source:
    """``model`` serialized without its large weights, which ``options`` hands to onnxruntime
    by reference. ``model`` is back as it was when this returns."""
    names: list[str] = []
    values: list[ort.OrtValue] = []
    held: list[object] = []
    swapped: list[tuple[ir.Value, ir.TensorProtocol | None]] = []
    try:
        for value in model.graph.initializers.values():
            tensor = value.const_value
            if tensor is None or value.name is None or value.is_graph_input():
                continue  # (an input's default value stays in the graph: a feed may replace it)
            external = isinstance(tensor, ir.ExternalTensor)
            if not external and tensor.nbytes < SMALLEST:
                continue
            if not value.uses() and not value.is_graph_output():
                # onnxruntime drops an unused initializer before taking the ones handed over
                swapped.append((value, tensor))
                value.const_value = _placeholder(value.name, tensor)
                continue
            array = _view(tensor)
            if array is None:
                if external:  # serialized with its bytes: onnxruntime cannot reach its file
                    swapped.append((value, tensor))
                    value.const_value = ir.tensor(tensor.numpy(), name=value.name)
                continue
            ort_value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, int(tensor.dtype))
            held += [array, ort_value]
            names.append(value.name)
            values.append(ort_value)
            swapped.append((value, tensor))
            value.const_value = _placeholder(value.name, tensor)
        for graph in subgraphs(model.graph):
            for value in graph.initializers.values():
                tensor = value.const_value
                if isinstance(tensor, ir.ExternalTensor):
                    swapped.append((value, tensor))
                    value.const_value = ir.tensor(tensor.numpy(), name=value.name)
        serialized = ir.to_proto(model).SerializeToString()
    finally:
        for value, tensor in reversed(swapped):
            value.const_value = tensor
    if names:
        options.add_external_initializers(names, values)
    return Source(serialized, held)


def _placeholder(name: str, tensor: ir.TensorProtocol) -> ir.ExternalTensor:
    """An external reference without data, of ``tensor``'s type and shape."""
    shape = ir.Shape(tensor.shape.numpy())
    return ir.ExternalTensor(PLACEHOLDER, 0, tensor.nbytes, tensor.dtype, shape=shape, name=name)


def _view(tensor: ir.TensorProtocol) -> np.ndarray | None:
    """``tensor``'s bytes as an array of its shape (unsigned integers of its width) without a
    copy (packed 4-bit: :func:`_nibbles`); None for other sub-byte types and strings."""
    width = tensor.dtype.bitwidth
    if tensor.dtype in _NIBBLES:
        return _nibbles(tensor)
    if width % 8 or width // 8 not in _STORAGE or tensor.dtype == ir.DataType.STRING:
        return None
    storage = np.dtype(_STORAGE[width // 8])
    dims = tuple(int(d) for d in tensor.shape.numpy())
    if isinstance(tensor, ir.ExternalTensor):
        if tensor.size == 0:
            return np.zeros(dims, storage)
        mapped = np.memmap(
            tensor.path, dtype=storage, mode="r", offset=tensor.offset or 0, shape=(tensor.size,)
        )
        return np.asarray(mapped).reshape(dims)
    array = np.ascontiguousarray(tensor.numpy())
    if array.dtype.itemsize != storage.itemsize:
        return None
    return array.view(storage).reshape(dims)


def _nibbles(tensor: ir.TensorProtocol) -> np.ndarray:
    """A packed 4-bit ``tensor`` as a byte array of its logical shape, its packed bytes first
    (the module's docstring says why)."""
    dims = tuple(int(d) for d in tensor.shape.numpy())
    size = int(np.prod(dims))
    packed = (size + 1) // 2
    if not size:
        return np.zeros(dims, np.uint8)
    if isinstance(tensor, ir.ExternalTensor):
        offset = tensor.offset or 0
        if offset + size <= os.path.getsize(tensor.path):  # a view reaches far enough
            mapped = np.memmap(tensor.path, dtype=np.uint8, mode="r", offset=offset, shape=(size,))
            return np.asarray(mapped).reshape(dims)
    array = np.empty(dims, np.uint8)
    target = array.reshape(-1)[:packed]
    if isinstance(tensor, ir.ExternalTensor):
        with open(tensor.path, "rb") as stream:
            stream.seek(tensor.offset or 0)
            if stream.readinto(target.data) != packed:
                raise ValueError(f"weight '{tensor.name}': {tensor.path} ends before its data")
    else:
        target[:] = np.frombuffer(tensor.tobytes(), np.uint8, count=packed)
    return array


__all__ = ["PLACEHOLDER", "SMALLEST", "Source", "source"]
