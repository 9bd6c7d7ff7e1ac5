"""The original model: its IR and label, its onnxruntime sessions, and its runs on samples.

Every session of the original is made here, quiet (onnxruntime's errors arrive as exceptions,
reported in one line); validation holds at most one of them at a time
(:mod:`quantgraph.validation.original_runs`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..backends.ort_sessions import ort_session
from ..errors import ModelError
from ..ir.model_files import ModelLike, load_model, source_files
from ..ir.opsets import check_opset
from .compare import rounding_spread
from .inputs.generated import ort_message
from .inputs.plan import describe_feeds
from .inputs.search import HINT

# progress(stage, done, total): stage "original", "reference", "rewritten", "spread" (the bound),
# "as run" (the original beside a like-with-like reference) or "optimized"; done 0: loading;
# "search": done = the plan of inputs tried (total 0: not known); "nodes": each quantized
# node's own error being measured; "sensitivity": done of total reruns.
Progress = Callable[[str, int, int], None]

# onnxruntime's type strings ("tensor(float8e4m3fn)") and the ONNX element types they name.
ELEM_TYPES = {
    f"tensor({onnx.TensorProto.DataType.Name(t).lower()})": int(t)
    for t in onnx.TensorProto.DataType.values()
    if t != onnx.TensorProto.UNDEFINED
}


def quiet_options(level: ort.GraphOptimizationLevel) -> ort.SessionOptions:
    """Session options whose onnxruntime log lines never reach the terminal (errors arrive as
    exceptions, which quantgraph reports in one line)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 4
    return options


class Original:
    """The original model: its IR (to plan inputs and name nodes) and onnxruntime sessions."""

    def __init__(self, model: ModelLike) -> None:
        self.ir = load_model(model)
        check_opset(self.ir, model)
        files = source_files(self.ir)
        self.path: Path | None = files[0] if files else None
        self.label = f"{model}" if isinstance(model, (str, os.PathLike)) else "the original"
        if self.path is not None and self.label == "the original":
            self.label = str(self.path)

    def session(
        self,
        level: ort.GraphOptimizationLevel,
        exposed: ir.Model | onnx.ModelProto | None = None,
    ) -> ort.InferenceSession:
        """A session on the original, or on ``exposed`` (a copy of it: the like-with-like
        reference, all tensors exposed), whose external weights are the original's."""
        options = quiet_options(level)
        try:
            if exposed is not None:
                return ort_session(exposed, options, origin=self.ir)
            if self.path is not None:  # onnxruntime reads the file (and its weights) itself
                return ort_session(self.path, options)
            return ort_session(self.ir, options)
        except Exception as error:
            raise ModelError(
                f"{self.label}: onnxruntime cannot load the original: {ort_message(error)}"
            ) from None


class ReferenceSession:
    """The reference's session; that of its noisy copy
    (:mod:`quantgraph.validation.compare.rounding_spread`) runs with the noise off, bit for bit
    the reference."""

    def __init__(self, session: ort.InferenceSession, noisy: bool) -> None:
        self.session = session
        self._fixed = {rounding_spread.SWITCH: np.array(False)} if noisy else {}

    def get_outputs(self) -> list[ort.NodeArg]:
        return list(self.session.get_outputs())

    def run(self, names: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return list(self.session.run(list(names), {**feeds, **self._fixed}))


def run_session(
    session: ort.InferenceSession | ReferenceSession,
    names: list[str],
    feeds: Mapping[str, np.ndarray],
) -> list[np.ndarray]:
    return list(session.run(names, dict(feeds)))


def run_all(
    session: ort.InferenceSession | ReferenceSession,
    names: list[str],
    samples: Sequence[Mapping[str, np.ndarray]],
    label: str,
    tell: Progress,
    stage: str,
    done: int = 0,
    origins: Sequence[str | None] | None = None,
) -> list[list[np.ndarray]]:
    """The original's outputs on each sample; ``origins``: the files they came from."""
    results = []
    for index, sample in enumerate(samples):
        origin = None if origins is None else origins[index]
        results.append(_run_original(session, names, sample, label, origin))
        tell(stage, done + index + 1, done + len(samples))
    return results


def _run_original(
    session: ort.InferenceSession | ReferenceSession,
    names: list[str],
    sample: Mapping[str, np.ndarray],
    label: str,
    origin: str | None,
) -> list[np.ndarray]:
    """The original's outputs on one sample; ``origin``: the file it came from (None:
    generated, and the error then says how to generate others)."""
    try:
        return run_session(session, names, sample)
    except Exception as error:
        given = "generated inputs" if origin is None else f"inputs of {origin}"
        hint = f"; {HINT}" if origin is None else ""
        raise ModelError(
            f"{label}: the original model fails on the {given} ({describe_feeds(sample)}): "
            f"{ort_message(error)}{hint}"
        ) from None
