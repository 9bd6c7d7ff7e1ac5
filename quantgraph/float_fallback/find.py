"""``quantgraph.fallback``: the smallest float fallback of a quantized model that reaches a
target, and what each point on the way costs in speed.

Candidates (:mod:`quantgraph.passes.floating.float_candidates`) are ranked by the error each
introduces by itself, worst first: a chain by the SQNR of its quantization applied to the float
model's own tensor, a node's weights by the SQNR of its dequantized weights against the float
model's.
The search (:mod:`.search`) evaluates sets on a runner (:mod:`.runners`); the points are then
priced one at a time in this process: the keep-float model converted and run with
``fusion="auto"`` on the CPU at hand (median ms of a few runs on the first sample).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx_ir as ir

from ..backends.ort_sessions import ort_session
from ..converter import convert
from ..errors import ModelError
from ..ir.mapped_data import external_folders
from ..ir.model_files import AUTO, ModelLike, load_model, save_model, source_files, write_file
from ..ir.values import constant_array, optional_input
from ..passes.floating.float_candidates import WEIGHTS, FloatCandidate, float_candidates
from ..passes.floating.keep_float import is_weight_dequantize
from ..runtime.session import InferenceSession
from ..validation import generate
from ..validation.debug.qparams import TensorCounter, quantized_tensors, sqnr
from .page import render
from .problem import FallbackProblem, Metric, Outputs, quiet_options
from .runners import InProcess, LocalProcesses, RayCluster, Runner
from .search import DEFAULT_MAX_EVALUATIONS, Point, SearchResult, Target, search

DEFAULT_SAMPLES = 8
BATCH = 2  # sets per greedy batch, whatever the runner: the same points on every runner
PRICE_RUNS = 5
PRICE_TUNING_BUDGET = 2.0  # seconds auto may measure its candidate plans, per point
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class RankedCandidate:
    candidate: FloatCandidate
    sqnr_db: float  # the error it introduces by itself (lower: worse)

    def to_dict(self) -> dict[str, object]:
        return {
            **self.candidate.to_dict(),
            "label": self.candidate.label,
            "sqnr_db": None if math.isinf(self.sqnr_db) else round(self.sqnr_db, 3),
        }


@dataclass
class FallbackResult:
    """The chosen set and its model, whether it reaches the target, every point (the curve)."""

    search: SearchResult
    model: ir.Model
    ranking: list[RankedCandidate]
    runner: str
    metric: str
    baseline: Point
    notes: list[str] = field(default_factory=list)
    sources: tuple[Path, ...] = ()  # the files the two models were read from: never written

    @property
    def kept(self) -> list[FloatCandidate]:
        by_name = {r.candidate.name: r.candidate for r in self.ranking}
        return [by_name[name] for name in sorted(self.search.kept)]

    @property
    def points(self) -> list[Point]:
        return self.search.points

    def save(
        self, path: str | os.PathLike[str], *, external_data: str = AUTO, force: bool = False
    ) -> Path:
        """Write the chosen keep-float model (a QDQ model like any other) by the rules of every
        output (:mod:`quantgraph.ir.output_files`), never over either input."""
        return save_model(
            self.model, path, external_data=external_data, force=force, protect=self.sources,
            check=True,
        )  # fmt: skip

    def write_html(
        self,
        path: str | os.PathLike[str],
        *,
        labels: tuple[str, str] = ("the float model", "the quantized model"),
        force: bool = False,
    ) -> Path:
        """The search as a self-contained page (:mod:`.page`): kept set, Pareto front of quality
        against kept count and latency, every point, the ranking."""
        page = render(self, *labels)
        return write_file(
            Path(path), page.encode("utf-8"), force=force, protect=self.sources, role="--report"
        )

    def to_dict(self) -> dict[str, object]:
        found = self.search.to_dict()
        return {
            **found,
            "metric": self.metric,
            "baseline": self.baseline.to_dict(),
            "kept": [r.to_dict() for r in self.ranking if r.candidate.name in self.search.kept],
            "ranking": [r.to_dict() for r in self.ranking],
            "runner": self.runner,
            "notes": self.notes,
        }


def fallback(
    float_model: ModelLike,
    quantized_model: ModelLike,
    *,
    target: float | None = None,
    metric: Metric | None = None,
    higher_is_better: bool = True,
    data: Iterable[Mapping[str, np.ndarray]] | None = None,
    samples: int = DEFAULT_SAMPLES,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    workers: int | None = 1,
    ray_address: str | None = None,
    price: bool = True,
    progress: Progress | None = None,
) -> FallbackResult:
    """Find a small set of the quantized model's places to keep in float so that its quality
    reaches ``target``: the output SQNR against ``float_model`` in dB, or ``metric(outputs)``
    (outputs: per sample, by name; ``higher_is_better=False`` for an error rate). ``data``:
    the samples (default: ``samples`` generated as validate plans them). Evaluations run in
    this process (``workers=1``), in local processes (``workers=N``, None: as many as the CPUs
    and memory allow) or on a Ray cluster (``ray_address``). Returns the model (the quantized
    model with the chosen set in float: convertible and lowerable like any other), the set and
    every point on the way, each priced with ``fusion="auto"`` unless ``price=False``."""
    tell = progress or (lambda stage, done, total: None)
    floating, quantized = load_model(float_model), load_model(quantized_model)
    _check_pair(floating, quantized)
    # one plan, ``samples`` draws (a plan per seed would search the model's inputs again)
    batch = list(data) if data is not None else generate(floating, iterations=samples).samples
    if not batch:
        raise ModelError("fallback: no samples (data is empty)")
    if target is None:
        raise ModelError("fallback: a target is needed (--target-sqnr DB, or target= with metric)")
    expected = _float_outputs(floating, batch)
    tell("ranking candidates", 0, 1)
    ranking = rank(floating, quantized, batch)
    tell("ranking candidates", 1, 1)
    problem = FallbackProblem(
        ir.to_proto(floating).SerializeToString(),
        ir.to_proto(quantized).SerializeToString(),
        [dict(s) for s in batch],
        expected,
        {r.candidate.name: r.candidate for r in ranking},
        metric,
        external_folders(floating),
        external_folders(quantized),
    )
    runner = _runner(problem, workers, ray_address)
    counted = [0]

    def evaluate(sets: Sequence[frozenset[str]]) -> list[Point]:
        qualities = runner.evaluate(sets)
        counted[0] += len(sets)
        tell("evaluations", counted[0], max_evaluations)
        return [Point(kept, q) for kept, q in zip(sets, qualities, strict=True)]

    try:
        found = search(
            [r.candidate.name for r in ranking],
            evaluate,
            Target(target, higher_is_better),
            max_evaluations,
            width=BATCH,
        )
    finally:
        runner.close()
    notes = [found.stopped] if found.stopped else []
    if price:
        found.points[:] = _priced(problem, found.points, batch[0], tell)
        found.best = next(p for p in found.points if p.kept == found.best.kept)
    chosen = problem.model_for(found.best.kept)
    return FallbackResult(
        found,
        chosen,
        ranking,
        runner.description,
        "output SQNR (dB, the worst output's)" if metric is None else "user metric",
        found.points[0],
        notes,
        source_files(floating) + source_files(quantized),
    )


def _check_pair(floating: ir.Model, quantized: ir.Model) -> None:
    if not float_candidates(quantized):
        if float_candidates(floating):
            raise ModelError(
                "fallback: the arguments look swapped: the first (FLOAT) is quantized and the "
                "second is not; give the float model first, then its quantized form"
            )
        raise ModelError("fallback: the second model (QUANTIZED) has no Q/DQ to keep in float")


def _runner(problem: FallbackProblem, workers: int | None, ray_address: str | None) -> Runner:
    if ray_address is not None:
        return RayCluster(problem, ray_address)
    if workers == 1:
        return InProcess(problem)
    return LocalProcesses(problem, workers)


def _float_outputs(model: ir.Model, batch: Sequence[Mapping[str, np.ndarray]]) -> Outputs:
    session = ort_session(model, quiet_options())
    names = [o.name for o in session.get_outputs()]
    return [dict(zip(names, session.run(names, dict(s)), strict=True)) for s in batch]


def rank(
    floating: ir.Model, quantized: ir.Model, batch: Sequence[Mapping[str, np.ndarray]]
) -> list[RankedCandidate]:
    """Every candidate with the SQNR of the error it introduces by itself, worst first."""
    candidates = float_candidates(quantized)
    float_names = {v.name for n in floating.graph for v in n.outputs if v.name}
    float_names |= {v.name for v in floating.graph.inputs if v.name}
    params = quantized_tensors(quantized.graph, float_names)
    values = _float_values(floating, sorted({p.source for p in params}), batch)
    by_tensor: dict[str, float] = {}
    for p in params:
        counter = TensorCounter(p)
        for sample in values:
            counter.add(sample[p.source])
        by_tensor[p.tensor] = counter.result().sqnr_db
    twins = {n.name: n for n in floating.graph if n.name}
    ranked = []
    for candidate in candidates:
        if candidate.kind == WEIGHTS:
            score = _weight_sqnr(quantized, twins.get(candidate.name), candidate.name)
        else:
            scores = [by_tensor[t] for t in candidate.names if t in by_tensor]
            score = min(scores) if scores else math.inf
        ranked.append(RankedCandidate(candidate, score))
    return sorted(ranked, key=lambda r: r.sqnr_db)


def _float_values(
    model: ir.Model, names: Sequence[str], batch: Sequence[Mapping[str, np.ndarray]]
) -> list[dict[str, np.ndarray]]:
    """Every sample's float tensors ``names`` (inputs included) as the float model computes them."""
    proto = ir.to_proto(model)
    existing = {o.name for o in proto.graph.output}
    inputs = {i.name for i in proto.graph.input}
    for name in names:
        if name not in existing and name not in inputs:
            proto.graph.output.add().name = name
    session = ort_session(proto, quiet_options(), origin=model)
    outputs = [o.name for o in session.get_outputs()]
    return [
        {**dict(s), **dict(zip(outputs, session.run(outputs, dict(s)), strict=True))} for s in batch
    ]


