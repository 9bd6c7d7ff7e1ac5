"""A ready onnxruntime session on a model that uses the spec ops, on one backend."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from .backends import resolve, session_options
from .io import ModelLike, load_model
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
        source: str | bytes
        if self.backend == "native" and isinstance(model, (str, os.PathLike)):
            load_model(model)  # the same clear errors as everywhere for a bad file
            source = str(Path(model))
        else:
            graph = load_model(model)
            if self.backend == "python":
                from .backends import python

                # Work on a copy: the caller's model stays as it was.
                graph = python.prepare_model(ir.from_proto(ir.to_proto(graph)))
            source = ir.to_proto(graph).SerializeToString()
        self._session = ort.InferenceSession(
            source, session_options(self.backend, options), providers=list(providers)
        )

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, np.ndarray],
        run_options: ort.RunOptions | None = None,
    ) -> list[Any]:
        results: list[Any] = self._session.run(output_names, dict(input_feed), run_options)
        if self.backend == "python":
            from .backends import python

            python.raise_pending()
        return results

    def __getattr__(self, name: str) -> Any:
        # get_inputs, get_outputs, get_modelmeta, ... come from onnxruntime's session.
        return getattr(self._session, name)
