"""Reading and writing models: clear errors for bad files, atomic writes, inputs untouched."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import onnx
import onnx_ir as ir

from .errors import ModelError

ModelLike = str | os.PathLike[str] | bytes | onnx.ModelProto | ir.Model


def load_model(model: ModelLike) -> ir.Model:
    """An onnx-ir model from a path, serialized bytes or a ModelProto (never shared with it)."""
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model)
    if isinstance(model, bytes):
        try:
            return ir.from_proto(onnx.load_from_string(model))
        except Exception as error:
            raise ModelError(f"the bytes are not an ONNX model: {error}") from None
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
    try:
        return ir.from_proto(proto) if not _has_external_data(proto) else ir.load(str(path))
    except Exception as error:
        raise ModelError(f"{path}: cannot read the model ({_first_line(error)})") from None


def save_model(
    model: ir.Model | onnx.ModelProto, path: str | os.PathLike[str], *, force: bool = True
) -> Path:
    """Write ``model`` to ``path`` through a temporary file and a rename (never half-written)."""
    target = Path(path)
    if target.exists() and not force:
        raise ModelError(f"{target}: already exists (use --force to replace it)")
    if target.is_dir():
        raise ModelError(f"{target}: is a directory")
    proto = ir.to_proto(model) if isinstance(model, ir.Model) else model
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(proto.SerializeToString(deterministic=True))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _has_external_data(proto: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
