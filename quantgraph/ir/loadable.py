"""An in-memory model in the form onnxruntime loads from memory: its graph serialized, with
every external tensor referenced by its file from one folder, whatever the current directory.

Given bytes, onnxruntime reads external data relative to the current directory (or refuses:
"escapes working directory"); the session config entry :data:`FOLDER_ENTRY` names the folder
instead. A model's external tensors are found where the model says (each tensor's own folder,
or ``origin``'s for a proto made from a model); when they are not all in one folder under
their own names, the references are rewritten relative to the folder they share.

Small external tensors (under :data:`SPILL_TENSOR`: shapes, norms, scales) are carried in the
proto: onnxruntime's shape inference reads a Reshape's shape from the proto and refuses an
external one when the model comes from memory ("Cannot parse data from external tensors").

No proto holds more than the graph: weights that live in external data stay references, and
in-memory weights beyond :data:`SPILL_TOTAL` (a converted model's transformed weights) are
written to a scratch file and referenced like the others, so a model over 2 GB never passes
through one protobuf, and onnxruntime maps them from the file rather than from a copy.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from .mapped_data import Replace, constant_tensors, external_folders
from .walk import proto_graphs

# onnxruntime's session config entry: the folder external-data locations are relative to.
FOLDER_ENTRY = "session.model_external_initializers_file_folder_path"
# In-memory weights beyond this (in all) are spilled to a scratch file, each one of at least
# SPILL_TENSOR bytes; below it the proto carries them (no file written for an ordinary model).
SPILL_TOTAL = 64 << 20
SPILL_TENSOR = 64 << 10
SCRATCH_DATA = "weights.data"
IN_MEMORY = "quantgraph-in-memory"  # graph_only's location of weights it leaves out
_ALIGN = 4096  # page-aligned tensors: onnxruntime can map them from the file


@dataclass
class Loadable:
    """``serialized``: the model as onnxruntime takes it from memory; ``folder``: the value of
    :data:`FOLDER_ENTRY` (None: the model reads no external data); ``spilled``: bytes of
    in-memory weights written to the ``scratch`` file."""

    serialized: bytes
    folder: str | None = None
    spilled: int = 0
    scratch: Path | None = None  # the file of spilled weights while the context lasts


@contextlib.contextmanager
def loadable(
    model: ir.Model | onnx.ModelProto, origin: ir.Model | None = None
) -> Iterator[Loadable]:
    """``model`` made loadable (module doc). A proto's external locations are read where
    ``origin``'s tensors of the same location are (without it: from the current directory,
    as onnxruntime reads bytes). The scratch file, if any, goes when the context ends
    (onnxruntime reads it while it makes the session)."""
    with tempfile.TemporaryDirectory(prefix="quantgraph-weights-") as scratch:
        if isinstance(model, ir.Model):
            yield _of_model(model, Path(scratch) / SCRATCH_DATA)
        else:
            yield _of_proto(model, {} if origin is None else external_folders(origin))


@dataclass
class _Placed:
    """A tensor onnxruntime reads from a file: where, and how to swap its reference in."""

    tensor: ir.TensorProtocol
    replace: Replace
    file: Path
    offset: int | None
    length: int | None


def _of_model(model: ir.Model, scratch: Path) -> Loadable:
    placed: list[_Placed] = []
    in_memory: list[tuple[ir.TensorProtocol, Replace]] = []
    inlined: list[Swap] = []
    for tensor, replace in constant_tensors(model):
        if isinstance(tensor, ir.ExternalTensor) and _small(tensor):
            inlined.append((replace, tensor, _read(tensor)))
        elif isinstance(tensor, ir.ExternalTensor):
            file = Path(os.path.abspath(tensor.path))
            placed.append(_Placed(tensor, replace, file, tensor.offset, tensor.length))
        else:
            in_memory.append((tensor, replace))
    spilled = 0
    if sum(tensor.nbytes for tensor, _ in in_memory) > SPILL_TOTAL:
        large = [(t, r) for t, r in in_memory if t.nbytes >= SPILL_TENSOR]
        placed += _spill(large, scratch)
        spilled = sum(tensor.nbytes for tensor, _ in large)
    folder = _common_folder(p.file for p in placed)
    swaps = inlined
    for one in placed:
        assert folder is not None
        location = one.file.relative_to(folder).as_posix()
        tensor = one.tensor
        if not isinstance(tensor, ir.ExternalTensor) or os.fspath(tensor.location) != location:
            reference = _reference(tensor, location, one.offset, one.length)
            swaps.append((one.replace, tensor, reference))
    serialized = _serialized(model, swaps).SerializeToString()
    folder_name = None if folder is None else str(folder)
    return Loadable(serialized, folder_name, spilled, scratch if spilled else None)


def graph_only(model: ir.Model) -> onnx.ModelProto:
    """``model`` serialized without the bytes of its in-memory weights of at least
    :data:`SPILL_TENSOR` (each an external reference to :data:`IN_MEMORY` of its length): for
    keys and for what reads types and shapes only (shape inference). External tensors stay
    references as they are."""
    swaps: list[Swap] = [
        (replace, tensor, _reference(tensor, IN_MEMORY, 0, tensor.nbytes))
        for tensor, replace in constant_tensors(model)
        if not isinstance(tensor, ir.ExternalTensor) and tensor.nbytes >= SPILL_TENSOR
    ]
    return _serialized(model, swaps)


Swap = tuple[Replace, ir.TensorProtocol, ir.TensorProtocol]  # (how, the tensor, what is written)


def _small(tensor: ir.ExternalTensor) -> bool:
    return tensor.nbytes < SPILL_TENSOR and tensor.dtype.bitwidth >= 8  # 4-bit: weights


def _read(tensor: ir.ExternalTensor) -> ir.TensorProtocol:
    """A small external tensor's values, in memory."""
    values = np.frombuffer(tensor.tobytes(), tensor.dtype.numpy()).reshape(tensor.shape.numpy())
    return ir.Tensor(values, dtype=tensor.dtype, name=tensor.name)


