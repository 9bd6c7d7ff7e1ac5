"""Fusion at session creation: units of spec ops and their compute handed to an engine that
runs them fused. The model a user saved never changes; each session says which engine runs
which unit (:class:`FusionPlan`) and why a spec op runs alone.

Modes: ``"none"`` (each spec op alone: the spec's exact composition, the default),
``"onnxruntime"`` (units go back to onnxruntime's own fused kernels, see :mod:`.ort.ort_engine`),
``"onednn"`` (oneDNN Graph forms the partitions and runs them, see :mod:`.onednn.onednn_engine`) and
``"auto"`` (each unit to the faster of the two by one small rule table, see
:mod:`.auto.auto_engine`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import onnx_ir as ir

from ..errors import BackendError, FusionWarning
from .auto.tuner import Decision
from .plan import AUTO, MODES, NONE, ONEDNN, ONNXRUNTIME, FusionPlan, LeftAlone, Unit


def apply(
    model: ir.Model, mode: str, *, level: int, decision: Decision | None = None
) -> FusionPlan:
    """Plan ``mode`` on ``model`` (rewritten in place to carry the plan out) for a session at
    onnxruntime optimization ``level``. The plan does not depend on the session's backend:
    the spec ops it leaves alone run on whichever the session registers. A mode that forms no
    unit on a model with spec ops says so in a :class:`FusionWarning` (and ``plan.no_unit``)."""
    plan = _plan(model, mode, level=level, decision=decision)
    if plan.no_unit is not None:
        warnings.warn(plan.no_unit, FusionWarning, stacklevel=3)
    return plan


def _plan(model: ir.Model, mode: str, *, level: int, decision: Decision | None) -> FusionPlan:
    if mode not in MODES:
        raise BackendError(f"unknown fusion {mode!r}; choose one of {', '.join(MODES)}")
    if mode == NONE:
        return FusionPlan(NONE)
    if mode == ONEDNN:
        from .onednn import onednn_engine

        _needs_onednn(mode)
        return onednn_engine.plan(model)
    if mode == AUTO:
        from .auto import auto_engine

        _needs_onednn(mode)
        return auto_engine.plan(model, level, decision)
    from .ort import ort_engine

    return ort_engine.plan(model, level)


def _needs_onednn(mode: str) -> None:
    from ..backends import onednn

    reason = onednn.unavailable_reason()
    if reason is not None:
        raise BackendError(f"fusion {mode!r} needs oneDNN: {reason}")


def with_decision(plan: FusionPlan, decision: Decision) -> FusionPlan:
    """``plan`` (fusion "auto") under ``decision`` where it chose the plan ``plan`` carries
    out already: each reason that quoted the earlier decision quotes this one."""
    before = plan.tuning.why if plan.tuning is not None else None

    def said(reason: str) -> str:
        return reason.replace(before, decision.why) if before else reason

    return FusionPlan(
        plan.mode,
        units=[replace(u, reason=said(u.reason)) for u in plan.units],
        alone=[replace(a, reason=said(a.reason)) for a in plan.alone],
        tuning=decision,
    )


def uses_partitions(plan: FusionPlan) -> bool:
    """True when the session's model has OneDnnPartition nodes (its library must be
    registered)."""
    return any(unit.engine == ONEDNN for unit in plan.units)


__all__ = [
    "AUTO",
    "MODES",
    "NONE",
    "ONEDNN",
    "ONNXRUNTIME",
    "FusionPlan",
    "LeftAlone",
    "Unit",
    "apply",
    "uses_partitions",
    "with_decision",
]
