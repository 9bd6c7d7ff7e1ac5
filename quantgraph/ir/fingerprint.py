"""A model's identity without serializing it.

Serializing a model copies every weight into one protobuf (and past 2 GiB cannot be done), so
what decides whether two models are the same (fusion "auto"'s cache key, candidate plans that
make one model) hashes the graph instead: every graph, function, node, attribute and declared
type, and each weight by its bytes; a weight in external data by its file (and the file's
modification time and size), offset and length (its bytes stay on disk); a weight derived from
others when written (converted or restored) by its computation and its sources (not computed).
"""

from __future__ import annotations

import functools
import hashlib
import os

import numpy as np
import onnx_ir as ir

from .derived_tensors import DerivedTensor
from .walk import all_graphs

# id(tensor) -> its digest: one model's weights shared by its copies (ir.Model.clone) are
# hashed once when their copies are fingerprinted with the same memo.
Memo = dict[int, tuple[ir.TensorProtocol, bytes]]


def fingerprint(model: ir.Model, memo: Memo | None = None) -> bytes:
    """A digest equal for two models exactly when they compute alike by their structure,
    attributes and weights (sha-256)."""
    digest = hashlib.sha256()
    known: Memo = {} if memo is None else memo

    def add(*parts: object) -> None:
        for part in parts:
            digest.update(repr(part).encode())
            digest.update(b"\0")

    add(model.ir_version, sorted(model.opset_imports.items()))
    for graph in all_graphs(model):
        add("graph", graph.name, [_declared(v) for v in graph.inputs])
        add([_declared(v) for v in graph.outputs])
        if isinstance(graph, ir.Graph):
            for name, value in sorted(graph.initializers.items()):  # their order is no matter
                tensor = value.const_value
                add(name, _declared(value), None if tensor is None else _tensor(tensor, known))
        for node in graph:
            add(node.domain, node.op_type, node.overload)  # a node's name computes nothing
            add([None if v is None else v.name for v in node.inputs])
            add([v.name for v in node.outputs])  # inferred shapes in between compute nothing
            for name, attr in node.attributes.items():
                add(name, attr.type, _attribute(attr, known))
    return digest.digest()


def _declared(value: ir.Value) -> tuple[str | None, str, str]:
    return value.name, str(value.type), str(value.shape)


def _attribute(attr: ir.Attr, known: Memo) -> object:
    if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        return "graph"  # its content is walked as a graph of its own
    if attr.type == ir.AttributeType.TENSOR:
        return _tensor(attr.as_tensor(), known)
    if attr.type == ir.AttributeType.TENSORS:
        return [_tensor(t, known) for t in attr.as_tensors()]
    return attr.value


def _tensor(tensor: ir.TensorProtocol, known: Memo) -> bytes:
    held = known.get(id(tensor))
    if held is not None and held[0] is tensor:
        return held[1]
    head = repr((tensor.dtype, tuple(tensor.shape))).encode()
    how = _computation(tensor.compute) if isinstance(tensor, DerivedTensor) else None
    if isinstance(tensor, ir.ExternalTensor):
        where = repr((str(tensor.path), tensor.offset, tensor.length, _version(tensor))).encode()
        found = hashlib.sha256(head + where).digest()
    elif isinstance(tensor, DerivedTensor) and how is not None:
        sources = b"".join(_tensor(source, known) for source in tensor.sources)
        found = hashlib.sha256(head + b"derived" + how + sources).digest()
    else:
        found = hashlib.sha256(head + tensor.tobytes()).digest()
    known[id(tensor)] = (tensor, found)  # the tensor is kept: its id is not reused
    return found


def _version(tensor: ir.ExternalTensor) -> tuple[int, int] | None:
    """The data file's modification time and size: a file written again is another weight."""
    try:
        found = os.stat(tensor.path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def _computation(compute: object) -> bytes | None:
    """A derived weight's computation as bytes equal for equal computations (a function by its
    qualified name, a partial by its function and arguments), or None where one is not known
    (the weight is then hashed by its bytes)."""
    if isinstance(compute, functools.partial):
        parts = [_computation(compute.func), *(_argument(v) for v in compute.args)]
        for key, value in sorted(compute.keywords.items()):
            found = _argument(value)
            parts.append(None if found is None else key.encode() + b"=" + found)
        return None if None in parts else b"|".join(p for p in parts if p is not None)
    module, name = getattr(compute, "__module__", None), getattr(compute, "__qualname__", None)
    if module is None or name is None or "<" in name:  # a lambda or a closure: its state unknown
        return None
    return f"{module}.{name}".encode()


def _argument(value: object) -> bytes | None:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value).encode()
    if isinstance(value, (tuple, list)):
        parts = [_argument(v) for v in value]
        return None if None in parts else b"(" + b",".join(p for p in parts if p) + b")"
    if isinstance(value, np.ndarray):
        return hashlib.sha256(repr((value.dtype, value.shape)).encode() + value.tobytes()).digest()
    if isinstance(value, np.generic):
        return repr(value.item()).encode()
    return None


__all__ = ["Memo", "fingerprint"]
