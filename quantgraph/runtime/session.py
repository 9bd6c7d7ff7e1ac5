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

from .. import fusion as fusion_engines
from ..backends import Backend, require, resolve_arithmetic
from ..ir.model_files import ModelLike, has_external_data, load_model, save_model
from ..ir.onnx_schemas import register as register_schemas
from ..ir.opsets import check_opset
from ..passes.declared_dst import DeclaredDstPass, needs_declared_dst


class InferenceSession:
    """``onnxruntime.InferenceSession`` with quantgraph's kernels registered.

    ``backend`` is "native", "python" or "onednn" (default: the fastest available);
    ``arithmetic`` "onnx" (default) or "onednn" where the spec leaves rounding open (see
    :mod:`quantgraph.backends`). A quantize op whose dst only the model's declared output type
    decides gets it as ``output_dtype`` first (:class:`~quantgraph.passes.DeclaredDstPass`). On
    the Python backend the model is put in the form its kernels accept (static ops become
    dynamic ones with constant inputs), and kernel errors recorded during a run are raised from
    :meth:`run`. Quiet on stderr: errors are exceptions, not onnxruntime log lines (unless
    ``options`` sets ``log_severity_level``).

    ``fusion``: "none" (default; each spec op alone, the spec's exact composition),
    "onnxruntime" (units of spec ops and their compute run as onnxruntime's fused kernels, as
    it runs the original QDQ model at the session's optimization level), "onednn" (oneDNN
    Graph forms partitions of spec ops and compute and runs them, with its own requantization
    rounding) or "auto" (each unit to the faster of the two by a rule; see
    :mod:`quantgraph.fusion`). :attr:`fusion_plan` says which unit runs where and why a spec
    op runs alone.
    """

    def __init__(
        self,
        model: ModelLike,
        backend: str | None = None,
        *,
        arithmetic: str | None = None,
        options: ort.SessionOptions | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        fusion: str = fusion_engines.NONE,
    ) -> None:
        register_schemas()
        self._backend = require(backend)
        # Backends whose kernels record errors need a call around each run; others get none
        # (a run of a 40 us model pays for every Python call around it).
        kind = type(self._backend)
        self._hooks = (
            kind.before_run is not Backend.before_run or kind.after_run is not Backend.after_run
        )
        self.backend = self._backend.name
        self.arithmetic = resolve_arithmetic(self._backend, arithmetic)
        self.fusion = fusion
        self.fusion_plan = fusion_engines.FusionPlan(fusion_engines.NONE)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        level = int(
            options.graph_optimization_level
            if options is not None
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # onnxruntime's own default
        )
        source = self._prepare(model, level)
        options = options or ort.SessionOptions()
        if options.log_severity_level == -1:  # not chosen by the caller
            # Quiet: onnxruntime's errors come back once, as the exception; its raw log lines
            # ([E:onnxruntime:...] on a failing kernel or a node oneDNN refuses) would repeat
            # them on stderr.
            options.log_severity_level = 4
        self._backend.configure(options)
        self._backend.register(options, self.arithmetic)
        if fusion_engines.uses_partitions(self.fusion_plan) and not (
            self._backend.registers_partitions
        ):
            # OneDnnPartition nodes run in libquantgraph_onednn whatever runs the spec ops.
            from ..fusion.onednn_engine import register

            register(options)
        self._session = ort.InferenceSession(source, options, providers=list(providers))
        if not self._hooks and type(self).run is InferenceSession.run:
            # Nothing to do around a run: callers reach onnxruntime's own method, without a
            # Python frame of ours in between (0.3-0.8 us a call on a 31 us model). A subclass
            # that overrides run keeps its own.
            self.run = self._session.run  # type: ignore[method-assign]
        # Which build of an outside engine runs the ops (oneDNN's, on the onednn backend).
        self.onednn_version: str | None = self._backend.engine_version()

    def _prepare(self, model: ModelLike, level: int) -> str | bytes:
        """What onnxruntime loads: the file itself or the caller's serialized model when they
        run as they are, else a prepared private copy."""
        is_path = isinstance(model, (str, os.PathLike))
        loaded = load_model(model)  # the same clear errors everywhere for a bad file
        check_opset(loaded, model)
        declared = needs_declared_dst(loaded)
        fused = self.fusion != fusion_engines.NONE
        if loaded is model and (declared or fused or self._backend.prepares):
            loaded = ir.from_proto(ir.to_proto(loaded))  # the caller's object stays as it was
        # The seed's dst rule: a declared output type no kernel could see becomes output_dtype.
        changed = declared and DeclaredDstPass()(loaded).modified
        if fused:
            self.fusion_plan = fusion_engines.apply(loaded, self.fusion, level=level)
            changed = changed or bool(self.fusion_plan.units)
        changed = self._backend.prepare(loaded) or changed
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
        """onnxruntime's ``run`` with the backend's calls around it; a session whose backend
        needs none has onnxruntime's own method in its place."""
        feed = input_feed if type(input_feed) is dict else dict(input_feed)
        self._backend.before_run()
        results: list[Any] = self._session.run(output_names, feed, run_options)
        self._backend.after_run()
        return results

    def __getattr__(self, name: str) -> Any:
        # get_inputs, get_outputs, get_modelmeta, ... come from onnxruntime's session.
        return getattr(self._session, name)
