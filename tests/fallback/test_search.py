"""The fallback search on injected evaluations, where the answer is known exactly."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from quantgraph.float_fallback.search import Point, Target, search

Quality = Callable[[frozenset[str]], float]


def evaluator(
    quality: Quality, calls: list[int] | None = None
) -> Callable[[Sequence[frozenset[str]]], list[Point]]:
    def evaluate(sets: Sequence[frozenset[str]]) -> list[Point]:
        if calls is not None:
            calls.append(len(sets))
        return [Point(s, quality(s)) for s in sets]

    return evaluate


def additive(base: float, gains: dict[str, float]) -> Quality:
    return lambda kept: base + sum(gains[c] for c in kept)


NAMES = [f"c{i}" for i in range(12)]


def test_one_culprit_first_in_the_ranking_is_found_in_two_evaluations() -> None:
    gains = dict.fromkeys(NAMES, 0.0) | {"c0": 12.0}
    result = search(NAMES, evaluator(additive(20.0, gains)), Target(30.0))
    assert result.reached and result.kept == {"c0"} and result.evaluations == 2


def test_greedy_keeps_only_what_gains_and_prunes_what_is_not_needed() -> None:
    gains = dict.fromkeys(NAMES, 0.0) | {"c1": 4.0, "c3": 3.0, "c5": 2.0, "c7": 0.5}
    result = search(NAMES, evaluator(additive(20.0, gains)), Target(26.5))
    assert result.reached
    assert result.kept == {"c1", "c3"}  # 27 dB; c5 and c7 are not needed
    assert result.best.quality == 27.0


def test_two_culprits_that_only_help_together_are_found_by_bisecting() -> None:
    def quality(kept: frozenset[str]) -> float:
        return 20.0 + (15.0 if {"c4", "c9"} <= kept else 0.0)

    result = search(NAMES, evaluator(quality), Target(30.0))
    assert result.reached and result.kept == {"c4", "c9"}
    assert result.evaluations <= 20


def test_an_unreachable_target_says_so_with_the_best_found() -> None:
    gains = dict.fromkeys(NAMES, 0.3)
    result = search(NAMES, evaluator(additive(20.0, gains)), Target(40.0))
    assert not result.reached
    assert result.best.quality > 20.0
    assert result.evaluations <= 20


def test_the_budget_bounds_the_evaluations_and_the_search_says_it_ran_out() -> None:
    def quality(kept: frozenset[str]) -> float:
        return 20.0 + (15.0 if {"c4", "c9", "c11"} <= kept else 0.0)

    result = search(NAMES, evaluator(quality), Target(30.0), max_evaluations=5)
    assert result.evaluations == 5
    assert "ran out" in result.stopped


def test_a_lower_is_better_metric() -> None:
    def wer(kept: frozenset[str]) -> float:
        return 0.30 - (0.2 if "c2" in kept else 0.0)

    result = search(NAMES, evaluator(wer), Target(0.15, higher_is_better=False), min_gain=0.01)
    assert result.reached and result.kept == {"c2"}


def test_batches_are_as_wide_as_asked_and_no_set_is_evaluated_twice() -> None:
    calls: list[int] = []
    gains = dict.fromkeys(NAMES, 0.0) | {"c6": 3.0, "c7": 3.0}
    result = search(NAMES, evaluator(additive(20.0, gains), calls), Target(25.0), width=4)
    assert result.reached and result.kept == {"c6", "c7"}
    assert max(calls) <= 4
    assert len({p.kept for p in result.points}) == result.evaluations


@settings(max_examples=60, deadline=None)
@given(
    gains=st.lists(st.floats(0, 6, allow_nan=False), min_size=1, max_size=10),
    target_gain=st.floats(0.5, 30),
    width=st.integers(1, 4),
)
def test_on_additive_gains_it_reaches_whenever_everything_reaches_and_keeps_a_minimal_set(
    gains: list[float], target_gain: float, width: int
) -> None:
    names = [f"c{i}" for i in range(len(gains))]
    by_name = dict(zip(names, gains, strict=True))
    quality = additive(10.0, by_name)
    target = Target(10.0 + target_gain)
    result = search(names, evaluator(quality), target, max_evaluations=200, width=width)
    assert result.reached == target.reached(quality(frozenset(names)))
    if result.reached:
        assert target.reached(quality(result.kept))
        for name in result.kept:  # 1-minimal: nothing kept can go
            assert not target.reached(quality(result.kept - {name}))
    front = result.pareto()
    assert all(a.quality < b.quality for a, b in itertools.pairwise(front))
