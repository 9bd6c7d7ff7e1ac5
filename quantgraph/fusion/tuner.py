"""Fusion "auto" by measurement: candidate plans timed on the CPU at hand, the fastest kept.

oneDNN forms its partitions (:mod:`.onednn_engine`); each candidate plan says, partition by
partition, which engine runs it: all to onnxruntime's fused kernels (the ``onnxruntime``
plan, the baseline that is never given up for a slower one), all to oneDNN, the rule table's
guess (:mod:`.auto_engine`), and per kind (convolutions to oneDNN, MatMuls to onnxruntime, and
the reverse) where a model has both; whatever no partition holds is planned as fusion
"onnxruntime" in every candidate but one, fusion "onednn"'s own plan (every partition to oneDNN,
every other spec op alone: no layout changes between oneDNN's partitions). The session times
them at its own input shapes, in one process, interleaved round by round (each candidate's
session without pool spinning, so that one session's idle threads take no core from the
next), within a time budget; a candidate replaces
the ``onnxruntime`` plan only when the median of its round-by-round ratios to it is below
:data:`MARGIN`, so noise never picks a slower plan.

The decision logic takes the measurement as a function (``measure``), and the timing loop takes
its clock, so tests decide exactly; :mod:`.tuning_cache` keeps decisions on disk.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .plan import NONE, ONEDNN, ONNXRUNTIME, ONNXRUNTIME_LONE

BASELINE = ONNXRUNTIME  # the plan every other candidate must beat
MARGIN = 0.97  # a candidate must be at least 3% faster than the baseline, round for round
DEFAULT_BUDGET = 10.0  # seconds of timing, all candidates together
MIN_ROUNDS = 3
MAX_ROUNDS = 25
TURN_SECONDS = 0.02  # one candidate's turn in a round: calls for about this long
WARMUP_CALLS = 2
# Each turn starts with untimed calls: the other candidates ran in between and left this one's
# weights and threads cold (a one-call turn measured nudenet s8's oneDNN plan at 0.99x of the
# onnxruntime plan where whole processes, warmed each turn, gave 0.92x).
TURN_WARMUP = 1
MIN_CALLS = 3


@dataclass(frozen=True)
class Partition:
    """A partition oneDNN formed with spec ops and compute: what a candidate plan assigns."""

    compute: str  # the compute node's name (or key), as the plan's unit names it
    kinds: tuple[str, ...]  # its oneDNN ops (Dequantize, Convolution, MatMul, ...)
    rule_engine: str  # the rule table's guess
    rule_reason: str


@dataclass(frozen=True)
class Choice:
    """A candidate plan: an engine for each partition oneDNN formed."""

    name: str
    engines: tuple[tuple[str, str], ...]  # (compute, engine)
    # the spec ops no partition holds: onnxruntime's fused kernels, or each alone ("none", as
    # fusion "onednn" leaves them: no layout changes between oneDNN's partitions), or
    # onnxruntime's plan with the Q/DQ it keeps as they are run by onnxruntime too
    rest: str = ONNXRUNTIME

    def engine_for(self, compute: str) -> str:
        return dict(self.engines).get(compute, ONNXRUNTIME)

    @property
    def to_onednn(self) -> int:
        return sum(1 for _, engine in self.engines if engine == ONEDNN)


@dataclass
class Decision:
    """What fusion "auto" chose and on what evidence.

    ``source``: "measured", "cache" (a decision measured earlier on this CPU and these shapes),
    "no partition" (nothing to choose: oneDNN formed no partition), or "not measured" (a cache
    miss with measuring off: the onnxruntime plan). ``ratios``: each candidate's median
    round-by-round time over the baseline's; ``times_ms``: each candidate's median time a run.
    """

    choice: Choice
    source: str
    candidates: list[Choice] = field(default_factory=list)
    times_ms: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    shapes: dict[str, list[int]] = field(default_factory=dict)
    cache_file: str | None = None
    note: str = ""
    # how the candidates were timed: each in a worker process of its own ("processes"), or all
    # in this one ("in-process: " and why)
    isolation: str = ""

    @property
    def why(self) -> str:
        """One sentence for each unit's reason."""
        if self.source == "no partition":
            return "oneDNN formed no partition with compute: onnxruntime's plan"
        if self.source == "pending":
            return "not decided yet: the first run measures; onnxruntime's plan until then"
        if self.source == "not measured":
            return f"not measured ({self.note}): onnxruntime's plan, the baseline"
        chosen = self.choice.name
        if chosen == BASELINE and self.source in ("measured", "cache") and not self.rounds:
            return f"plan '{BASELINE}' kept (the other plans make the same model: nothing to time)"
        if chosen == BASELINE:
            best = min(
                (n for n in self.ratios if n != BASELINE), key=self.ratios.__getitem__, default=None
            )
            other = (
                ""
                if best is None
                else f"; fastest other plan '{best}' {self.ratios[best]:.2f}x of it"
            )
            return f"plan '{BASELINE}' kept ({self.source}{other})"
        ratio = self.ratios.get(chosen)
        at = "" if ratio is None else f" at {ratio:.2f}x of plan '{BASELINE}'"
        return f"plan '{chosen}' {self.source} fastest{at}"

    def to_dict(self) -> dict[str, object]:
        return {
            "chosen": self.choice.name,
            "source": self.source,
            "why": self.why,
            "candidates": [
                {
                    "name": c.name,
                    "to_onednn": [compute for compute, e in c.engines if e == ONEDNN],
                    "rest": c.rest,
                    "median_ms": self.times_ms.get(c.name),
                    "ratio_to_onnxruntime": self.ratios.get(c.name),
                }
                for c in self.candidates
            ],
            "rounds": self.rounds,
            "isolation": self.isolation or None,
            "shapes": self.shapes,
            "cache_file": self.cache_file,
        }


