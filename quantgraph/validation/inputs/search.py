"""Other plans to try when the original model refuses the first one (or the first is over the
memory budget), and trying them within a memory and a time budget. Outputs holding NaN or inf
are a refusal too (:mod:`.non_finite`); then only the narrower integers are tried (a shorter
sequence would only make NaN rarer by chance).

Only what defaulted is varied (never a ``--dim``, ``--val-range``, metadata or model size), in
three families, one attempt from each in turn, at most :data:`MAX_ATTEMPTS` attempts:

- image sizes: the dims that defaulted to 224 take each of :data:`SPATIAL_SIZES`;
- other lengths: for each length in :data:`LENGTHS`, every dim that defaulted to 1 or to a
  sequence default except those at axis 0 (usually the batch) together, then each such dim
  alone (a symbolic name counts once, for every input using it): a reflect Pad or a window needs
  more than one step, a too long sequence fewer; a sequence dim never exceeds its position
  table;
- narrower integers: the range of every integer input not set by ``--val-range`` (the default
  [-100, 100] or what the graph bounds) is cut to each of :data:`INTEGER_RANGES` where they
  overlap: an index or size the graph does not show (an index doubled on its way), a flag.

Every plan's memory is estimated from its shapes first (:mod:`.memory`). The first plan runs if
its estimate fits the budget. If the original refused it, the attempts are tried smallest
estimate first (start small and grow); if it was over the budget, largest first (the plan
closest to the first that fits: a sequence of 128 shrinks to 64, not to 1). Growing, estimates
(less the weights) within one power of two count as equal and keep the order above. None over
the budget runs, and
none once the search has taken ``timeout`` seconds (checked between attempts: a run in progress
finishes). An attempt whose inputs would be too large is not tried. The report lists every
plan considered (:class:`.search_report.Tried`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest

import numpy as np
import onnx_ir as ir

from ...errors import ModelError
from ...ir.name_groups import described_once
from ..options import size_text
from .memory import Estimate, estimate, weight_bytes
from .non_finite import NonFinite
from .plan import (
    FIRST,
    FROM_DEFAULT,
    FROM_IMAGE_DEFAULT,
    FROM_SEQUENCE,
    Attempt,
    Case,
    DimKey,
    InputSpec,
    dim_key,
    draw,
    fed_inputs,
    plan_cases,
    plan_inputs,
    sequence_default,
)
from .search_report import (
    FAILED,
    NOT_REACHED,
    OVER_BUDGET,
    RAN,
    TOO_LARGE,
    InputSearch,
    MemoryCheck,
    Tried,
)

MAX_ATTEMPTS = 32
SPATIAL_SIZES = (32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 416, 448, 512, 640)
LENGTHS = (1, 16, 64, 256, 1024)
INTEGER_RANGES = ((0, 100), (0, 10), (0, 1), (1, 1), (0, 0))
DEFAULT_MEMORY_BUDGET = 2 << 30
DEFAULT_SEARCH_TIMEOUT = 60.0
HINT = (
    "bind dims with --dim NAME=VALUE or --dim INPUT:AXIS=VALUE, value ranges with "
    "--val-range NAME:LOW,HIGH, or pass inputs with --inputs"
)

Run = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]  # raises when the model refuses
Clock = Callable[[], float]
# Why the original refused the first plan, when it computed NaN or inf (:mod:`.non_finite`):
# called with the plan, its sample and the refusal, returns the sentence and what fixes it.
Explain = Callable[
    [Sequence[InputSpec], Mapping[str, np.ndarray], BaseException], tuple[str, str] | None
]


@dataclass(frozen=True)
class Found:
    """The plan the original ran: its specs, its first sample and the original's outputs on
    it, its memory check, and the search that found it (None: the first plan ran)."""

    specs: list[InputSpec]
    outputs: list[np.ndarray]
    memory: MemoryCheck
    search: InputSearch | None
    sample: dict[str, np.ndarray]
    cases: list[Case]  # every case of the plan that ran; the first's specs are ``specs``


def attempts(model: ir.Model, first: Sequence[InputSpec]) -> Iterator[Attempt]:
    """The attempts after ``first`` (the first plan), numbered from 1, in the families' order."""
    families = [_spatial(first), _lengths(model, first), _integers(first)]
    number = 0
    for round_ in zip_longest(*families):
        for attempt in round_:
            if attempt is None:
                continue
            number += 1
            if number > MAX_ATTEMPTS:
                return
            yield replace(attempt, number=number)


