"""Fusion "auto" by measurement: candidate plans timed on the CPU at hand, the fastest kept.

oneDNN forms its partitions (:mod:`quantgraph.fusion.onednn.onednn_engine`); each candidate plan
says, partition by partition, which engine runs it: all to onnxruntime's fused kernels (the
``onnxruntime`` plan, the baseline that is never given up for a slower one), all to oneDNN, the rule
table's guess (:mod:`.auto_engine`), and per kind (convolutions to oneDNN, MatMuls to onnxruntime,
and the reverse) where a model has both; whatever no partition holds is planned as fusion
"onnxruntime" in every candidate but one, fusion "onednn"'s own plan (every partition to oneDNN,
every other spec op alone: no layout changes between oneDNN's partitions). One more candidate
is always there, the original's own form (``original``: every spec op lowered back to the
original's nodes, :mod:`quantgraph.fusion.ort.original_form`), so that auto's worst case is the
original's speed. The session times them at its own input shapes, interleaved round by round (each
candidate's session without pool spinning, so that one session's idle threads take no core from the
next), within a time budget; a candidate replaces the ``onnxruntime`` plan only when the median
of its round-by-round ratios to it is below :data:`MARGIN` (the original's form: below 1), so
noise never picks a plan slower than both.
Each decision keeps its spread (quartiles of the per-round times and ratios); while the
chosen plan's ratio quartiles overlap the runner-up's, the two are timed again (at most
:data:`REMEASURE` more times) and the decision says whether it settled.

The decision logic takes the measurement as a function (``measure``), and the timing loop takes
its clock, so tests decide exactly; :mod:`.tuning_cache` keeps decisions on disk.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from ...errors import failure_reason
from ..plan import NONE, ONEDNN, ONNXRUNTIME, ONNXRUNTIME_LONE, ORIGINAL

BASELINE = ONNXRUNTIME  # the plan every other candidate must beat
MARGIN = 0.97  # a candidate must be at least 3% faster than the baseline, round for round
# The original's own form needs no margin: it computes what the original computes and is
# auto's floor, so the faster of it and the baseline is kept (a near tie either way costs
# noise only, and the re-measurements below are there for it).
MARGINS = {ORIGINAL: 1.0}
# At most this many more measurements of the chosen plan and the runner-up (with the baseline)
# while their spreads overlap: a near tie is measured three times in all, then stands as
# unsettled (either plan is within noise of the other).
REMEASURE = 2
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
    "no partition" (nothing to choose: one candidate), or "not measured" (a cache miss with
    measuring off: the onnxruntime plan). ``ratios``: each candidate's median round-by-round
    time over the baseline's; ``times_ms``: each candidate's median time a run;
    ``ratio_spread`` and ``spread_ms``: the first and third quartiles of those per-round
    ratios and times (how far the rounds agree). ``settled``: whether the chosen plan's ratio
    quartiles stay clear of the runner-up's (None: nothing measured); ``measurements``: how
    many times the candidates were timed (1, plus a re-measurement of the chosen plan and the
    runner-up each time their spreads overlapped, at most :data:`REMEASURE`).
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
    spread_ms: dict[str, list[float]] = field(default_factory=dict)
    ratio_spread: dict[str, list[float]] = field(default_factory=dict)
    measurements: int = 0
    runner_up: str | None = None
    settled: bool | None = None
    measured_at: float | None = None  # seconds since the epoch (time.time())
    # candidates that could not be timed (their session failed to build or to run: out of
    # memory, a kernel refusing its inputs...) -> why, in one line; never chosen
    dropped: dict[str, str] = field(default_factory=dict)

    def age_seconds(self, now: float | None = None) -> float | None:
        """Seconds since the measurement (None: not measured)."""
        if self.measured_at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.measured_at)

    @property
    def why(self) -> str:
        """One sentence for each unit's reason."""
        if self.source == "no partition":
            return "oneDNN formed no partition with compute: onnxruntime's plan"
        if self.source == "pending":
            return "not decided yet: the first run measures; onnxruntime's plan until then"
        if self.source == "not measured":
            return f"not measured ({self.note}): onnxruntime's plan, the baseline"
        return self._why_measured() + "".join(
            f"; plan '{name}' dropped: {why}" for name, why in self.dropped.items()
        )

    def _why_measured(self) -> str:
        chosen = self.choice.name
        if chosen == BASELINE and self.source in ("measured", "cache") and not self.rounds:
            if self.dropped:
                return f"plan '{BASELINE}' kept (no other plan could be timed)"
            return f"plan '{BASELINE}' kept (the other plans make the same model: nothing to time)"
        close = ""
        if self.settled is False and self.runner_up is not None:
            times = "once" if self.measurements == 1 else f"{self.measurements} times"
            close = f"; within noise of plan '{self.runner_up}' (measured {times})"
        if chosen == BASELINE:
            best = min(
                (n for n in self.ratios if n != BASELINE), key=self.ratios.__getitem__, default=None
            )
            other = (
                ""
                if best is None
                else f"; fastest other plan '{best}' {self.ratios[best]:.2f}x of it"
            )
            return f"plan '{BASELINE}' kept ({self.source}{other}{close})"
        ratio = self.ratios.get(chosen)
        at = "" if ratio is None else f" at {ratio:.2f}x of plan '{BASELINE}'"
        return f"plan '{chosen}' {self.source} fastest{at}{close}"

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
                    "quartiles_ms": self.spread_ms.get(c.name),
                    "ratio_to_onnxruntime": self.ratios.get(c.name),
                    "ratio_quartiles": self.ratio_spread.get(c.name),
                    "dropped": self.dropped.get(c.name),
                }
                for c in self.candidates
            ],
            "rounds": self.rounds,
            "measurements": self.measurements,
            "runner_up": self.runner_up,
            "settled": self.settled,
            "isolation": self.isolation or None,
            "shapes": self.shapes,
            "measured_at": None if self.measured_at is None else _iso(self.measured_at),
            "age_seconds": self.age_seconds(),
            "cache_file": self.cache_file,
        }


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def choices(partitions: Sequence[Partition], *, lone: bool = False) -> list[Choice]:
    """The candidate plans for ``partitions``, baseline first, none twice. The original's own
    form (:data:`ORIGINAL`: every spec op lowered back to the original's nodes, run by
    onnxruntime as the original is) is always one: auto's floor is the original's speed.
    ``lone`` (the session computes the onnx arithmetic, onnxruntime's own): the baseline with
    the Q/DQ onnxruntime keeps as they are run by onnxruntime too, one custom-op call less each
    (small models)."""

    def plan(name: str, engine: Callable[[Partition], str]) -> Choice:
        return Choice(name, tuple((p.compute, engine(p)) for p in partitions))

    baseline = plan(BASELINE, lambda p: ONNXRUNTIME)
    lone_too = [Choice(ONNXRUNTIME_LONE, baseline.engines, ONNXRUNTIME_LONE)] if lone else []
    original = Choice(ORIGINAL, baseline.engines, ORIGINAL)
    if not partitions:
        return [baseline, *lone_too, original]
    found = [
        baseline,
        *lone_too,
        original,
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


# One measurement: each timed candidate's seconds a call, round by round (every list one entry
# a round, the rounds interleaved); the baseline is always among them.
Rounds = dict[str, list[float]]
# Candidates that could not be timed -> why (one line): a decision's ``dropped``
Dropped = dict[str, str]
# measure(candidates) -> their Rounds (the first candidate is the baseline); {} when nothing
# needs timing (every candidate makes the same model)
Measure = Callable[[Sequence[Choice]], Rounds]


def decide(candidates: Sequence[Choice], measure: Measure) -> Decision:
    """Time ``candidates`` and keep the fastest, the baseline unless another beats it by
    :data:`MARGIN` (the original's own form: at all, :data:`MARGINS`; the first candidate is
    the baseline). While the chosen plan's spread (the
    quartiles of its round-by-round ratios to the baseline) overlaps the runner-up's, the two
    are timed again with the baseline, at most :data:`REMEASURE` more times, every
    measurement's rounds pooled; the decision then says whether it settled."""
    baseline = candidates[0]
    assert baseline.name == BASELINE
    if len(candidates) == 1:
        return Decision(baseline, "no partition", list(candidates))
    first = measure(candidates)
    if not first:  # every plan makes the same model
        return Decision(baseline, "measured", list(candidates), measured_at=time.time())
    measured = [first]
    while True:
        decision = judge(candidates, measured)
        if decision.settled is not False or len(measured) > REMEASURE:
            return decision
        contenders = [
            c for c in candidates if c.name in (BASELINE, decision.choice.name, decision.runner_up)
        ]
        more = measure(contenders)
        if not more:
            return decision
        measured.append(more)


def judge(candidates: Sequence[Choice], measured: Sequence[Rounds]) -> Decision:
    """The decision on ``measured`` (one or more measurements, pooled): each candidate's
    median time and ratio to the baseline with their quartiles, the chosen plan, the runner-up
    and whether their spreads stay apart."""
    times: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    for rounds in measured:
        base = rounds[BASELINE]
        for name, values in rounds.items():
            times.setdefault(name, []).extend(values)
            paired = [t / b for t, b in zip(values, base, strict=True) if b > 0]
            ratios.setdefault(name, []).extend(paired)
    median_ratio = {n: statistics.median(v) for n, v in ratios.items() if v}
    ratio_spread = {n: _quartiles(v) for n, v in ratios.items() if v}
    baseline = candidates[0]
    best = baseline
    for candidate in candidates[1:]:
        ratio = median_ratio.get(candidate.name)
        if ratio is None or ratio >= MARGINS.get(candidate.name, MARGIN):
            continue
        if best is baseline or ratio < median_ratio[best.name]:
            best = candidate
    # a candidate timed as the chosen one (it plans the same model: the same rounds in every
    # measurement that holds it) is no rival
    others = [
        c.name
        for c in candidates
        if c is not best
        and c.name in median_ratio
        and any(r.get(c.name) != r.get(best.name) for r in measured if c.name in r)
    ]
    runner_up = min(others, key=median_ratio.__getitem__, default=None)
    settled = runner_up is None or not _overlap(ratio_spread[best.name], ratio_spread[runner_up])
    return Decision(
        best,
        "measured",
        list(candidates),
        {n: statistics.median(v) * 1e3 for n, v in times.items() if v},
        median_ratio,
        sum(len(rounds[BASELINE]) for rounds in measured),
        spread_ms={n: [q * 1e3 for q in _quartiles(v)] for n, v in times.items() if v},
        ratio_spread=ratio_spread,
        measurements=len(measured),
        runner_up=runner_up,
        settled=settled,
        measured_at=time.time(),
    )


def _quartiles(values: Sequence[float]) -> list[float]:
    """The first and third quartiles (a single value: itself twice)."""
    if len(values) < 2:
        return [values[0], values[0]]
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return [low, high]


def _overlap(one: Sequence[float], other: Sequence[float]) -> bool:
    return one[0] <= other[1] and other[0] <= one[1]


# A candidate's turn: ``turn(count, warm)`` makes ``warm`` untimed calls, then ``count`` timed
# ones, and returns the seconds those took (in this process, or in a worker process).
Turn = Callable[[int, int], float]


def time_runs(
    runs: Mapping[str, Callable[[], object]],
    budget: float = DEFAULT_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
) -> Rounds:
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
    dropped: Dropped | None = None,
) -> Rounds:
    """Seconds a call of each of ``turns``, round by round, interleaved in rotated order,
    each turn warmed up first; at least :data:`MIN_ROUNDS` rounds, more while the budget (read
    on ``clock``) lasts (at most :data:`MAX_ROUNDS`). A turn after the first that fails is
    dropped (see :func:`drop`), its rounds with it."""
    names = list(turns)
    first = names[0] if names else None
    start = clock()
    calls: dict[str, int] = {}
    for name in list(names):  # warm-up, and how many calls make a turn
        try:
            each = max(turns[name](WARMUP_CALLS, 0) / WARMUP_CALLS, 1e-7)
        except Exception as error:
            drop(name, error, first, dropped, RUNNING)
            names.remove(name)
            continue
        calls[name] = max(MIN_CALLS, min(1000, round(TURN_SECONDS / each)))
    # one count for all: a turn of each candidate does the same work
    count = min(calls.values())
    per_round: Rounds = {name: [] for name in names}
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or clock() - start < budget):
        if len(names) < 2 <= len(turns):  # the others dropped: nothing left to compare
            break
        order = names[rounds % len(names) :] + names[: rounds % len(names)]
        for name in order:
            try:
                per_round[name].append(turns[name](count, TURN_WARMUP) / count)
            except Exception as error:
                drop(name, error, first, dropped, RUNNING)
                names.remove(name)
                del per_round[name]
        rounds += 1
    return per_round


