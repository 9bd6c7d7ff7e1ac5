"""A ready onnxruntime session on a model that uses the spec ops, on one backend."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from .backends import resolve, session_options
from .io import ModelLike, has_external_data, load_model, save_model
from .schemas import register as register_schemas


class InferenceSession:
    """``onnxruntime.InferenceSession`` with quantgraph's kernels registered.

    ``backend`` is "native" or "python" (default: the fastest available). On the Python backend
    the model is first put in the form its kernels accept (static ops become dynamic ones with
    constant inputs), and kernel errors recorded during a run are raised from :meth:`run`.
    """

    def __init__(
        self,
        model: ModelLike,
        backend: str | None = None,
        *,
        options: ort.SessionOptions | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
    ) -> None:
        register_schemas()
        self.backend = resolve(backend)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        source = self._prepare(model)
        if self.backend == "python":
            # Kernel errors are recorded per thread; parallel execution would run kernels on
            # onnxruntime's threads, where run() could not see them.
            options = options or ort.SessionOptions()
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(
            source, session_options(self.backend, options), providers=list(providers)
        )

    def _prepare(self, model: ModelLike) -> str | bytes:
        """What onnxruntime loads: the file itself or the caller's serialized model when they
        run as they are, else a prepared private copy."""
        is_path = isinstance(model, (str, os.PathLike))
        loaded = load_model(model)  # the same clear errors everywhere for a bad file
        if self.backend == "python":
            from .backends.python_prepare import prepare_model

            if not is_path and loaded is model:  # the caller's object stays as it was
                loaded = ir.from_proto(ir.to_proto(loaded))
            if not prepare_model(loaded) and is_path:
                return str(Path(model))  # type: ignore[arg-type]
        elif is_path:
            return str(Path(model))  # type: ignore[arg-type]
        elif isinstance(model, bytes):
            return model
        elif isinstance(model, onnx.ModelProto) and not has_external_data(loaded):
            serialized: bytes = model.SerializeToString()
            return serialized
        if has_external_data(loaded):
            # Weights stay on disk: onnxruntime reads them next to a prepared copy.
            self._scratch = tempfile.TemporaryDirectory(prefix="quantgraph-")
            path = Path(self._scratch.name) / "model.onnx"
            save_model(loaded, path, external_data="model.data")
            return str(path)
        prepared: bytes = ir.to_proto(loaded).SerializeToString()
        return prepared

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, np.ndarray],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        if self.backend != "python":
            native_results: list[Any] = self._session.run(
                output_names, dict(input_feed), run_options
            )
            return native_results
        from .backends import python

        python.clear_pending()  # errors of other sessions on this thread are not ours
        results: list[Any] = self._session.run(output_names, dict(input_feed), run_options)
        python.raise_pending()
        return results

    def __getattr__(self, name: str) -> Any:
        # get_inputs, get_outputs, get_modelmeta, ... come from onnxruntime's session.
        return getattr(self._session, name)
