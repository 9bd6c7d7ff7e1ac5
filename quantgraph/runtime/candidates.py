"""Sessions of fusion "auto"'s candidate plans: the model planned as one candidate says, and an
onnxruntime session on it, in this process or in a worker (:mod:`.tuning_workers`)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
import onnxruntime as ort

from .. import fusion as fusion_engines
from ..backends import Arithmetic, Backend
from ..backends.ort_sessions import ort_session
from ..fusion.auto.tuner import Choice, Decision


def new_session(
    backend: Backend,
    arithmetic: Arithmetic,
    source: str | bytes | ir.Model,
    options: ort.SessionOptions,
    *,
    partitions: bool,
    providers: Sequence[str],
) -> ort.InferenceSession:
    """An onnxruntime session on ``source`` with ``backend``'s kernels (and oneDNN partitions'
    kernel, where the model has ``partitions``) registered in ``options``."""
    backend.configure(options)
    backend.register(options, arithmetic)
    if partitions and not backend.registers_partitions:
        # OneDnnPartition nodes run in libquantgraph_onednn whatever runs the spec ops.
        from ..fusion.onednn.onednn_engine import register

        register(options)
    return ort_session(source, options, providers)


def candidate_model(
    model: ir.Model, choice: Choice, level: int, backend: Backend
) -> tuple[ir.Model, fusion_engines.FusionPlan]:
    """A copy of ``model`` planned as ``choice`` says and prepared for ``backend`` (it shares
    ``model``'s tensors: planning replaces the ones it rewrites)."""
    copy = model.clone()
    plan = fusion_engines.apply(
        copy, fusion_engines.AUTO, level=level, decision=Decision(choice, "candidate")
    )
    backend.prepare(copy)
    return copy, plan


def candidate_options(level: int, threads: int) -> ort.SessionOptions:
    """A candidate's session options: the tuning session's level and threads, quiet, and
    without pool spinning (sessions timed in turns must not spin against each other)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel(level)
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 4
    return options


__all__ = ["candidate_model", "candidate_options", "new_session"]
