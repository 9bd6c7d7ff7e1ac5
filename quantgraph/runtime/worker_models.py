"""A candidate's model for a worker process, its weights not copied where a file holds them.

A candidate of fusion "auto" is an ``ir.Model`` in the tuning process: its weights partly in the
original's external data (``ir.ExternalTensor``), partly made in memory by its plan (onnxruntime's
MatMulNBits layout restored from the spec's, oneDNN's reorders). Saving it whole for a worker
copies every weight (926 MB a candidate at 1.1B). Here the weights a file holds stay in it: the
saved graph refers to them by their location, and the worker points their base directory back
at the original's folder (onnxruntime would refuse a file outside the model's folder, symbolic
links resolved; the worker hands them to it by reference, :mod:`.weights_by_reference`). Only
the weights made in memory are written, once, into the worker's own data file, each at a 64-byte
boundary (a view of the file is handed to onnxruntime as it is).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import onnx_ir as ir

from ..ir.walk import subgraphs
from .weights_by_reference import SMALLEST

MODEL = "model.onnx"
OWN_DATA = "weights.data"  # the weights made in memory, in the worker's folder
ALIGNMENT = 64


class NotByReference(ValueError):
    """Two of a model's external weights share a location but not a folder."""


def save_by_reference(model: ir.Model, folder: Path) -> dict[str, str]:
    """``model`` as ``folder/model.onnx`` (and ``folder/weights.data``), no weight a file holds
    copied; the folders of the files it refers to, by location (for :func:`load_by_reference`).
    ``model`` is back as it was when this returns."""
    folders: dict[str, str] = {}
    swapped: list[tuple[ir.Value, ir.TensorProtocol]] = []
    try:
        with open(folder / OWN_DATA, "wb") as stream:
            for value in _initializers(model):
                tensor = value.const_value
                if tensor is None:
                    continue
                if isinstance(tensor, ir.ExternalTensor):
                    location = str(tensor.location)
                    where = os.path.abspath(tensor.base_dir or os.curdir)
                    if location == OWN_DATA or folders.setdefault(location, where) != where:
                        raise NotByReference(f"external data '{location}' in two folders")
                    continue
                if tensor.nbytes < SMALLEST:
                    continue  # serialized with the graph
                stream.write(b"\0" * (-stream.tell() % ALIGNMENT))
                offset = stream.tell()
                write = getattr(tensor, "tofile", None)  # a derived tensor streams itself
                if write is not None:
                    stream.flush()
                    write(stream)
                else:
                    stream.write(tensor.tobytes())
                swapped.append((value, tensor))
                value.const_value = ir.ExternalTensor(
                    OWN_DATA,
                    offset,
                    stream.tell() - offset,
                    tensor.dtype,
                    shape=ir.Shape(list(tensor.shape.numpy())),
                    name=value.name or "",
                    base_dir=str(folder),
                )
        data = ir.to_proto(model).SerializeToString()  # the graph only: every weight referred to
    finally:
        for value, tensor in swapped:
            value.const_value = tensor
    (folder / MODEL).write_bytes(data)
    return folders


def load_by_reference(folder: Path, folders: dict[str, str]) -> ir.Model:
    """The model :func:`save_by_reference` wrote into ``folder``, each external weight found in
    its own folder again."""
    model = ir.load(folder / MODEL)
    for value in _initializers(model):
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor) and str(tensor.location) in folders:
            tensor.base_dir = folders[str(tensor.location)]
    return model


def _initializers(model: ir.Model) -> Iterator[ir.Value]:
    for graph in (model.graph, *subgraphs(model.graph)):
        yield from graph.initializers.values()


__all__ = ["MODEL", "NotByReference", "OWN_DATA", "load_by_reference", "save_by_reference"]
