"""``validate FLOAT QDQ --sensitivity [K]``: what keeping one place in float gains, measured.

The places are the ones a fallback acts on (:mod:`quantgraph.passes.floating.float_candidates`):
a chain of Q/DQ pairs carrying one quantization through value-moving ops counts once (keeping
one alias in float keeps nothing: the next Q re-quantizes it the same way), and a node's
quantized weights, which only the float model has in float. They are ranked by the error the
debugger measured there (:mod:`.debugger`'s rows: a chain by its worst tensor, weights by the
node's row); the K worst are each kept in float alone
(:func:`~quantgraph.passes.floating.keep_float.keep_float` with the names ``convert
--keep-float`` takes) and the QDQ model rerun on the same samples. A
candidate is suggested only when the outputs' SQNR rises by more than :data:`GAIN_NOISE_DB`:
the others are listed as no gain, never as suggestions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...backends.ort_sessions import ort_session
from ...errors import ModelError
from ...ir.model_files import copy_model
from ...passes.floating.float_candidates import WEIGHTS, FloatCandidate, float_candidates
from ...passes.floating.keep_float import keep_float, quantized_names
from .node_error import NodeQuantization
from .qparams import TensorQuantization, sqnr

# A gain at or under this is no gain: smaller than a user can act on, and within what a
# different summation order or sample moves the worst output's SQNR.
GAIN_NOISE_DB = 0.05


def _rounded(value: float) -> float | None:
    """JSON has no infinity (nor NaN): None."""
    return None if math.isinf(value) or math.isnan(value) else round(value, 3)


@dataclass(frozen=True)
class Ranked:
    """A candidate with the error the debugger measured there (lowest SQNR: worst)."""

    candidate: FloatCandidate
    sqnr_db: float
    reason: str | None


@dataclass(frozen=True)
class Sensitivity:
    """One candidate kept in float alone: the outputs' SQNR (the worst output's) and the gain."""

    candidate: FloatCandidate
    sqnr_db: float  # the error it introduces (its debugger row)
    reason: str | None
    output_sqnr_db: float
    gain_db: float

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def suggested(self) -> bool:
        """Whether keeping it in float gains more than noise (NaN, both exact: no)."""
        return self.gain_db > GAIN_NOISE_DB

    @property
    def keep_float(self) -> str:
        """What ``convert --keep-float`` takes for it: every tensor of a chain, or the node."""
        return ",".join(self.candidate.names)

    @property
    def needs_float_model(self) -> bool:
        """Weights come from the float model: ``convert`` needs ``--float-model FLOAT``."""
        return self.candidate.kind == WEIGHTS

    def to_dict(self) -> dict[str, object]:
        return {
            **self.candidate.to_dict(),
            "label": self.candidate.label,
            "sqnr_db": _rounded(self.sqnr_db),
            "reason": self.reason,
            "output_sqnr_db": _rounded(self.output_sqnr_db),
            "gain_db": _rounded(self.gain_db),
            "suggested": self.suggested,
            "keep_float": self.keep_float,
            "float_model": self.needs_float_model,
        }


def ranked_candidates(
    qdq: ir.Model,
    tensors: Sequence[TensorQuantization],
    nodes: Sequence[NodeQuantization],
    float_model: ir.Model | None,
) -> list[Ranked]:
    """Every candidate of ``qdq`` that introduces error, worst first. Weights count only with
    the float model holding a node of that name, and a name no quantized tensor has (a
    tensor's name wins in keep_float: the node could not be named)."""
    by_tensor = {t.tensor: t for t in tensors}
    by_node = {n.node: n for n in nodes if n.node}
    twins = {n.name for n in float_model.graph if n.name} if float_model is not None else set()
    tensor_names, _ = quantized_names(qdq.graph)
    found = []
    for candidate in float_candidates(qdq):
        rows: list[TensorQuantization | NodeQuantization]
        if candidate.kind == WEIGHTS:
            usable = candidate.name in twins and candidate.name not in tensor_names
            rows = [by_node[candidate.name]] if usable and candidate.name in by_node else []
        else:
            rows = [by_tensor[n] for n in candidate.names if n in by_tensor]
        if not rows:
            continue
        worst = min(rows, key=lambda r: r.sqnr_db)
        if math.isinf(worst.sqnr_db) and worst.sqnr_db > 0:
            continue  # no error there: nothing to gain
        found.append(Ranked(candidate, worst.sqnr_db, worst.reason))
    return sorted(found, key=lambda r: r.sqnr_db)


def measure(
    qdq: ir.Model,
    float_model: ir.Model | None,
    ranked: Sequence[Ranked],
    count: int,
    outputs: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    samples: Sequence[Mapping[str, np.ndarray]],
    baseline: float,
    options: ort.SessionOptions,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Sensitivity]:
    """The ``count`` first of ``ranked`` each kept in float alone and rerun on ``samples``
    (``expected``: the float model's ``outputs`` on them), best gain first. A candidate
    keep_float refuses (the float model's weight does not fit) is passed over. Suggestions
    first, then the no-gain ones, each best gain first."""
    results: list[Sensitivity] = []
    for one in ranked:
        if len(results) == count:
            break
        if progress is not None:
            progress("sensitivity", len(results) + 1, min(count, len(ranked)))
        try:
            model = keep_float(
                copy_model(qdq),  # shares the tensors, external data included
                list(one.candidate.names),
                "the quantized model",
                float_model=float_model if one.candidate.kind == WEIGHTS else None,
            )
        except ModelError:
            continue
        session = ort_session(model, options)
        got = [session.run(list(outputs), dict(sample)) for sample in samples]
        after = worst_output_sqnr(expected, got)
        gain = after - baseline if not (math.isinf(after) and math.isinf(baseline)) else math.nan
        results.append(Sensitivity(one.candidate, one.sqnr_db, one.reason, after, gain))
    return sorted(results, key=lambda s: (not s.suggested, -_orderable(s.gain_db)))


def _orderable(gain: float) -> float:
    return -math.inf if math.isnan(gain) else gain


def worst_output_sqnr(
    expected: Sequence[Sequence[np.ndarray]], actual: Sequence[Sequence[np.ndarray]]
) -> float:
    """The lowest SQNR over the outputs (each summed over samples)."""
    worst = math.inf
    for index in range(len(expected[0]) if expected else 0):
        signal = noise = 0.0
        for want_all, got_all in zip(expected, actual, strict=True):
            want = np.asarray(want_all[index], dtype=np.float64).reshape(-1)
            got = np.asarray(got_all[index], dtype=np.float64).reshape(-1)
            if want.shape != got.shape:
                continue
            finite = np.isfinite(want) & np.isfinite(got)
            signal += float(np.dot(want[finite], want[finite]))
            noise += float(np.dot(want[finite] - got[finite], want[finite] - got[finite]))
        worst = min(worst, sqnr(signal, noise))
    return worst