def find_plan(
    model: ir.Model,
    run: Run,
    *,
    label: str,
    message: Callable[[BaseException], str],
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    seed: int = 0,
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
    timeout: float | None = DEFAULT_SEARCH_TIMEOUT,
    keep_all: bool = False,
    clock: Clock = time.monotonic,
    explain: Explain | None = None,
) -> Found:
    """The first plan the original runs (the module doc); ModelError when none does, saying
    what was tried. ``run`` runs the original on feeds; ``message`` words its errors;
    ``explain``, when the first plan failed, says whether the original computed NaN or inf
    on it and what fixes that."""
    start = clock()
    weights = weight_bytes(model)
    cache: dict[tuple[tuple[str, tuple[int, ...]], ...], Estimate] = {}

    def estimate_of(specs: Sequence[InputSpec]) -> Estimate:
        key = tuple((s.name, s.shape) for s in specs)
        if key not in cache:
            planned = dict(key)
            cache[key] = estimate(model, planned, keep_all=keep_all, weights=weights)
        return cache[key]

    def fits(found: Estimate) -> bool:  # the weights are held whatever the plan: not counted
        return memory_budget is None or found.total - found.weights <= memory_budget

    def late() -> bool:
        return timeout is not None and clock() - start > timeout

    cases = plan_cases(model, dims=dims, val_ranges=val_ranges, attempt=FIRST)
    specs = cases[0].specs  # a decoder's prefill: its other case runs after
    first = estimate_of(specs)
    first_sample: dict[str, np.ndarray] = {}
    values_only = False  # NaN or inf: only other values can mean something
    refusal: BaseException | None = None
    if fits(first):
        first_sample = draw(specs, seed)
        try:
            outputs = run(first_sample)
            return Found(specs, outputs, _check(first, memory_budget), None, first_sample, cases)
        except Exception as error:
            first_error, status = message(error), FAILED
            values_only, refusal = isinstance(error, NonFinite), error
    else:
        assert memory_budget is not None
        first_error = _over(first, memory_budget)
        status = OVER_BUDGET
    tried = [Tried(0, FIRST.label, first.total, status)]
    ordered = _order(
        model,
        specs,
        dims,
        val_ranges,
        estimate_of,
        late,
        fits,
        shrink=status != FAILED,
        values_only=values_only,
    )
    for number, (attempt, found) in enumerate(ordered, 1):
        attempt = replace(attempt, number=number)
        if isinstance(found, str):
            tried.append(Tried(number, attempt.label, None, found))
            continue
        total = found.total
        if late():
            tried.append(Tried(number, attempt.label, total, NOT_REACHED))
            continue
        if not fits(found):
            tried.append(Tried(number, attempt.label, total, OVER_BUDGET))
            continue
        varied_cases = plan_cases(model, dims=dims, val_ranges=val_ranges, attempt=attempt)
        varied = varied_cases[0].specs
        sample = draw(varied, seed)
        try:
            outputs = run(sample)
        except Exception:
            tried.append(Tried(number, attempt.label, total, FAILED))
            continue
        tried.append(Tried(number, attempt.label, total, RAN))
        search = InputSearch(first_error, number, attempt.label, tuple(tried))
        memory = _check(found, memory_budget)
        return Found(varied, outputs, memory, search, sample, varied_cases)
    explained = None
    if refusal is not None and explain is not None:
        explained = explain(specs, first_sample, refusal)
    raise ModelError(
        _nothing_ran(label, specs, first_error, status, tried, memory_budget, timeout, explained)
    )


def _order(
    model: ir.Model,
    first: list[InputSpec],
    dims: Mapping[str, int] | None,
    val_ranges: Mapping[str, tuple[float, float]] | None,
    estimate_of: Callable[[Sequence[InputSpec]], Estimate],
    late: Callable[[], bool],
    fits: Callable[[Estimate], bool],
    *,
    shrink: bool,
    values_only: bool = False,
) -> list[tuple[Attempt, Estimate | str]]:
    """The attempts that change the inputs, smallest estimate first (within a power of two in
    the families' order; ``shrink``: largest first); then those whose inputs are too large, then
    those the clock left unestimated (their status as a string)."""
    sized: list[tuple[Attempt, Estimate]] = []
    too_large: list[tuple[Attempt, Estimate | str]] = []
    unreached: list[tuple[Attempt, Estimate | str]] = []
    for attempt in attempts(model, first):
        if values_only and attempt.integers is None:
            continue  # a shorter sequence would only make NaN rarer by chance
        if late():
            unreached.append((attempt, NOT_REACHED))
            continue
        try:
            varied = plan_inputs(model, dims=dims, val_ranges=val_ranges, attempt=attempt)
        except ModelError:  # an input too large at this size
            too_large.append((attempt, TOO_LARGE))
            continue
        if _same_draw(varied, first):  # nothing this attempt varies applies here
            continue
        sized.append((attempt, estimate_of(varied)))
    if shrink:  # those over the budget last
        sized.sort(key=lambda pair: (not fits(pair[1]), -pair[1].total))
    else:  # what a plan adds to the weights, within a power of two: in the families' order
        sized.sort(key=lambda pair: (pair[1].total - pair[1].weights).bit_length())
    return [*sized, *too_large, *unreached]


