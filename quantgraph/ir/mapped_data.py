"""External data read tensor by tensor: each read takes the tensor's own byte range of the
file, never the whole file.

onnx-ir's :class:`~onnx_ir.ExternalTensor` maps the whole data file once per tensor it reads:
the 111 weights of a 926 MB file reserve ~100 GB of address space, and any ``ulimit -v`` fails
at once with ENOMEM though little memory is resident. A :class:`MappedTensor` is the same
tensor (an ``ExternalTensor`` to every reader and writer: serialized as a reference, copied to
a new file by ``tofile``) whose :meth:`~MappedTensor.numpy` maps its own range of the file
(read-only; a tensor under :data:`READ_BELOW` bytes is read into memory instead, so a model of
many small external tensors holds no map of each). A range is mapped while an array of it
lives: the address space a model's reads take is that of the weights being read at once,
never more than the file, and none once nothing reads it.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import onnx_ir as ir

from ..errors import ModelError
from .walk import all_graphs

READ_BELOW = 1 << 20  # smaller tensors are read into memory rather than mapped
_SUB_BYTE = {2, 4, 6}
Replace = Callable[[ir.TensorProtocol], None]  # puts another tensor in one's place


class MappedTensor(ir.ExternalTensor):
    """An external tensor whose reads map (or read) its own byte range of the file only
    (module doc).

    Nothing is cached: each :meth:`numpy` is a new array (a view of a new map of the range,
    or for a sub-byte type a new unpacked array), so the tensor holds no address space
    between reads.
    """

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        self._check_validity()
        shape = self.shape.numpy()
        if self.size == 0:
            return np.empty(shape, dtype=self.dtype.numpy())
        if self.dtype.bitwidth in _SUB_BYTE:
            packed = self._read(np.dtype(np.uint8), self.nbytes)
            unpacked: np.ndarray = ir.PackedTensor(packed, self.dtype, shape=shape).numpy()
            return unpacked
        # ONNX stores little-endian whatever the machine
        dtype = np.dtype(self.dtype.numpy()).newbyteorder("<")
        return self._read(dtype, self.size).reshape(shape)

    def __array__(self, dtype: object = None, copy: bool | None = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)  # type: ignore[call-overload]

    def tobytes(self) -> bytes:
        self._check_validity()
        length: int | None = self.length
        return bytes(self._read(np.dtype(np.uint8), self.nbytes if length is None else length))

    def release(self) -> None:
        """Nothing to release: a map goes with the last array of it."""

    def _read(self, dtype: np.dtype, count: int) -> np.ndarray:
        """``count`` items of ``dtype`` at the tensor's offset: mapped, or read when small."""
        offset = self.offset or 0
        size = count * dtype.itemsize
        with open(self.path, "rb") as stream:
            available = os.fstat(stream.fileno()).st_size
            if offset + size > available:
                raise ModelError(
                    f"{self.path}: tensor '{self.name}' reads bytes {offset}..{offset + size}, "
                    f"past the end of the file ({available} bytes)"
                )
            if size < READ_BELOW:
                stream.seek(offset)
                return np.frombuffer(stream.read(size), dtype=dtype)
            start = offset - offset % mmap.ALLOCATIONGRANULARITY
            mapped = mmap.mmap(
                stream.fileno(), offset + size - start, offset=start, access=mmap.ACCESS_READ
            )
        return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset - start)


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
