"""How a session with fusion "auto" reaches its decision: the cache, else a measurement at the
session's input shapes (:mod:`.tuner`), else the onnxruntime plan.

Modes (``tuning``): ``measure`` (the default: the cache, else measure and store), ``cache``
(the cache, else the onnxruntime plan: never measure), ``force`` (measure again and store).
``QUANTGRAPH_TUNING`` sets the default. The cache answers only at the session's own input
shapes (those of its inputs, or those the model fixes), and only with a decision younger than
``QUANTGRAPH_TUNING_MAX_AGE`` days (30 by default). The session builds each candidate's turns
(it knows how to register its backend, and times each candidate in a worker process of its own
where it can: :mod:`quantgraph.runtime.tuning_workers`); this module knows nothing of
backends.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir

from . import auto_engine, tuner, tuning_cache
from .tuner import Choice, Decision

MODES = ("measure", "cache", "force")
ENVIRONMENT = "QUANTGRAPH_TUNING"
MAX_AGE_ENVIRONMENT = "QUANTGRAPH_TUNING_MAX_AGE"
# Days a cached decision stands: libraries and the CPU are in its key, but what else shares
# the machine, its firmware and thermals change a measurement too.
DEFAULT_MAX_AGE_DAYS = 30.0
PENDING = "pending"  # no inputs yet: the first run decides
# A runner for one candidate plan: called with the inputs, runs the model once.
Runner = Callable[[Mapping[str, np.ndarray]], object]


@dataclass(frozen=True)
class Timing:
    """The candidates made ready to time: each one's turn (:data:`tuner.Turn`), or where their
    sessions cannot be alive together, each one's opener (:data:`tuner.Opener`: timed one at a
    time), and how they are isolated from each other ("processes", "in-process: " and why, or
    "one at a time, " how and why)."""

    turns: Mapping[str, tuner.Turn]
    isolation: str
    # a candidate planning the same model as an earlier one -> that one (timed once)
    same: Mapping[str, str] = field(default_factory=dict)
    openers: Mapping[str, tuner.Opener] = field(default_factory=dict)
    # candidates that failed to get ready or to run -> why (filled as they fail: never chosen)
    dropped: tuner.Dropped = field(default_factory=dict)


# build(candidates, inputs): the candidates ready to time, released when the context ends
Build = Callable[[Sequence[Choice], Mapping[str, np.ndarray]], AbstractContextManager[Timing]]


def default_mode() -> str:
    return os.environ.get(ENVIRONMENT) or "measure"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"tuning must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def max_age_days() -> float:
    """How many days a cached decision stands (``$QUANTGRAPH_TUNING_MAX_AGE``, else
    :data:`DEFAULT_MAX_AGE_DAYS`): an older one is measured again, as a miss."""
    given = os.environ.get(MAX_AGE_ENVIRONMENT, "").strip()
    if not given:
        return DEFAULT_MAX_AGE_DAYS
    try:
        days = float(given)
    except ValueError:
        days = -1.0
    if not days >= 0:  # NaN too
        raise ValueError(
            f"{MAX_AGE_ENVIRONMENT} must be a number of days >= 0 (e.g. 30, 0.5; 0 measures "
            f"every time), not {given!r}"
        )
    return days


def shapes_of(feeds: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    return {name: [int(d) for d in np.shape(array)] for name, array in sorted(feeds.items())}


def declared_shapes(model: ir.Model) -> dict[str, list[int]] | None:
    """The input shapes ``model`` fixes (every dim a number), None when a dim is left open:
    then only the inputs say at what shapes the session runs."""
    initializers = set(model.graph.initializers)
    found: dict[str, list[int]] = {}
    for value in model.graph.inputs:
        if value.name in initializers:
            continue
        dims = [] if value.shape is None else [d for d in value.shape if isinstance(d, int)]
        if value.shape is None or len(dims) != len(value.shape):
            return None
        found[value.name or ""] = dims
    return dict(sorted(found.items()))


@dataclass
class Tuning:
    """One session's tuning: its unfused model, what decisions depend on, and the mode."""

    model: ir.Model  # the session's model before fusion (never planned in place)
    key: dict[str, Any]  # tuning_cache.model_key
    mode: str = "measure"
    budget: float = tuner.DEFAULT_BUDGET
    measure: tuner.Measure | None = None  # injected by tests; else timed runs

    def candidates(self) -> list[Choice]:
        # onnxruntime's own Q/DQ compute the onnx arithmetic: a candidate only for that one
        lone = self.key.get("arithmetic") == "onnx"
        return tuner.choices(auto_engine.partitions(self.model), lone=lone)

    def decide(self, feeds: Mapping[str, np.ndarray] | None, build: Build) -> Decision:
        """The decision for ``feeds`` (None: not known yet; the cache is asked at the shapes
        the model fixes, if it fixes them all)."""
        candidates = self.candidates()
        if len(candidates) == 1:
            return Decision(candidates[0], "no partition", candidates)
        shapes = declared_shapes(self.model) if feeds is None else shapes_of(feeds)
        missed = "no decision cached at these shapes"
        if self.mode != "force" and shapes is not None:
            cached = tuning_cache.load(self.key, shapes)
            if cached is not None and _same(cached.candidates, candidates):
                expired = _expired(cached)
                if expired is None:
                    return cached
                missed = expired
        if self.mode == "cache" and shapes is not None:
            return Decision(
                candidates[0],
                "not measured",
                candidates,
                shapes=shapes,
                note=f"tuning 'cache': {missed}",
            )
        if feeds is None:
            return Decision(candidates[0], PENDING, candidates, note="no inputs yet")
        if self.measure is not None:
            decision = tuner.decide(candidates, self.measure)
        else:
            with warnings.catch_warnings():  # a candidate that forms no unit is no news
                warnings.simplefilter("ignore")
                with build(candidates, feeds) as timing:
                    decision = tuner.decide(candidates, timed(timing, self.budget))
            decision.isolation = timing.isolation if decision.rounds else ""
            decision.dropped = {
                c.name: timing.dropped[timing.same.get(c.name, c.name)]
                for c in candidates
                if timing.same.get(c.name, c.name) in timing.dropped
            }
        decision.shapes = shapes or {}
        tuning_cache.store(self.key, decision)
        return decision


