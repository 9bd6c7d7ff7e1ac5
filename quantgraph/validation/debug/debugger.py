"""Where quantization hurts and why: float model vs its QDQ form, error introduced per place.

``validate FLOAT QDQ --intermediate`` compares each tensor as the QDQ model computes it, which
mixes the error a layer introduces with all it inherits. This module separates them: each
quantized tensor's own Q/DQ error with its parameters (:mod:`.qparams`), each node's own
weight-quantization error (:mod:`.node_error`), both fed the float model's values; ``worst``
ranks them together by introduced SQNR, worst first, with the reason the numbers show.
``sensitivity`` reruns the QDQ model with each of the K worst places a fallback acts on kept in
float (:mod:`.sensitivity`: a chain of aliases once, a node's weights from the float model) and
says how much the outputs' SQNR gains: the "keep in float" list, which ``convert --keep-float``
writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...ir.walk import spec_nodes
from .node_error import NodeModel, NodeQuantization
from .qparams import TensorCounter, TensorQuantization, quantized_tensors
from .sensitivity import Sensitivity, measure, ranked_candidates, worst_output_sqnr

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


@dataclass
class QuantizationDebug:
    """Per quantized tensor and node, the error introduced there (not inherited), ranked."""

    tensors: list[TensorQuantization] = field(default_factory=list)
    nodes: list[NodeQuantization] = field(default_factory=list)
    nodes_error: str | None = None  # why node figures are missing (their model failed)
    baseline_sqnr_db: float | None = None  # the worst output's SQNR as quantized
    sensitivity: list[Sensitivity] | None = None  # suggestions first, best gain first

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


# progress(stage, done, total): "nodes" (0, 1) before the nodes' own error is measured,
# "sensitivity" (k, total) as the k-th rerun with a tensor kept in float starts
Progress = Callable[[str, int, int], None]


def _silent(stage: str, done: int, total: int) -> None:
    pass


def debug(
    qdq: ir.Model,
    float_values: Sequence[Mapping[str, np.ndarray]],
    outputs: Sequence[str],
    quantized_outputs: Sequence[Sequence[np.ndarray]],
    samples: Sequence[Mapping[str, np.ndarray]],
    sensitivity: int | None = None,
    float_model: ir.Model | None = None,
    progress: Progress = _silent,
) -> QuantizationDebug:
    """Debug ``qdq`` against the float model's values (``float_values``: per sample, every
    tensor by name, inputs included), given the QDQ model's ``outputs`` on each sample
    (``quantized_outputs``). ``sensitivity``: how many of the worst places to rerun in float
    (nodes' weights among them only with ``float_model``, which has them in float);
    ``progress`` hears of the nodes' measure and of each rerun."""
    known = set(float_values[0]) if float_values else set()
    counters = [TensorCounter(p) for p in quantized_tensors(qdq.graph, known)]
    for values in float_values:
        for counter in counters:
            counter.add(values[counter.params.source])
    found = QuantizationDebug(tensors=[c.result() for c in counters])
    progress("nodes", 0, 1)
    try:
        found.nodes = NodeModel(qdq, known).measure(float_values, _options())
    except Exception as error:  # a node the combined model cannot hold: the tensors still count
        found.nodes_error = " ".join(str(error).split())[:300]
    expected = [[v[o] for o in outputs] for v in float_values]
    found.baseline_sqnr_db = worst_output_sqnr(expected, quantized_outputs)
    if sensitivity:
        ranked = ranked_candidates(qdq, found.tensors, found.nodes, float_model)
        found.sensitivity = measure(
            qdq, float_model, ranked, sensitivity, outputs, expected, samples,
            found.baseline_sqnr_db, _options(), progress,
        )  # fmt: skip
    return found


def from_run(
    qdq: ir.Model,
    samples: Sequence[Mapping[str, np.ndarray]],
    wanted: Sequence[str],
    expected: Sequence[Sequence[np.ndarray]],
    outputs: Sequence[str],
    actual: Sequence[Sequence[np.ndarray]],
    sensitivity: int | None,
    float_model: ir.Model | None = None,
    progress: Progress = _silent,
) -> QuantizationDebug:
    """:func:`debug` from what validate ran: the float model's ``wanted`` tensors on each
    sample (``expected``) and the QDQ model's results (``actual``, outputs first). A converted
    model is debugged as the Q/DQ form it lowers to (:func:`as_qdq`)."""
    float_values = [
        {**sample, **dict(zip(wanted, values, strict=True))}
        for sample, values in zip(samples, expected, strict=True)
    ]
    quantized = [a[: len(outputs)] for a in actual]
    return debug(
        as_qdq(qdq), float_values, outputs, quantized, samples, sensitivity, float_model, progress
    )


def as_qdq(model: ir.Model) -> ir.Model:
    """``model``, or where it holds quantgraph's ops, the Q/DQ form they lower to (in
    memory): the figures read ONNX's QuantizeLinear/DequantizeLinear and run in plain
    onnxruntime, and lowering gives back the original's nodes under their names, which
    ``convert --keep-float`` takes."""
    if not any(True for _ in spec_nodes(model)):
        return model
    from ...converter import lower

    return lower(model, check=False, allow_partial=True).model