def _serialized(model: ir.Model, swaps: list[Swap]) -> onnx.ModelProto:
    """``model``'s proto with each tensor of ``swaps`` written as its reference (swapped in
    for the call only: ``model`` is as it was after)."""
    for replace, _, reference in swaps:
        replace(reference)
    try:
        return ir.to_proto(model)
    finally:
        for replace, tensor, _ in swaps:
            replace(tensor)


def _spill(tensors: list[tuple[ir.TensorProtocol, Replace]], path: Path) -> list[_Placed]:
    """``tensors`` written one after the other to ``path``, each at a page-aligned offset."""
    placed = []
    with open(path, "wb") as stream:
        for tensor, replace in tensors:
            offset = -stream.tell() % _ALIGN + stream.tell()
            stream.seek(offset)
            write = getattr(tensor, "tofile", None)  # no copy of a numpy-backed tensor
            if write is None:
                stream.write(tensor.tobytes())
            else:
                write(stream)
            placed.append(_Placed(tensor, replace, path, offset, stream.tell() - offset))
    return placed


def _reference(
    tensor: ir.TensorProtocol, location: str, offset: int | None, length: int | None
) -> ir.ExternalTensor:
    return ir.ExternalTensor(
        location,
        offset,
        length,
        tensor.dtype,
        shape=ir.Shape(tensor.shape.numpy()),
        name=tensor.name or "",
    )


def _common_folder(files: Iterable[Path]) -> Path | None:
    """The deepest folder holding every one of ``files`` (None for none)."""
    folders = {file.parent for file in files}
    if not folders:
        return None
    return Path(os.path.commonpath(sorted(folders)))


def _of_proto(proto: onnx.ModelProto, folders: Mapping[str, Path]) -> Loadable:
    tensors = [t for t in _proto_tensors(proto) if t.data_location == onnx.TensorProto.EXTERNAL]
    if not tensors:
        return Loadable(proto.SerializeToString())
    cwd = Path.cwd()
    files = {}
    for tensor in tensors:
        location = _location(tensor)
        files[location] = Path(os.path.abspath(folders.get(location, cwd) / location))
    folder = _common_folder(files.values())
    assert folder is not None
    moved = {
        location: file.relative_to(folder).as_posix()
        for location, file in files.items()
        if file.relative_to(folder).as_posix() != location
    }
    if moved or any(_small_proto(t) for t in tensors):  # the caller's proto stays as it is
        proto = onnx.ModelProto.FromString(proto.SerializeToString())
        for tensor in _proto_tensors(proto):
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            if _small_proto(tensor):
                _inline(tensor, files[_location(tensor)])
                continue
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value in moved:
                    entry.value = moved[entry.value]
    return Loadable(proto.SerializeToString(), str(folder))


def _small_proto(tensor: onnx.TensorProto) -> bool:
    return ir.DataType(tensor.data_type).bitwidth >= 8 and _nbytes(tensor) < SPILL_TENSOR


def _nbytes(tensor: onnx.TensorProto) -> int:
    count = 1
    for dim in tensor.dims:
        count *= dim
    return count * ir.DataType(tensor.data_type).bitwidth // 8


def _inline(tensor: onnx.TensorProto, file: Path) -> None:
    """``tensor``'s bytes read from ``file`` into its raw_data (the reference dropped)."""
    entries = {e.key: e.value for e in tensor.external_data}
    offset = int(entries.get("offset", 0))
    length = int(entries.get("length", _nbytes(tensor)))
    with open(file, "rb") as stream:
        stream.seek(offset)
        data = stream.read(length)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data


def _location(tensor: onnx.TensorProto) -> str:
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def _proto_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    for graph in proto_graphs(proto.graph):
        yield from graph.initializer
        yield from _attribute_tensors(graph.node)
    for function in proto.functions:
        yield from _attribute_tensors(function.node)


def _attribute_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.TensorProto]:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
