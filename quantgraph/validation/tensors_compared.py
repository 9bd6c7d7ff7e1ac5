"""Tensors compared over the samples: each by the verdict's rule (or a tolerance), how their
differences spread, and where the models first part (--intermediate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from ..reference.compare import TensorComparison, merge, typed
from .compare.error_stats import ErrorStats
from .compare.judge import Judge
from .debug.intermediate import producers
from .report import Divergence, IntermediateReport


def aggregate(
    names: list[str],
    declared: Mapping[str, int | None],
    expected: Sequence[Sequence[np.ndarray]],
    actual: Sequence[Sequence[np.ndarray]],
    tolerance: tuple[float, float] | None = None,
    judge: Judge | None = None,
) -> list[TensorComparison]:
    """Each tensor compared over the samples, by ``judge`` (the verdict's rule) where given,
    else with ``tolerance`` (None: exact)."""
    judge = judge or Judge(tolerance)
    results: list[TensorComparison] = []
    for index, name in enumerate(names):
        merged: TensorComparison | None = None
        for want, got in zip(expected, actual, strict=True):
            one = judge.compare(name, want[index], got[index], declared.get(name))
            merged = one if merged is None else merge(merged, one)
        assert merged is not None
        results.append(merged)
    return results


def error_stats(
    names: list[str],
    declared: Mapping[str, int | None],
    expected: Sequence[Sequence[np.ndarray]],
    actual: Sequence[Sequence[np.ndarray]],
    steps: Mapping[str, float],
) -> dict[str, ErrorStats]:
    found = {name: ErrorStats(name, step=steps.get(name)) for name in names}
    for want, got in zip(expected, actual, strict=True):
        for index, name in enumerate(names):
            elem_type = declared.get(name)
            found[name].add(typed(want[index], elem_type), typed(got[index], elem_type))
    return found


def intermediate_report(
    original: ir.Model, rewritten: ir.Model, compared: list[TensorComparison]
) -> IntermediateReport:
    made_by = producers(original.graph)
    rewritten_by = producers(rewritten.graph)
    differing = [c for c in compared if not c.agree]
    first = None
    if differing:
        top = differing[0]  # compared follows the original's node order
        producer = made_by[top.name]
        first = Divergence(
            producer.node,
            producer.op_type,
            rewritten_by[top.name].op_type if top.name in rewritten_by else "?",
            top.name,
            top.max_abs_diff,
            top.max_ulp_diff,
            top.mismatches,
            top.elements,
        )
    order = [c.name for c in compared]
    found = {n: (made_by[n].node, made_by[n].op_type) for n in order if n in made_by}
    return IntermediateReport(len(compared), len(differing), first, differing, order, found)