def _weight_sqnr(quantized: ir.Model, twin: ir.Node | None, name: str) -> float:
    """The SQNR of a node's dequantized weights against the float model's (worst input)."""
    node = next((n for n in quantized.graph if n.name == name), None)
    if node is None or twin is None:
        return math.inf
    worst = math.inf
    for index, value in enumerate(node.inputs):
        if not is_weight_dequantize(value) or value is None:
            continue
        dq = value.producer()
        want = constant_array(optional_input(twin, index))
        codes = constant_array(optional_input(dq, 0)) if dq is not None else None
        scale = constant_array(optional_input(dq, 1)) if dq is not None else None
        if want is None or codes is None or scale is None or dq is None:
            continue
        zp = constant_array(optional_input(dq, 2))
        got = _dequantized(codes, scale, zp, dq)
        if got is None or got.shape != want.shape:
            continue
        error = want.astype(np.float64) - got
        worst = min(
            worst, sqnr(float(np.sum(want.astype(np.float64) ** 2)), float(np.sum(error**2)))
        )
    return worst


def _dequantized(
    codes: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, dq: ir.Node
) -> np.ndarray | None:
    if scale.size > 1 and scale.ndim == 1:
        attribute = dq.attributes.get("axis")
        axis = (attribute.as_int() if attribute is not None else 1) % codes.ndim
        shape = [1] * codes.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zp = None if zp is None else zp.reshape(shape)
    elif scale.ndim > 1:
        return None  # blocked: not a weight quantize_static writes for Conv/MatMul
    zero = 0 if zp is None else zp.astype(np.float64)
    return (codes.astype(np.float64) - zero) * scale.astype(np.float64)


def _priced(
    problem: FallbackProblem,
    points: list[Point],
    sample: Mapping[str, np.ndarray],
    tell: Progress,
) -> list[Point]:
    """Each point with the median ms of its converted model under fusion auto."""
    priced = []
    for index, point in enumerate(points):
        tell("pricing points with fusion auto", index, len(points))
        converted = convert(problem.model_for(point.kept)).model
        session = InferenceSession(
            converted,
            "native",
            fusion="auto",
            tune_inputs=dict(sample),
            tuning_budget=PRICE_TUNING_BUDGET,
        )
        session.run(None, dict(sample))  # warm
        times = []
        for _ in range(PRICE_RUNS):
            start = time.perf_counter()
            session.run(None, dict(sample))
            times.append((time.perf_counter() - start) * 1000)
        priced.append(Point(point.kept, point.quality, statistics.median(times)))
    tell("pricing points with fusion auto", len(points), len(points))
    return priced
