"""One fallback problem: a float model, its quantized (QDQ) form, the samples and what quality
means; evaluating a set of candidates builds that keep-float model and measures it.

Quality is the output SQNR against the float model (the worst output's, summed over the
samples; onnxruntime's qdq_loss_debug formula) unless the user gives a metric: a callable of
the model's outputs on every sample (a list, per sample, of the outputs by name) returning one
number, top-1 accuracy or a WER. Models run in onnxruntime at ORT_DISABLE_ALL (the QDQ
composition as ONNX defines it: what the converted model computes unfused). A problem pickles
(protos as bytes, samples as arrays) so that worker processes and a Ray cluster evaluate it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..backends.ort_sessions import ort_session
from ..ir.mapped_data import map_external
from ..passes.floating.float_candidates import FloatCandidate
from ..passes.floating.keep_float import keep_float
from ..validation.debug.qparams import sqnr

Sample = Mapping[str, np.ndarray]
Outputs = list[dict[str, np.ndarray]]  # per sample, the outputs by name
Metric = Callable[[Outputs], float]


@dataclass
class FallbackProblem:
    """What an evaluation needs, picklable: the two models serialized, the samples, the float
    model's outputs on them, the candidates by name and the metric (None: output SQNR)."""

    float_model: bytes
    quantized_model: bytes
    samples: list[dict[str, np.ndarray]]
    expected: Outputs
    candidates: dict[str, FloatCandidate]
    metric: Metric | None = None
    # where each model's external-data locations are read (their bytes hold references only)
    float_folders: dict[str, Path] = field(default_factory=dict)
    quantized_folders: dict[str, Path] = field(default_factory=dict)
    _float_ir: ir.Model | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_float_ir"] = None  # rebuilt where it is used
        return state

    def model_for(self, kept: frozenset[str]) -> ir.Model:
        """The quantized model with the ``kept`` candidates in float."""
        model = _model(self.quantized_model, self.quantized_folders)
        names = [name for key in sorted(kept) for name in self.candidates[key].names]
        if not names:
            return model
        if self._float_ir is None:
            self._float_ir = _model(self.float_model, self.float_folders)
        return keep_float(model, names, "the quantized model", float_model=self._float_ir)

    def outputs_of(self, model: ir.Model | bytes) -> Outputs:
        session = ort_session(model, quiet_options())
        names = [o.name for o in session.get_outputs()]
        return [
            dict(zip(names, session.run(names, dict(sample)), strict=True))
            for sample in self.samples
        ]

    def quality(self, kept: frozenset[str]) -> float:
        """The measured quality with ``kept`` in float."""
        got = self.outputs_of(self.model_for(kept))
        if self.metric is not None:
            return float(self.metric(got))
        return worst_output_sqnr(self.expected, got)


def worst_output_sqnr(expected: Outputs, actual: Outputs) -> float:
    """The lowest SQNR over the outputs, each summed over the samples (finite values)."""
    worst = math.inf
    for name in expected[0] if expected else ():
        signal = noise = 0.0
        for want_all, got_all in zip(expected, actual, strict=True):
            want = np.asarray(want_all[name], dtype=np.float64).reshape(-1)
            got = np.asarray(got_all[name], dtype=np.float64).reshape(-1)
            finite = np.isfinite(want) & np.isfinite(got)
            signal += float(np.dot(want[finite], want[finite]))
            error = want[finite] - got[finite]
            noise += float(np.dot(error, error))
        worst = min(worst, sqnr(signal, noise))
    return worst


def quiet_options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return options


def _model(data: bytes, folders: dict[str, Path]) -> ir.Model:
    """A model of the problem, its external tensors read from ``folders``."""
    model = ir.serde.deserialize_model(onnx.load_from_string(data))
    if folders:
        map_external(model, folders)
    return model


def evaluate_in_process(problem: FallbackProblem, sets: Sequence[frozenset[str]]) -> list[float]:
    return [problem.quality(kept) for kept in sets]
