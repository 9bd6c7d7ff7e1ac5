"""Where quantization hurts and why: float model vs its QDQ form, error introduced per place.

``validate FLOAT QDQ --intermediate`` compares each tensor as the QDQ model computes it, which
mixes the error a layer introduces with all it inherits. This module separates them: each
quantized tensor's own Q/DQ error with its parameters (:mod:`.qparams`), each node's own
weight-quantization error (:mod:`.node_error`), both fed the float model's values; ``worst``
ranks them together by introduced SQNR, worst first, with the reason the numbers show.
``sensitivity`` reruns the QDQ model with each of the K worst tensors kept in float
(:mod:`quantgraph.passes.keep_float`) and says how much the outputs' SQNR gains: the
"keep in float" list, which ``convert --keep-float`` writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ..backends.ort_sessions import ort_session
from ..ir.model_files import copy_model
from ..passes.keep_float import keep_float
from .node_error import NodeModel, NodeQuantization
from .qparams import TensorCounter, TensorQuantization, quantized_tensors, sqnr

DEFAULT_SENSITIVITY = 5
HEADLINE_COUNT = 3  # places the headline names


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: None (no noise at all)."""
    return None if value is None or math.isinf(value) else round(value, 3)


@dataclass(frozen=True)
class Ranked:
    """One place in the ranking: a quantized tensor (its Q/DQ) or a node (its weights)."""

    kind: str  # "tensor" or "node"
    name: str  # the tensor's name, or the node's
    op_type: str  # QuantizeLinear for a tensor; the node's op type
    sqnr_db: float
    reason: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "op_type": self.op_type,
            "sqnr_db": round(self.sqnr_db, 3),
            "reason": self.reason,
        }

    def text(self) -> str:
        why = f", {self.reason}" if self.reason else ""
        return f"{self.kind} '{self.name}' ({self.sqnr_db:.1f} dB{why})"


@dataclass(frozen=True)
class Sensitivity:
    """The outputs' SQNR (the worst output's) with ``name`` kept in float, and the gain."""

    name: str
    output_sqnr_db: float
    gain_db: float

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "output_sqnr_db": _finite(self.output_sqnr_db),
            "gain_db": None if math.isinf(self.gain_db) else round(self.gain_db, 3),
        }


@dataclass
class QuantizationDebug:
    """Per quantized tensor and node, the error introduced there (not inherited), ranked."""

    tensors: list[TensorQuantization] = field(default_factory=list)
    nodes: list[NodeQuantization] = field(default_factory=list)
    nodes_error: str | None = None  # why node figures are missing (their model failed)
    baseline_sqnr_db: float | None = None  # the worst output's SQNR as quantized
    sensitivity: list[Sensitivity] | None = None  # best gain first

    @property
    def worst(self) -> list[Ranked]:
        """Every place that introduces error, lowest SQNR first."""
        found = [
            Ranked("tensor", t.tensor, "QuantizeLinear", t.sqnr_db, t.reason)
            for t in self.tensors
            if not math.isinf(t.sqnr_db) or t.sqnr_db < 0
        ]
        found += [
            Ranked("node", n.node or n.output, n.op_type, n.sqnr_db, n.reason)
            for n in self.nodes
            if not math.isinf(n.sqnr_db) or n.sqnr_db < 0
        ]
        return sorted(found, key=lambda r: r.sqnr_db)

    def headline(self) -> str | None:
        worst = self.worst[:HEADLINE_COUNT]
        if not worst:
            return None
        return "worst introduced error: " + "; ".join(r.text() for r in worst)

    def to_dict(self) -> dict[str, object]:
        return {
            "tensors": [t.to_dict() for t in self.tensors],
            "nodes": [n.to_dict() for n in self.nodes],
            "nodes_error": self.nodes_error,
            "worst": [r.to_dict() for r in self.worst],
            "headline": self.headline(),
            "baseline_sqnr_db": _finite(self.baseline_sqnr_db),
            "sensitivity": None
            if self.sensitivity is None
            else [s.to_dict() for s in self.sensitivity],
        }


def _options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return options


def debug(
    qdq: ir.Model,
    float_values: Sequence[Mapping[str, np.ndarray]],
    outputs: Sequence[str],
    quantized_outputs: Sequence[Sequence[np.ndarray]],
    samples: Sequence[Mapping[str, np.ndarray]],
    sensitivity: int | None = None,
) -> QuantizationDebug:
    """Debug ``qdq`` against the float model's values (``float_values``: per sample, every
    tensor by name, inputs included), given the QDQ model's ``outputs`` on each sample
    (``quantized_outputs``). ``sensitivity``: how many of the worst tensors to rerun in float."""
    known = set(float_values[0]) if float_values else set()
    counters = [TensorCounter(p) for p in quantized_tensors(qdq.graph, known)]
    for values in float_values:
        for counter in counters:
            counter.add(values[counter.params.source])
    found = QuantizationDebug(tensors=[c.result() for c in counters])
    try:
        found.nodes = NodeModel(qdq, known).measure(float_values, _options())
    except Exception as error:  # a node the combined model cannot hold: the tensors still count
        found.nodes_error = " ".join(str(error).split())[:300]
    found.baseline_sqnr_db = _worst_output_sqnr(
        [[v[o] for o in outputs] for v in float_values], quantized_outputs
    )
    if sensitivity:
        found.sensitivity = _sensitivity(qdq, found, outputs, float_values, samples, sensitivity)
    return found


def _worst_output_sqnr(
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


def _sensitivity(
    qdq: ir.Model,
    found: QuantizationDebug,
    outputs: Sequence[str],
    float_values: Sequence[Mapping[str, np.ndarray]],
    samples: Sequence[Mapping[str, np.ndarray]],
    count: int,
) -> list[Sensitivity]:
    """Each of the ``count`` worst tensors kept in float alone: the outputs' SQNR gained."""
    expected = [[v[o] for o in outputs] for v in float_values]
    base = found.baseline_sqnr_db if found.baseline_sqnr_db is not None else math.inf
    candidates = [r.name for r in found.worst if r.kind == "tensor"][:count]
    results = []
    for name in candidates:
        session = ort_session(keep_float(copy_model(qdq), [name]), _options())
        got = [session.run(list(outputs), dict(sample)) for sample in samples]
        after = _worst_output_sqnr(expected, got)
        results.append(Sensitivity(name, after, after - base))
    return sorted(results, key=lambda s: -s.gain_db)


def from_run(
    qdq: ir.Model,
    samples: Sequence[Mapping[str, np.ndarray]],
    wanted: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    outputs: Sequence[str],
    actual: Sequence[Sequence[np.ndarray]],
    sensitivity: int | None,
) -> QuantizationDebug:
    """:func:`debug` from what validate ran: the float model's ``wanted`` tensors on each
    sample (``expected``) and the QDQ model's results (``actual``, outputs first)."""
    float_values = [
        {**sample, **dict(zip(wanted, values, strict=True))}
        for sample, values in zip(samples, expected, strict=True)
    ]
    quantized = [a[: len(outputs)] for a in actual]
    return debug(qdq, float_values, outputs, quantized, samples, sensitivity)
