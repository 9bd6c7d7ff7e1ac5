"""Reading and writing models: clear errors for bad files, safe writes (:mod:`.writing`).

Models with external data are read lazily (weights stay on disk, read through one shared map
of each data file when used: :mod:`.mapped_data`) from the model's folder whatever the current
directory, and written with external data again unless asked otherwise, so multi-GiB models
convert in little memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import onnx
import onnx_ir as ir

from ..errors import ModelError
from .checker import OpKey, check_file
from .derived_tensors import on_disk
from .mapped_data import external_folders, map_external
from .node_order import sort_nodes
from .output_files import check_data_name, write_files
from .walk import subgraphs

ModelLike = str | os.PathLike[str] | bytes | onnx.ModelProto | ir.Model
AUTO = "auto"
INLINE = "none"
_SOURCES = "quantgraph.sources"  # ir.Model.meta key: the files a model was read from
_SOURCE_PROTO = "quantgraph.source_proto"  # ... and the proto it was made from (read once)
_FOLDERS = "quantgraph.external_folders"  # ... and where each external-data location is read


def load_model(model: ModelLike) -> ir.Model:
    """An onnx-ir model from a path, serialized bytes or a ModelProto (never shared with it).

    A graph with a cycle is a :class:`ModelError`; an acyclic unsorted one comes back sorted.
    """
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return _in_order(_from_proto(model), "")
    if isinstance(model, bytes):
        try:
            loaded = _from_proto(onnx.load_from_string(model))
        except Exception as error:
            raise ModelError(f"the bytes are not an ONNX model: {_first_line(error)}") from None
        return _in_order(loaded, "")
    path = Path(model)
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, not an ONNX model file")
    if path.stat().st_size == 0:
        raise ModelError(f"{path}: the file is empty")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise ModelError(f"{path}: not an ONNX model ({_first_line(error)})") from None
    if not proto.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (it has no graph)")
    _check_external_locations(proto, path)
    locations = sorted(external_locations(proto))
    try:
        loaded = _from_proto(proto)
        if locations:
            _read_from(loaded, {location: path.parent.absolute() for location in locations})
    except Exception as error:
        raise ModelError(f"{path}: cannot read the model ({_first_line(error)})") from None
    loaded.meta[_SOURCES] = (path, *(path.parent / location for location in locations))
    return _in_order(loaded, str(path))


def _read_from(model: ir.Model, folders: dict[str, Path]) -> None:
    """``model``'s external tensors read from ``folders`` (location -> folder), remembered
    for :func:`original_model`."""
    map_external(model, folders)
    model.meta[_FOLDERS] = folders


def copy_model(model: ir.Model, *, as_read: bool = False) -> ir.Model:
    """A copy of ``model`` to change in place (the caller's stays as it was) whose external
    tensors read the same files from any current directory (a round trip through a proto
    alone would leave them relative to it). It shares ``model``'s tensors (a pass replaces a
    tensor it rewrites, never changes one). ``as_read``: the copy is what :func:`load_model`
    makes of ``model``'s serialization instead (nodes sorted, :func:`original_model` knows
    it; in-memory weights copied)."""
    if not as_read:
        return model.clone()
    folders = external_folders(model)
    copied = load_model(ir.to_proto(model))
    if folders:
        _read_from(copied, folders)
    return copied


def _from_proto(proto: onnx.ModelProto) -> ir.Model:
    # The proto is kept: the model as read, for original_model() after passes changed it.
    # It costs little: the IR's tensors are views of the proto's.
    loaded = ir.from_proto(proto)
    loaded.meta[_SOURCE_PROTO] = proto
    return loaded


def source_proto(model: ir.Model) -> onnx.ModelProto | None:
    """The proto ``model`` was read from by :func:`load_model` (not to be changed); None for a
    model not made by it."""
    proto: onnx.ModelProto | None = model.meta.get(_SOURCE_PROTO)
    return proto


def original_model(model: ir.Model) -> ir.Model | None:
    """``model`` as it was read (before passes changed it), without reading any file again;
    None for a model not made by :func:`load_model`."""
    proto: onnx.ModelProto | None = model.meta.get(_SOURCE_PROTO)
    if proto is None:
        return None
    fresh = _from_proto(proto)
    files = source_files(model)
    if files:
        fresh.meta[_SOURCES] = files
    folders: dict[str, Path] | None = model.meta.get(_FOLDERS)
    if folders:
        _read_from(fresh, folders)
    sort_nodes(fresh)
    return fresh


def source_files(model: ir.Model) -> tuple[Path, ...]:
    """The model file and external-data files ``model`` was loaded from (none for a model
    made in memory): what a writer must never touch."""
    found: tuple[Path, ...] = model.meta.get(_SOURCES, ())
    return found


def _in_order(model: ir.Model, label: str) -> ir.Model:
    sort_nodes(model, label)
    return model


def external_locations(proto: onnx.ModelProto) -> set[str]:
    """The external-data files a model's tensors point into (main graph and subgraphs)."""
    found: set[str] = set()
    for tensor in _tensors(proto.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    found.add(entry.value)
    return found


def has_external_data(model: ir.Model) -> bool:
    """Whether an initializer's bytes live in (or are derived from) an external-data file."""
    return any(
        on_disk(value.const_value)
        for graph in (model.graph, *subgraphs(model.graph))
        for value in graph.initializers.values()
    )


def save_model(
    model: ir.Model | onnx.ModelProto | bytes,
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    external_data: str = AUTO,
    protect: tuple[Path, ...] = (),
    progress: Callable[[int, int], None] | None = None,
    check: bool = False,
    accepted: frozenset[OpKey] = frozenset(),
) -> Path:
    """Write ``model`` to ``path`` complete or not at all (:mod:`quantgraph.ir.output_files`: never
    over a file of ``protect``, only regular files replaced, exclusive unless ``force``).

    ``external_data``: "auto" keeps the model's layout (weights that live in external data are
    written to ``<OUT stem>.data`` beside OUT), "none" writes everything into OUT, any other
    value is the external-data file's name (a plain name: it goes beside OUT). ``check`` runs
    ``onnx.checker.check_model(full_check=True)`` on the written file before it takes OUT's
    name; ``accepted`` ops of the original that onnx does not know are not held against it
    (:mod:`.checker`). ``bytes`` are a serialized model that refers to no external data (as
    convert's checked serialization of a model whose weights are in memory).
    """
    target = Path(path)
    if external_data not in (AUTO, INLINE):
        check_data_name(external_data, target)
    if isinstance(model, bytes):
        if external_data in (AUTO, INLINE):
            serialized = model

            def write_serialized(staged: Path) -> None:
                _write_bytes(staged, serialized)
                if check:
                    _check_file(staged, accepted)

            return write_files(target, write_serialized, force=force, protect=protect)
        parsed: onnx.ModelProto = onnx.ModelProto.FromString(model)
        model = parsed
    if (
        isinstance(model, onnx.ModelProto)
        and external_data in (AUTO, INLINE)
        and not any(t.data_location == onnx.TensorProto.EXTERNAL for t in _tensors(model.graph))
    ):
        # Already serialized and self-contained: write it as it is.
        proto = model

        def write_proto(staged: Path) -> None:
            _write_bytes(staged, proto.SerializeToString(deterministic=True))
            if check:
                _check_file(staged, accepted)

        return write_files(target, write_proto, force=force, protect=protect)
    assert not isinstance(model, bytes)  # parsed above
    loaded = model if isinstance(model, ir.Model) else ir.from_proto(model)
    if external_data == AUTO:
        data_name = f"{target.stem}.data" if has_external_data(loaded) else None
    elif external_data == INLINE:
        data_name = None
    else:
        data_name = external_data
    if data_name is None and has_external_data(loaded):
        loaded = ir.external_data.load_to_model(loaded)
    callback = None
    if progress is not None:
        report = progress

        def callback(_: object, info: ir.external_data.CallbackInfo) -> None:
            report(info.index + 1, info.total)

    def write_model(staged: Path) -> None:
        if data_name is None:
            _write_bytes(staged, ir.to_proto(loaded).SerializeToString(deterministic=True))
        else:
            ir.save(loaded, staged, external_data=data_name, callback=callback)
        if check:
            _check_file(staged, accepted)

    companions = () if data_name is None else (data_name,)
    return write_files(target, write_model, force=force, protect=protect, companions=companions)


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def _check_file(path: Path, accepted: frozenset[OpKey]) -> None:
    from .onnx_schemas import register

    register()
    try:
        check_file(path, accepted)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise ModelError(
            f"the result fails onnx.checker (full_check): {_first_line(error)}"
        ) from error


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes of ``graph`` and the graphs its nodes hold.

    One look at each attribute's type (a field read, not ``HasField``): on a 100k-node model
    this walk was 0.5 s, made when it is read and again when it is written."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            kind = attribute.type
            if kind in _PLAIN:
                continue
            if kind == _TENSOR or (kind == _UNDEFINED and attribute.HasField("t")):
                yield attribute.t
            elif kind == _GRAPH or (kind == _UNDEFINED and attribute.HasField("g")):
                yield from _tensors(attribute.g)
            elif kind in (_GRAPHS, _UNDEFINED):
                for inner in attribute.graphs:
                    yield from _tensors(inner)


_Kind = onnx.AttributeProto.AttributeType
_TENSOR, _GRAPH, _GRAPHS, _UNDEFINED = _Kind.TENSOR, _Kind.GRAPH, _Kind.GRAPHS, _Kind.UNDEFINED
# Attribute types that hold neither a tensor nor a graph.
_PLAIN = frozenset((_Kind.FLOAT, _Kind.INT, _Kind.STRING, _Kind.FLOATS, _Kind.INTS, _Kind.STRINGS))


def _check_external_locations(proto: onnx.ModelProto, path: Path) -> None:
    folder = path.parent.resolve()
    for location in external_locations(proto):
        resolved = (folder / location).resolve()
        if Path(location).is_absolute() or folder not in resolved.parents:
            raise ModelError(
                f"{path}: external data location '{location}' escapes the model's folder "
                "(onnx forbids it; it could read any file)"
            )
        if not resolved.is_file():
            raise ModelError(f"{path}: external data file '{location}' is missing")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def write_file(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    force: bool = False,
    protect: tuple[Path, ...] = (),
    role: str = "OUT",
) -> Path:
    """Write ``data`` to ``path`` by the rules of :mod:`.writing` (complete or not at all, never
    over a file of ``protect``, exclusive unless ``force``, only regular files replaced)."""
    return write_files(
        Path(path),
        lambda staged: _write_bytes(staged, data),
        force=force,
        protect=protect,
        role=role,
    )
