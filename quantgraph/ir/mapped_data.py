"""External data read through one map of each data file, shared by every tensor that points
into it.

onnx-ir's :class:`~onnx_ir.ExternalTensor` maps the whole data file once per tensor it reads:
the 111 weights of a 926 MB file reserve ~100 GB of address space, and any ``ulimit -v`` fails
at once with ENOMEM though little memory is resident. A :class:`MappedTensor` is the same
tensor (an ``ExternalTensor`` to every reader and writer: serialized as a reference, copied to
a new file by ``tofile``) whose arrays are views of the file's one read-only map. The map lives
as long as an array of it does and is unmapped when the last one goes, so a model whose
weights are transformed one at a time holds the address space of one file, not of one per
tensor, and none once nothing reads it.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import onnx_ir as ir

from ..errors import ModelError
from .walk import all_graphs

# realpath -> (the file's identity when mapped, its map); the entry goes with the map.
_MAPS: weakref.WeakValueDictionary[tuple[str, tuple[int, ...]], mmap.mmap] = (
    weakref.WeakValueDictionary()
)
_LOCK = threading.Lock()
_SUB_BYTE = {2, 4, 6}
Replace = Callable[[ir.TensorProtocol], None]  # puts another tensor in one's place


class MappedTensor(ir.ExternalTensor):
    """An external tensor whose data is a view of its file's one shared map (module doc).

    Nothing is cached: each :meth:`numpy` is a new view (a sub-byte type a new unpacked
    array), so the tensor holds no address space between reads.
    """

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        self._check_validity()
        shape = self.shape.numpy()
        if self.size == 0:
            return np.empty(shape, dtype=self.dtype.numpy())
        if self.dtype.bitwidth in _SUB_BYTE:
            packed = self._view(np.dtype(np.uint8), self.nbytes)
            unpacked: np.ndarray = ir.PackedTensor(packed, self.dtype, shape=shape).numpy()
            return unpacked
        # ONNX stores little-endian whatever the machine
        dtype = np.dtype(self.dtype.numpy()).newbyteorder("<")
        return self._view(dtype, self.size).reshape(shape)

    def __array__(self, dtype: object = None, copy: bool | None = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)  # type: ignore[call-overload]

    def tobytes(self) -> bytes:
        self._check_validity()
        return bytes(self._view(np.dtype(np.uint8), self._byte_length()))

    def release(self) -> None:
        """Nothing to release: the map goes with the last array of it."""

    def _byte_length(self) -> int:
        length: int | None = self.length
        return self.nbytes if length is None else length

    def _view(self, dtype: np.dtype, count: int) -> np.ndarray:
        offset = self.offset or 0
        mapped = shared_map(self.path)
        if offset + count * dtype.itemsize > len(mapped):
            raise ModelError(
                f"{self.path}: tensor '{self.name}' reads bytes {offset}..."
                f"{offset + count * dtype.itemsize} past the end of the file ({len(mapped)} bytes)"
            )
        return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)


def shared_map(path: str | os.PathLike[str]) -> mmap.mmap:
    """The one read-only map of the file at ``path`` (made on first use; a file replaced since
    gets a map of its own)."""
    real = os.path.realpath(path)
    status = os.stat(real)
    key = (real, (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns))
    with _LOCK:
        found = _MAPS.get(key)
        if found is None:
            with open(real, "rb") as stream:
                found = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
            _MAPS[key] = found
        return found


def map_external(model: ir.Model, folders: Mapping[str, Path] | Path) -> None:
    """Every external tensor of ``model`` (initializers of every graph, tensor attributes)
    becomes a :class:`MappedTensor` reading ``location`` from ``folders`` (one folder, or
    one for each location; a location missing there keeps the tensor's own base)."""
    for tensor, replace in external_tensors(model):
        location = os.fspath(tensor.location)
        folder = folders if isinstance(folders, Path) else folders.get(location)
        base = tensor.base_dir if folder is None else folder
        if type(tensor) is MappedTensor and base == tensor.base_dir:
            continue
        replace(
            MappedTensor(
                tensor.location,
                tensor.offset,
                tensor.length,
                tensor.dtype,
                shape=tensor.shape,
                name=tensor.name,
                doc_string=tensor.doc_string,
                metadata_props=dict(tensor.metadata_props) or None,
                base_dir=base,
            )
        )


def external_folders(model: ir.Model) -> dict[str, Path]:
    """location -> the folder it is read from, for every external tensor of ``model``
    (absolute: a base of "" is the current directory, as onnx-ir reads it)."""
    found: dict[str, Path] = {}
    for tensor, _ in external_tensors(model):
        found.setdefault(os.fspath(tensor.location), Path(os.path.abspath(tensor.base_dir or ".")))
    return found


def external_tensors(model: ir.Model) -> Iterator[tuple[ir.ExternalTensor, Replace]]:
    """Each external tensor of ``model`` with a function that puts another in its place."""
    for tensor, replace in constant_tensors(model):
        if isinstance(tensor, ir.ExternalTensor):
            yield tensor, replace


def constant_tensors(model: ir.Model) -> Iterator[tuple[ir.TensorProtocol, Replace]]:
    """Each initializer of every graph and each tensor attribute of every node (functions'
    too), with a function that puts another tensor in its place."""
    for graph in all_graphs(model):
        if isinstance(graph, ir.Graph):
            for value in graph.initializers.values():
                if value.const_value is not None:
                    yield value.const_value, _setter(value)
        for node in graph:
            for name, attribute in node.attributes.items():
                if attribute.type == ir.AttributeType.TENSOR and attribute.value is not None:
                    yield attribute.value, _attribute_setter(node, name)


def _setter(value: ir.Value) -> Replace:
    def replace(tensor: ir.TensorProtocol) -> None:
        value.const_value = tensor

    return replace


def _attribute_setter(node: ir.Node, name: str) -> Replace:
    def replace(tensor: ir.TensorProtocol) -> None:
        node.attributes[name] = ir.AttrTensor(name, tensor)

    return replace
