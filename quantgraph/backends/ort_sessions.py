"""Every onnxruntime session quantgraph makes goes through :func:`ort_session`, from a file or
from a model in memory.

One place, so that what onnxruntime needs of an in-memory model holds on every path (sessions
of converted, fused, lowered, exposed or single-node models alike): its external data is found
from any current directory and no proto holds more than its graph
(:mod:`quantgraph.ir.loadable`). tests/test_external_data.py holds every other module to it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..ir.loadable import FOLDER_ENTRY, loadable

Source = str | os.PathLike[str] | bytes | ir.Model | onnx.ModelProto
CPU = ("CPUExecutionProvider",)


def ort_session(
    source: Source,
    options: ort.SessionOptions | None = None,
    providers: Sequence[str] = CPU,
    *,
    origin: ir.Model | None = None,
) -> ort.InferenceSession:
    """An onnxruntime session on ``source``: a model file (onnxruntime reads its weights
    beside it), serialized bytes (external locations relative to the current directory, as
    onnxruntime reads them), or a model in memory, an ``ir.Model`` or a proto (external
    tensors read where the model's are; a proto made from a model reads them where
    ``origin``'s of the same location are). Sets :data:`FOLDER_ENTRY` in ``options`` where
    the model reads external data, and runs nodes in priority order unless ``options`` asked
    for another."""
    options = ort.SessionOptions() if options is None else options
    if options.execution_order == ort.ExecutionOrder.DEFAULT:
        # onnxruntime's default order ran every weight's DequantizeLinear before the first
        # MatMul reading one: all weights at once in float (measured, 208 MiB of int8 weights
        # at ORT_DISABLE_ALL: 1.5 GB of address space, 0.54 GB in priority order). The order
        # changes no result.
        options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    if isinstance(source, (str, os.PathLike, bytes)):
        if _entry(options) is not None:  # set for another model: read this one's as it says
            folder = Path.cwd() if isinstance(source, bytes) else Path(source).parent
            options.add_session_config_entry(FOLDER_ENTRY, str(folder.absolute()))
        loaded = source if isinstance(source, bytes) else os.fspath(source)
        return ort.InferenceSession(loaded, options, providers=list(providers))
    with loadable(source, origin) as ready:
        if ready.folder is not None and _entry(options) != ready.folder:
            options.add_session_config_entry(FOLDER_ENTRY, ready.folder)
        return ort.InferenceSession(ready.serialized, options, providers=list(providers))


def _entry(options: ort.SessionOptions) -> str | None:
    try:
        found: str = options.get_session_config_entry(FOLDER_ENTRY)
    except Exception:  # onnxruntime raises for an entry never set
        return None
    return found or None


__all__ = ["CPU", "Source", "ort_session"]
