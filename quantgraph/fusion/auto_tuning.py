"""How a session with fusion "auto" reaches its decision: the cache, else a measurement at the
session's input shapes (:mod:`.tuner`), else the onnxruntime plan.

Modes (``tuning``): ``measure`` (the default: the cache, else measure and store), ``cache``
(the cache, else the onnxruntime plan: never measure), ``force`` (measure again and store).
``QUANTGRAPH_TUNING`` sets the default. The session builds each candidate's turns (it knows
how to register its backend, and times each candidate in a worker process of its own where it
can: :mod:`quantgraph.runtime.tuning_workers`); this module knows nothing of backends.
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
PENDING = "pending"  # no inputs yet: the first run decides
# A runner for one candidate plan: called with the inputs, runs the model once.
Runner = Callable[[Mapping[str, np.ndarray]], object]


@dataclass(frozen=True)
class Timing:
    """The candidates made ready to time: each one's turn (:data:`tuner.Turn`) and how they
    are isolated from each other ("processes", or "in-process: " and why)."""

    turns: Mapping[str, tuner.Turn]
    isolation: str
    # a candidate planning the same model as an earlier one -> that one (timed once)
    same: Mapping[str, str] = field(default_factory=dict)


# build(candidates, inputs): the candidates ready to time, released when the context ends
Build = Callable[[Sequence[Choice], Mapping[str, np.ndarray]], AbstractContextManager[Timing]]


def default_mode() -> str:
    return os.environ.get(ENVIRONMENT) or "measure"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"tuning must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def shapes_of(feeds: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    return {name: [int(d) for d in np.shape(array)] for name, array in sorted(feeds.items())}


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
        """The decision for ``feeds`` (None: not known yet)."""
        candidates = self.candidates()
        if len(candidates) == 1:
            return Decision(candidates[0], "no partition", candidates)
        shapes = None if feeds is None else shapes_of(feeds)
        if self.mode != "force":
            cached = tuning_cache.load(self.key, shapes)
            if cached is not None and _same(cached.candidates, candidates):
                return cached
        if self.mode == "cache":
            return Decision(candidates[0], "not measured", candidates, note="tuning 'cache'")
        if feeds is None:
            return Decision(candidates[0], PENDING, candidates, note="no inputs yet")
        isolation: list[str] = []
        measure = self.measure or _timed(feeds, build, self.budget, isolation)
        decision = tuner.decide(candidates, measure)
        decision.shapes = shapes or {}
        decision.isolation = "".join(isolation)
        tuning_cache.store(self.key, decision)
        return decision


def _timed(
    feeds: Mapping[str, np.ndarray], build: Build, budget: float, isolation: list[str]
) -> tuner.Measure:
    def measure(candidates: Sequence[Choice]) -> tuple[dict[str, float], dict[str, float], int]:
        with warnings.catch_warnings():  # a candidate that forms no unit is no news
            warnings.simplefilter("ignore")
            with build(candidates, feeds) as timing:
                if len(timing.turns) < 2:  # every plan makes the same model
                    return {}, {c.name: 1.0 for c in candidates}, 0
                isolation.append(timing.isolation)
                times, ratios, rounds = tuner.time_turns(timing.turns, budget)
        for name, twin in timing.same.items():
            times[name], ratios[name] = times[twin], ratios[twin]
        return times, ratios, rounds

    return measure


def _same(one: Sequence[Choice], other: Sequence[Choice]) -> bool:
    def plans(choices: Sequence[Choice]) -> list[tuple[str, object, str]]:
        return [(c.name, c.engines, c.rest) for c in choices]

    return plans(one) == plans(other)


__all__ = [
    "ENVIRONMENT",
    "MODES",
    "PENDING",
    "Build",
    "Runner",
    "Timing",
    "Tuning",
    "check_mode",
]
