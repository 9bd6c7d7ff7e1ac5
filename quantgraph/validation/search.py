"""Other plans to try when the original model refuses the first one.

Only what defaulted is varied (never a ``--dim``, ``--val-range``, metadata or model size), in
three families taken in turn, one attempt each, at most :data:`MAX_ATTEMPTS` attempts:

- image sizes: the dims that defaulted to 224 take each of :data:`SPATIAL_SIZES`;
- longer dims: for each length in :data:`LENGTHS`, every dim that defaulted to 1 except those
  at axis 0 (usually the batch) together, then each such dim alone (a symbolic name counts
  once, for every input using it): a reflect Pad or a window needs more than one step;
- narrower integers: the range of every integer input not set by ``--val-range`` (the default
  [-100, 100] or what the graph bounds) is cut to each of :data:`INTEGER_RANGES` where they
  overlap: an index or size the graph does not show (an index doubled on its way), a flag.

An attempt whose inputs would be too large is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import zip_longest

import onnx_ir as ir

from .inputs import (
    FROM_DEFAULT,
    FROM_IMAGE_DEFAULT,
    Attempt,
    DimKey,
    InputSpec,
    dim_key,
    fed_inputs,
)

MAX_ATTEMPTS = 24
SPATIAL_SIZES = (256, 320, 384, 416, 512, 640, 128, 96, 64, 32)
LENGTHS = (16, 64, 256, 1024)
INTEGER_RANGES = ((0, 100), (0, 10), (0, 1), (1, 1), (0, 0))


def attempts(model: ir.Model, first: Sequence[InputSpec]) -> Iterator[Attempt]:
    """The attempts after ``first`` (the first plan), numbered from 1, in the order tried."""
    families = [_spatial(first), _lengths(model, first), _integers(first)]
    number = 0
    for round_ in zip_longest(*families):
        for attempt in round_:
            if attempt is None:
                continue
            number += 1
            if number > MAX_ATTEMPTS:
                return
            yield Attempt(number, attempt.label, attempt.spatial, attempt.lengths, attempt.integers)


def _spatial(first: Sequence[InputSpec]) -> list[Attempt]:
    if not any(FROM_IMAGE_DEFAULT in spec.shape_from for spec in first):
        return []
    return [Attempt(label=f"image size {size}", spatial=size) for size in SPATIAL_SIZES]


def _label(key: DimKey) -> str:
    name, axis = key
    return f"dim '{name}'" if axis is None else f"{name}:{axis}"


def _lengths(model: ir.Model, first: Sequence[InputSpec]) -> list[Attempt]:
    by_name = {spec.name: spec for spec in first}
    inner: dict[DimKey, None] = {}  # ordered sets
    outer: dict[DimKey, None] = {}
    for value in fed_inputs(model):
        spec = by_name.get(value.name or "")
        if spec is None:
            continue
        for axis, source in enumerate(spec.shape_from):
            if source == FROM_DEFAULT:
                (outer if axis == 0 else inner)[dim_key(value, axis)] = None
    inner = {key: None for key in inner if key not in outer}  # a name also at axis 0: batch
    found: list[Attempt] = []
    for length in LENGTHS:
        if len(inner) > 1:
            keys = tuple((key, length) for key in inner)
            found.append(Attempt(label=f"every default dim past axis 0 = {length}", lengths=keys))
        for key in [*inner, *outer]:
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
