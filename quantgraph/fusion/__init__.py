"""Fusion at session creation: units of spec ops and their compute handed to an engine that
runs them fused. The model a user saved never changes; each session says which engine runs
which unit (:class:`FusionPlan`) and why a spec op runs alone.

Modes: ``"none"`` (each spec op alone: the spec's exact composition, the default) and
``"onnxruntime"`` (units go back to onnxruntime's own fused kernels, see :mod:`.ort_engine`).
"""

from __future__ import annotations

import onnx_ir as ir

from ..errors import BackendError
from .plan import MODES, NONE, ONNXRUNTIME, FusionPlan, LeftAlone, Unit


def apply(model: ir.Model, mode: str, *, level: int, backend: str) -> FusionPlan:
    """Plan ``mode`` on ``model`` (rewritten in place to carry the plan out) for a session at
    onnxruntime optimization ``level`` whose spec ops run on ``backend``."""
    if mode not in MODES:
        raise BackendError(f"unknown fusion {mode!r}; choose one of {', '.join(MODES)}")
    if mode == NONE:
        return FusionPlan(NONE)
    from . import ort_engine

    return ort_engine.plan(model, level, backend)


__all__ = ["MODES", "NONE", "ONNXRUNTIME", "FusionPlan", "LeftAlone", "Unit", "apply"]
