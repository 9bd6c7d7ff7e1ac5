"""The rewritten model's side of a validation: its one session (without onnxruntime's CPU
memory arena), the tensors fetched from it, and its outputs on every sample."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from ..fusion.plan import AUTO
from ..ir.model_files import ModelLike
from ..runtime.session import InferenceSession
from .comparison_setup import Setup
from .debug.intermediate import after_quantization, with_all_outputs
from .inputs.generated import explain_failure, ort_message
from .inputs.plan import InputSpec
from .onednn.partitions import Partitions
from .original import Original, Progress, quiet_options


def rewritten_session(
    rewritten: ModelLike,
    rewritten_ir: ir.Model,
    setup: Setup,
    backend: str | None,
    arithmetic: str | None,
    intermediate: bool,
    first_sample: Mapping[str, np.ndarray],
    parts: Partitions | None,
) -> InferenceSession:
    """The rewritten model's session on ``backend``, every tensor exposed with
    ``intermediate`` (except under oneDNN's partitions: exposed before, no unit would form)."""
    candidate_model: ModelLike = rewritten
    if intermediate and not setup.onednn_fused:
        candidate_model = with_all_outputs(rewritten_ir)[0]
    candidate_options = quiet_options(setup.level)
    # Unfused, every DynamicDequantize writes a whole float weight; onnxruntime's arena would
    # keep the largest of them all for the session's life (1.1B decoder: peak 1.94 -> 1.66 GiB,
    # under 2x its weights file; CPU +4%). Validation runs are not timed.
    candidate_options.enable_cpu_mem_arena = False
    return InferenceSession(
        candidate_model,
        backend,
        arithmetic=arithmetic,
        options=candidate_options,
        fusion=setup.fusion,
        tune_inputs=first_sample if setup.fusion == AUTO else None,  # decided before names
        after_fusion=None if parts is None else parts.after_fusion,
    )


def fetched_names(
    candidate: InferenceSession,
    rewritten: ir.Model,
    setup: Setup,
    outputs: list[str],
    tensor_names: list[str],
    parts: Partitions | None,
) -> tuple[list[str], list[str]]:
    """(the tensors compared beside the outputs, the names fetched from the rewritten
    session): against a float original, a tensor quantized in the rewritten model is compared
    after its quantization."""
    candidate_names = {o.name for o in candidate.get_outputs()}
    alias = after_quantization(rewritten.graph) if setup.float_reference else {}
    common = [n for n in tensor_names if alias.get(n, n) in candidate_names]
    fetched = outputs + [alias.get(n, n) for n in common]
    fetched += [n for n in (parts.outputs if parts else []) if n not in fetched]
    return common, fetched


def run_rewritten(
    candidate: InferenceSession,
    fetched: list[str],
    samples: Sequence[Mapping[str, np.ndarray]],
    plans: Sequence[list[InputSpec] | None],
    source: Original,
    tell: Progress,
) -> list[list[np.ndarray]]:
    """The rewritten model's ``fetched`` tensors on each sample; where it refuses the
    original's NaN or inf, the original's error."""
    actual = []
    for done, (sample, plan) in enumerate(zip(samples, plans, strict=True), 1):
        try:
            actual.append(candidate.run(fetched, sample))
        except Exception as error:  # the original's NaN or inf, refused: the original's error
            explained = explain_failure(source.label, source.ir, sample, plan, error, ort_message)
            if explained is None:
                raise
            raise explained from None
        tell("rewritten", done, len(samples))
    return actual
