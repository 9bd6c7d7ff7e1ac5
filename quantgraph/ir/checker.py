"""onnx's full check, held no more strictly to a result than to the model it came from.

onnxruntime registers some operators in ONNX's own domain that onnx does not define
(``SimplifiedLayerNormalization``, which onnxruntime-genai's builder writes into every decoder):
``onnx.checker`` refuses the original model for them. A rewrite that keeps such nodes as they were
is checked with them moved, in a scratch copy of the node's domain field, to a domain the checker
does not validate; everything quantgraph writes is still checked in full. Which unknown ops are
accepted is the caller's decision (:func:`quantgraph.converter.convert` accepts those of the
original that onnxruntime registers, and names them in the report).
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx.onnx_cpp2py_export import shape_inference as onnx_inference

from .walk import all_graphs, proto_graphs

# Domains whose nodes the checker refuses when it knows no schema for them.
ONNX_DOMAINS = frozenset(("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"))
UNCHECKED_DOMAIN = "quantgraph.unchecked"  # never written to a file: only in the checked copy

OpKey = tuple[str, str]  # (domain, op_type)


@functools.cache
def _known(domain: str, op_type: str, version: int) -> bool:
    try:
        onnx.defs.get_schema(op_type, version, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return False
    return True


def unregistered_ops(model: ir.Model) -> dict[OpKey, list[str]]:
    """Nodes (names, per op) of ONNX's domains for which onnx defines no operator at the
    model's opset: what the full check refuses as "No Op registered"."""
    found: dict[OpKey, list[str]] = {}
    for graph in all_graphs(model):
        for node in graph:
            if unregistered(node, model.opset_imports):
                found.setdefault((node.domain, node.op_type), []).append(node.name or node.op_type)
    return found


def unregistered(node: ir.Node, opsets: Mapping[str, int]) -> bool:
    """Whether ``node`` is of ONNX's domains and onnx defines no operator for it at the
    model's opset (``opsets``: the model's imports)."""
    domain = node.domain
    if domain not in ONNX_DOMAINS:
        return False
    return not _known(domain, node.op_type, opsets.get(domain, opsets.get("", 1)))


def describe(ops: Iterable[OpKey]) -> str:
    return ", ".join(f"{op}" + (f" ({domain})" if domain else "") for domain, op in sorted(ops))


@contextlib.contextmanager
def _moved(proto: onnx.ModelProto, accepted: frozenset[OpKey]) -> Iterator[bool]:
    """``proto`` with the accepted unknown nodes in :data:`UNCHECKED_DOMAIN` for the duration,
    put back as they were afterwards (no copy of a model that may hold large weights)."""
    moved: list[tuple[onnx.NodeProto, str]] = []
    if accepted:
        for graph in proto_graphs(proto.graph):
            for node in graph.node:
                if (node.domain, node.op_type) in accepted:
                    moved.append((node, node.domain))
                    node.domain = UNCHECKED_DOMAIN
    added = None
    if moved:
        added = proto.opset_import.add(domain=UNCHECKED_DOMAIN, version=1)
    try:
        yield bool(moved)
    finally:
        for node, domain in moved:
            node.domain = domain
        if added is not None:
            proto.opset_import.pop()


def check_proto(proto: onnx.ModelProto, accepted: frozenset[OpKey] = frozenset()) -> None:
    """``onnx.checker.check_model(proto, full_check=True)``, the ``accepted`` ops excepted."""
    with _moved(proto, accepted):
        onnx.checker.check_model(proto, full_check=True)


def check_bytes(data: bytes) -> None:
    """``onnx.checker.check_model(data, full_check=True)`` in its two steps, one after the other:
    the checker, then the shape inference its full check runs (check_type, strict, no data
    propagation: onnx's checker.cc), each on a parse of its own. The full check holds the model,
    a copy of it and the inference's state at once: 322 MB for a 12 MB model (the 100k-node
    Q/DQ chain converted) where the two steps peak at 197 MB; the same errors, raised as the
    same exceptions."""
    onnx.checker.check_model(data)
    onnx_inference.infer_shapes(data, True, True, False)


def check_file(path: Path, accepted: frozenset[OpKey] = frozenset()) -> None:
    """The full check of a written model file (external data resolved beside it)."""
    if not accepted:
        onnx.checker.check_model(str(path), full_check=True)
        return
    proto = onnx.load(str(path), load_external_data=False)
    with _moved(proto, accepted) as moved:
        if not moved:
            onnx.checker.check_model(str(path), full_check=True)
            return
        # the checker resolves external data beside the file it reads: a sibling graph file
        handle, name = tempfile.mkstemp(suffix=".onnx", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(proto.SerializeToString())
            onnx.checker.check_model(name, full_check=True)
        finally:
            os.unlink(name)