def _check(found: Estimate, budget: int | None) -> MemoryCheck:
    return MemoryCheck(found.total, found.weights, found.unresolved, budget)


def _over(found: Estimate, budget: int) -> str:
    return (
        f"estimated to need {size_text(found.total - found.weights)} beside the weights "
        f"({size_text(found.weights)}), over --memory-budget {size_text(budget)}"
    )


def _nothing_ran(
    label: str,
    first: Sequence[InputSpec],
    first_error: str,
    status: str,
    tried: Sequence[Tried],
    budget: int | None,
    timeout: float | None,
    explained: tuple[str, str] | None = None,
) -> str:
    described = [(s.name, f"{s.dtype.numpy().name}[{','.join(map(str, s.shape))}]") for s in first]
    # a decoder's 64 KV-cache inputs are one item, not 3,000 characters of the line
    shapes = described_once(described)
    hint = HINT
    if explained is not None:  # NaN or inf in the original itself, and what fixes it
        text = f"{label}: {explained[0]} (generated inputs: {shapes})"
        hint = explained[1]
    elif status == FAILED:
        text = (
            f"{label}: the original model fails on the generated inputs ({shapes}): {first_error}"
        )
    else:
        text = f"{label}: the generated inputs ({shapes}) are {first_error}"
    failed = [t.plan for t in tried[1:] if t.status == FAILED]
    if failed:
        shown = "; ".join(failed[:4]) + ("; ..." if len(failed) > 4 else "")
        text += f"; {len(failed)} other plans failed too ({shown})"
    over = [t for t in tried[1:] if t.status == OVER_BUDGET and t.estimate is not None]
    if over and budget is not None:
        least = min(over, key=lambda t: t.estimate or 0)
        text += (
            f"; {len(over)} over --memory-budget {size_text(budget)} (the smallest, "
            f"{least.plan}, estimated at {size_text(least.estimate or 0)} with the weights)"
        )
    if budget is not None and (over or status == OVER_BUDGET):
        hint = f"raise --memory-budget, {hint}"
    unreached = sum(t.status == NOT_REACHED for t in tried)
    if unreached and timeout is not None:
        text += f"; {unreached} not tried: the search stops after --search-timeout {timeout:g} s"
    return f"{text}; {hint}"


def _same_draw(one: list[InputSpec], other: list[InputSpec]) -> bool:
    return [(s.shape, s.low, s.high) for s in one] == [(s.shape, s.low, s.high) for s in other]


def _spatial(first: Sequence[InputSpec]) -> list[Attempt]:
    if not any(FROM_IMAGE_DEFAULT in spec.shape_from for spec in first):
        return []
    return [Attempt(label=f"image size {size}", spatial=size) for size in SPATIAL_SIZES]


def _label(key: DimKey) -> str:
    name, axis = key
    return f"dim '{name}'" if axis is None else f"{name}:{axis}"


def _lengths(model: ir.Model, first: Sequence[InputSpec]) -> list[Attempt]:
    by_name = {spec.name: spec for spec in first}
    inner: dict[DimKey, int] = {}  # ordered: key -> its size in the first plan
    outer: dict[DimKey, int] = {}
    sequence: set[DimKey] = set()
    for value in fed_inputs(model):
        spec = by_name.get(value.name or "")
        if spec is None:
            continue
        for axis, source in enumerate(spec.shape_from):
            key = dim_key(value, axis)
            if source.startswith(FROM_SEQUENCE):
                sequence.add(key)
            if source == FROM_DEFAULT or source.startswith(FROM_SEQUENCE):
                (outer if axis == 0 else inner)[key] = spec.shape[axis]
    inner = {key: size for key, size in inner.items() if key not in outer}  # also axis 0: batch
    most = sequence_default(model)[0] if sequence else None

    def takes(key: DimKey, size: int, length: int) -> bool:
        return length != size and not (key in sequence and most is not None and length > most)

    found: list[Attempt] = []
    for length in LENGTHS:
        together = [key for key, size in inner.items() if takes(key, size, length)]
        if len(together) > 1:
            keys = tuple((key, length) for key in together)
            found.append(Attempt(label=f"every default dim past axis 0 = {length}", lengths=keys))
        for key, size in [*inner.items(), *outer.items()]:
            if takes(key, size, length):
                found.append(Attempt(label=f"{_label(key)} = {length}", lengths=((key, length),)))
    return found


def _integers(first: Sequence[InputSpec]) -> list[Attempt]:
    narrowable = [s for s in first if s.why != "--val-range" and s.dtype.numpy().kind in "iu"]
    if not narrowable:
        return []
    return [
        Attempt(label=f"integers in [{low}, {high}]", integers=(low, high))
        for low, high in INTEGER_RANGES
    ]
