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

from .backends import resolve, resolve_arithmetic, session_options
from .io import ModelLike, has_external_data, load_model, save_model
from .opsets import check_opset
from .passes.declared_dst import DeclaredDstPass, needs_declared_dst
from .schemas import register as register_schemas


class InferenceSession:
    """``onnxruntime.InferenceSession`` with quantgraph's kernels registered.

    ``backend`` is "native", "python" or "onednn" (default: the fastest available);
    ``arithmetic`` "onnx" (default) or "onednn" where the spec leaves rounding open (see
    :mod:`quantgraph.backends`). A quantize op whose dst only the model's declared output type
    decides gets it as ``output_dtype`` first (:class:`~quantgraph.passes.DeclaredDstPass`). On
    the Python backend the model is put in the form its kernels accept (static ops become
    dynamic ones with constant inputs), and kernel errors recorded during a run are raised from
    :meth:`run`.
    """

    def __init__(
        self,
        model: ModelLike,
        backend: str | None = None,
        *,
        arithmetic: str | None = None,
        options: ort.SessionOptions | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
    ) -> None:
        register_schemas()
        self.backend = resolve(backend)
        self.arithmetic = resolve_arithmetic(self.backend, arithmetic)
        self.onednn_version: str | None = None  # which oneDNN runs the ops (onednn backend)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        source = self._prepare(model)
        if self.backend == "python":
            # Kernel errors are recorded per thread; parallel execution would run kernels on
            # onnxruntime's threads, where run() could not see them.
            options = options or ort.SessionOptions()
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(
            source,
            session_options(self.backend, options, arithmetic=self.arithmetic),
            providers=list(providers),
        )
        if self.backend == "onednn":
            from .backends import onednn

            self.onednn_version = onednn.version()

    def _prepare(self, model: ModelLike) -> str | bytes:
        """What onnxruntime loads: the file itself or the caller's serialized model when they
        run as they are, else a prepared private copy."""
        is_path = isinstance(model, (str, os.PathLike))
        loaded = load_model(model)  # the same clear errors everywhere for a bad file
        check_opset(loaded, model)
        declared = needs_declared_dst(loaded)
        if loaded is model and (declared or self.backend == "python"):
            loaded = ir.from_proto(ir.to_proto(loaded))  # the caller's object stays as it was
        # The seed's dst rule: a declared output type no kernel could see becomes output_dtype.
        changed = declared and DeclaredDstPass()(loaded).modified
        if self.backend == "python":
            from .backends.python_prepare import prepare_model

            changed = prepare_model(loaded) or changed
        if not changed:
            if is_path:
                return str(Path(model))  # type: ignore[arg-type]
            if isinstance(model, bytes):
                return model
            if isinstance(model, onnx.ModelProto) and not has_external_data(loaded):
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