def choices(partitions: Sequence[Partition], *, lone: bool = False) -> list[Choice]:
    """The candidate plans for ``partitions``, baseline first, none twice (without partitions
    and without ``lone``: the baseline alone). ``lone`` (the session computes the onnx
    arithmetic, onnxruntime's own): the baseline with the Q/DQ onnxruntime keeps as they are
    run by onnxruntime too, one custom-op call less each (small models)."""

    def plan(name: str, engine: Callable[[Partition], str]) -> Choice:
        return Choice(name, tuple((p.compute, engine(p)) for p in partitions))

    baseline = plan(BASELINE, lambda p: ONNXRUNTIME)
    lone_too = [Choice(ONNXRUNTIME_LONE, baseline.engines, ONNXRUNTIME_LONE)] if lone else []
    if not partitions:
        return [baseline, *lone_too]
    found = [
        baseline,
        *lone_too,
        plan(ONEDNN, lambda p: ONEDNN),
        Choice(f"{ONEDNN} partitions only", plan(ONEDNN, lambda p: ONEDNN).engines, NONE),
        plan("rules", lambda p: p.rule_engine),
    ]
    kinds = [k for k in ("Convolution", "MatMul") if any(k in p.kinds for p in partitions)]
    if len(kinds) > 1:
        for kind in kinds:
            found.append(plan(f"{ONEDNN} for {kind} only", _only(kind)))
    unique: dict[tuple[tuple[tuple[str, str], ...], str], Choice] = {}
    for choice in found:
        unique.setdefault((choice.engines, choice.rest), choice)
    return list(unique.values())


def _only(kind: str) -> Callable[[Partition], str]:
    def engine(partition: Partition) -> str:
        return ONEDNN if kind in partition.kinds else ONNXRUNTIME

    return engine


# measure(candidates) -> ({name: median ms}, {name: median ratio to the baseline}, rounds)
Measure = Callable[[Sequence[Choice]], tuple[dict[str, float], dict[str, float], int]]


def decide(candidates: Sequence[Choice], measure: Measure) -> Decision:
    """Time ``candidates`` and keep the fastest, the baseline unless another beats it by
    :data:`MARGIN` (the first candidate is the baseline)."""
    baseline = candidates[0]
    assert baseline.name == BASELINE
    if len(candidates) == 1:
        return Decision(baseline, "no partition", list(candidates))
    times, ratios, rounds = measure(candidates)
    best = baseline
    for candidate in candidates[1:]:
        ratio = ratios.get(candidate.name)
        if ratio is None or ratio >= MARGIN:
            continue
        if best is baseline or ratio < ratios[best.name]:
            best = candidate
    return Decision(best, "measured", list(candidates), times, ratios, rounds)


# A candidate's turn: ``turn(count, warm)`` makes ``warm`` untimed calls, then ``count`` timed
# ones, and returns the seconds those took (in this process, or in a worker process).
Turn = Callable[[int, int], float]


def time_runs(
    runs: Mapping[str, Callable[[], object]],
    budget: float = DEFAULT_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, float], dict[str, float], int]:
    """:func:`time_turns` of calls made in this process, timed with ``clock``."""
    return time_turns(turns_of(runs, clock), budget, clock)


def turns_of(
    runs: Mapping[str, Callable[[], object]], clock: Callable[[], float] = time.perf_counter
) -> dict[str, Turn]:
    """Each of ``runs`` (one call each) as a turn timed in this process."""

    def turn(run: Callable[[], object]) -> Turn:
        def timed(count: int, warm: int) -> float:
            for _ in range(warm):
                run()
            began = clock()
            for _ in range(count):
                run()
            return clock() - began

        return timed

    return {name: turn(run) for name, run in runs.items()}


def time_turns(
    turns: Mapping[str, Turn],
    budget: float = DEFAULT_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, float], dict[str, float], int]:
    """Median ms a call of each of ``turns`` and the median of its round-by-round ratios to
    the baseline's (the first), interleaved in rotated order, each turn warmed up first; at
    least :data:`MIN_ROUNDS` rounds, more while the budget (read on ``clock``) lasts (at most
    :data:`MAX_ROUNDS`)."""
    names = list(turns)
    start = clock()
    calls: dict[str, int] = {}
    for name in names:  # warm-up, and how many calls make a turn
        each = max(turns[name](WARMUP_CALLS, 0) / WARMUP_CALLS, 1e-7)
        calls[name] = max(MIN_CALLS, min(1000, round(TURN_SECONDS / each)))
    # one count for all: a turn of each candidate does the same work
    count = min(calls.values())
    per_round: dict[str, list[float]] = {name: [] for name in names}
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or clock() - start < budget):
        order = names[rounds % len(names) :] + names[: rounds % len(names)]
        for name in order:
            per_round[name].append(turns[name](count, TURN_WARMUP) / count)
        rounds += 1
    base = per_round[names[0]]
    times = {n: statistics.median(v) * 1e3 for n, v in per_round.items()}
    ratios = {
        n: statistics.median(t / b for t, b in zip(v, base, strict=True) if b > 0)
        for n, v in per_round.items()
    }
    return times, ratios, rounds


__all__ = [
    "BASELINE",
    "DEFAULT_BUDGET",
    "MARGIN",
    "Choice",
    "Decision",
    "Measure",
    "Partition",
    "choices",
    "decide",
    "Turn",
    "time_runs",
    "time_turns",
    "turns_of",
]