def _expired(cached: Decision) -> str | None:
    """Why ``cached`` is too old to stand (None: it stands)."""
    limit = max_age_days()
    age = cached.age_seconds()
    if age is None or age <= limit * 86400:
        return None
    return (
        f"the cached decision is {age / 86400:.1f} days old, past {MAX_AGE_ENVIRONMENT}="
        f"{limit:g} days"
    )


def timed(timing: Timing, budget: float) -> tuner.Measure:
    """Time the candidates asked for on ``timing``'s turns (a candidate planning the same
    model as another is timed once, as that one), within ``budget`` each time."""

    def measure(candidates: Sequence[Choice]) -> tuner.Rounds:
        names = [c.name for c in candidates]
        ready = {**timing.turns, **timing.openers}
        distinct = [
            n for n in dict.fromkeys(timing.same.get(n, n) for n in names) if n in ready
        ]  # (a candidate dropped while getting ready has neither)
        if len(distinct) < 2:  # all the same
            return {}
        dropped = timing.dropped
        if timing.openers:
            openers = {n: timing.openers[n] for n in distinct}
            rounds = tuner.time_one_at_a_time(openers, budget, dropped)
        else:
            rounds = tuner.time_turns(
                {n: timing.turns[n] for n in distinct}, budget, dropped=dropped
            )
        return {
            n: list(rounds[timing.same.get(n, n)]) for n in names if timing.same.get(n, n) in rounds
        }

    return measure


def _same(one: Sequence[Choice], other: Sequence[Choice]) -> bool:
    def plans(choices: Sequence[Choice]) -> list[tuple[str, object, str]]:
        return [(c.name, c.engines, c.rest) for c in choices]

    return plans(one) == plans(other)


__all__ = [
    "DEFAULT_MAX_AGE_DAYS",
    "ENVIRONMENT",
    "MAX_AGE_ENVIRONMENT",
    "MODES",
    "PENDING",
    "Build",
    "Runner",
    "Timing",
    "Tuning",
    "check_mode",
    "declared_shapes",
    "max_age_days",
    "timed",
]
