"""The smallest set of candidates to keep in float that reaches a quality target.

The search knows nothing of models: a candidate is a name, an evaluation maps sets of names to
their measured quality (output SQNR in dB, or a user's metric), so tests drive it with exact,
injected evaluations. Evaluations come in batches (:data:`Evaluate`), which a runner may spread
over processes or a cluster; every set is evaluated at most once.

The order, within ``max_evaluations`` (the empty set, the quantized model as it is, is the
first):

1. Greedy over the ranking (worst introduced error first): each batch tries the next
   candidates one at a time on top of what is kept; the best that gains is kept (and, when
   several gain, their union is tried once).
2. Where single candidates stop gaining before the target (``patience`` tried in a row without
   a gain: the ranking no longer points at the culprits), all the remaining ones are tried as
   one group: if even that misses the target, the target cannot be reached; if it reaches, the
   group is bisected (delta debugging): a half that reaches alone is kept alone, else each
   half is reduced with the other held, so two culprits that only help together are both found.
3. What is kept is pruned: each candidate whose removal still reaches the target goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

DEFAULT_MAX_EVALUATIONS = 20
MIN_GAIN = 0.05  # in the quality's unit: less than this is no gain (measurement noise)


@dataclass(frozen=True)
class Point:
    """One evaluated set: the candidates kept in float, the quality reached and, where the point
    was priced, its latency in ms."""

    kept: frozenset[str]
    quality: float
    ms: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "kept": sorted(self.kept),
            "quality": None if math.isinf(self.quality) else round(self.quality, 4),
            "ms": None if self.ms is None else round(self.ms, 4),
        }


Evaluate = Callable[[Sequence[frozenset[str]]], Sequence[Point]]


@dataclass(frozen=True)
class Target:
    """What reaching means: quality >= value (or <= value where lower is better: a WER)."""

    value: float
    higher_is_better: bool = True

    def reached(self, quality: float) -> bool:
        return quality >= self.value if self.higher_is_better else quality <= self.value

    def better(self, a: float, b: float, margin: float = 0.0) -> bool:
        """Whether quality ``a`` beats ``b`` by more than ``margin``."""
        return a > b + margin if self.higher_is_better else a < b - margin


@dataclass
class SearchResult:
    """The chosen set, whether it reaches the target, and every point on the way."""

    target: Target
    kept: frozenset[str]
    reached: bool
    best: Point
    points: list[Point] = field(default_factory=list)
    stopped: str = ""  # why the search ended early ("" when it ran its course)

    @property
    def evaluations(self) -> int:
        return len(self.points)

    def pareto(self) -> list[Point]:
        """The points no other beats in both quality and kept count (fewest kept first)."""
        front: list[Point] = []
        for point in sorted(self.points, key=lambda p: (len(p.kept), _order(self.target, p))):
            if not front or self.target.better(point.quality, front[-1].quality):
                front.append(point)
        return front

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target.value,
            "higher_is_better": self.target.higher_is_better,
            "reached": self.reached,
            "kept": sorted(self.kept),
            "quality": self.best.to_dict()["quality"],
            "evaluations": self.evaluations,
            "stopped": self.stopped or None,
            "points": [p.to_dict() for p in self.points],
        }


def _order(target: Target, point: Point) -> float:
    return -point.quality if target.higher_is_better else point.quality


class _Budget(Exception):
    """No evaluation left."""


class _Search:
    def __init__(
        self, evaluate: Evaluate, target: Target, max_evaluations: int, width: int
    ) -> None:
        self.evaluate = evaluate
        self.target = target
        self.max = max_evaluations
        self.width = max(1, width)
        self.seen: dict[frozenset[str], Point] = {}
        self.points: list[Point] = []

    def run(self, sets: Sequence[frozenset[str]]) -> list[Point]:
        """Evaluate the sets not seen yet (one batch, as many as the budget allows)."""
        fresh = list(dict.fromkeys(s for s in sets if s not in self.seen))
        room = self.max - len(self.points)
        if len(fresh) > room:
            fresh = fresh[:room]
        if fresh:
            for point in self.evaluate(fresh):
                self.seen[point.kept] = point
                self.points.append(point)
        if any(s not in self.seen for s in sets):
            missing = [s for s in sets if s not in self.seen]
            if len(missing) == len(sets):
                raise _Budget
        return [self.seen[s] for s in sets if s in self.seen]

    def one(self, kept: frozenset[str]) -> Point:
        found = self.run([kept])
        if not found:
            raise _Budget
        return found[0]

    def reaches(self, kept: frozenset[str]) -> bool:
        return self.target.reached(self.one(kept).quality)


def search(
    ranked: Sequence[str],
    evaluate: Evaluate,
    target: Target,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    width: int = 1,
    min_gain: float = MIN_GAIN,
    patience: int | None = None,
) -> SearchResult:
    """Find a small subset of ``ranked`` (most promising first) whose evaluation reaches
    ``target`` within ``max_evaluations``; ``width`` candidates are tried per greedy batch (as
    many as evaluations can run at once); after ``patience`` (default: the larger of 2 and
    ``width``) tried in a row without a gain, the rest is searched as a group."""
    if max_evaluations < 1:
        raise ValueError("max_evaluations must be at least 1")
    state = _Search(evaluate, target, max_evaluations, width)
    kept: frozenset[str] = frozenset()
    stopped = ""
    try:
        current = state.one(kept)
        if not target.reached(current.quality):
            misses = max(2, width) if patience is None else patience
            kept, current = _greedy(state, ranked, kept, current, min_gain, misses)
        if not target.reached(current.quality):
            kept = _grouped(state, ranked, kept)
        while target.reached(state.one(kept).quality):
            kept = _pruned(state, kept)
            smaller = _smallest_reaching(state)
            if len(smaller.kept) >= len(kept):
                break
            kept = smaller.kept  # found on the way, smaller still: prune it too
    except _Budget:
        stopped = f"the {max_evaluations} evaluations allowed ran out"
    if kept in state.seen and target.reached(state.seen[kept].quality):
        best = state.seen[kept]
    elif any(target.reached(p.quality) for p in state.points):
        best = _smallest_reaching(state)
    else:
        best = min(state.points, key=lambda p: (_order(target, p), len(p.kept)))
    reaching = target.reached(best.quality)
    return SearchResult(target, best.kept, reaching, best, state.points, stopped)


def _greedy(
    state: _Search,
    ranked: Sequence[str],
    kept: frozenset[str],
    current: Point,
    min_gain: float,
    patience: int,
) -> tuple[frozenset[str], Point]:
    target = state.target
    pending = [c for c in ranked if c not in kept]
    misses = 0
    while pending and not target.reached(current.quality) and misses < patience:
        batch, pending = pending[: state.width], pending[state.width :]
        points = state.run([kept | {c} for c in batch])
        gaining = [p for p in points if target.better(p.quality, current.quality, min_gain)]
        if not gaining:
            misses += len(batch)
            continue
        misses = 0
        best = min(gaining, key=lambda p: _order(target, p))
        if len(gaining) > 1:
            union = state.one(frozenset().union(*(p.kept for p in gaining)))
            if target.better(union.quality, best.quality, min_gain):
                best = union
        kept, current = best.kept, best
    return kept, current


def _grouped(state: _Search, ranked: Sequence[str], kept: frozenset[str]) -> frozenset[str]:
    rest = [c for c in ranked if c not in kept]
    if not rest or not state.reaches(kept | frozenset(rest)):
        return kept  # even everything left in float misses the target
    return kept | _reduce(state, rest, kept)


def _reduce(state: _Search, group: Sequence[str], held: frozenset[str]) -> frozenset[str]:
    """A small part of ``group`` that reaches the target together with ``held`` (which, with
    all of ``group``, reaches it)."""
    if len(group) == 1:
        return frozenset(group)
    half = len(group) // 2
    first, second = list(group[:half]), list(group[half:])
    for part in (first, second):
        if state.reaches(held | frozenset(part)):
            return _reduce(state, part, held)
    # neither half alone: part of each is needed (culprits that help only together)
    from_first = _reduce(state, first, held | frozenset(second))
    return from_first | _reduce(state, second, held | from_first)


def _smallest_reaching(state: _Search) -> Point:
    target = state.target
    reaching = [p for p in state.points if target.reached(p.quality)]
    return min(reaching, key=lambda p: (len(p.kept), _order(target, p)))


def _pruned(state: _Search, kept: frozenset[str]) -> frozenset[str]:
    for candidate in sorted(kept):
        smaller = kept - {candidate}
        if smaller and state.reaches(smaller):
            kept = smaller
    return kept