# what a dropped candidate's session failed to do (the reason's first words)
MAKING = "its session failed to be made"
RUNNING = "its session failed to run"


def drop(
    name: str, error: Exception, first: str | None, dropped: Dropped | None, doing: str = ""
) -> None:
    """Record why candidate ``name`` could not be timed (``doing``: what failed, then the
    error's words); the first candidate (the baseline, the plan the session runs otherwise)
    cannot be dropped, nor any when nobody records it: then ``error`` is raised."""
    if name == first or dropped is None:
        raise error
    # a worker process's failure knows what it was doing and the worker's own error
    doing = getattr(error, "doing", "") or doing
    reason = failure_reason(getattr(error, "reason", "") or error)
    dropped[name] = f"{doing}: {reason}" if doing else reason


# A candidate made ready for a block of turns and released after it (timed one at a time):
# ``with opener() as turn`` builds its session, ``turn`` as above.
Opener = Callable[[], AbstractContextManager[Turn]]


def time_one_at_a_time(
    openers: Mapping[str, Opener], budget: float = DEFAULT_BUDGET, dropped: Dropped | None = None
) -> Rounds:
    """Seconds a call of each of ``openers``' candidates where their sessions cannot be alive
    together: each opened for a block of turns and released before the next is opened, in the
    order given and back (A B C, C B A: the last held open across), so that a drift of the
    machine during the measurement weighs on every candidate alike; each block of the same
    number of turns (set by the first block's calls), the i-th turn of every candidate's
    blocks one round. At least :data:`MIN_ROUNDS` rounds, as many as the budget holds (at most
    :data:`MAX_ROUNDS`), judged by the first block's calls; making the sessions is not counted
    in it. A candidate after the first that fails to open or to run is dropped (see
    :func:`drop`), its rounds with it, and the blocks go on without it."""
    names = list(openers)
    first = names[0] if names else None
    # A B, then C held open for two blocks, then B A: (candidate, blocks) in order
    order = [(n, 1) for n in names[:-1]] + [(names[-1], 2)] + [(n, 1) for n in names[-2::-1]]
    per_round: Rounds = {name: [] for name in names}
    count = turns_a_block = 0
    for name, blocks in order:
        if name not in per_round:  # dropped in its first block
            continue
        doing = MAKING
        try:
            with openers[name]() as turn:
                doing = RUNNING
                each = max(turn(WARMUP_CALLS, 0) / WARMUP_CALLS, 1e-7)
                if not count:  # the first block sets the calls a turn and the turns a block
                    count = max(MIN_CALLS, min(1000, round(TURN_SECONDS / each)))
                    share = budget / (2 * len(names))
                    fit = int(share / (count * each))
                    turns_a_block = max(-(-MIN_ROUNDS // 2), min(MAX_ROUNDS // 2, fit))
                per_round[name] += [
                    turn(count, TURN_WARMUP) / count for _ in range(blocks * turns_a_block)
                ]
            del turn  # its session goes before the next is made
        except Exception as error:
            drop(name, error, first, dropped, doing)
            del per_round[name]
    return per_round


__all__ = [
    "BASELINE",
    "DEFAULT_BUDGET",
    "MARGIN",
    "MARGINS",
    "REMEASURE",
    "Choice",
    "Decision",
    "Measure",
    "Opener",
    "Partition",
    "Rounds",
    "choices",
    "decide",
    "drop",
    "Dropped",
    "judge",
    "Turn",
    "time_one_at_a_time",
    "time_runs",
    "time_turns",
    "turns_of",
]
