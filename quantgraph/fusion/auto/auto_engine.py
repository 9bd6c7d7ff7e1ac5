"""Fusion "auto": each unit oneDNN forms goes to oneDNN or to onnxruntime's fused kernels as a
measured :class:`~.tuner.Decision` says (:mod:`.tuner`, the session measures), then
onnxruntime's engine plans every spec op left (:mod:`quantgraph.fusion.ort.ort_engine`). Each unit's
``reason`` says why its engine.

The rule table (RULES, first match wins) is one candidate plan among those measured: the
guess from the single-layer measurements of issues #23 and #24 (2-core CPU, oneDNN v3.2,
onnxruntime at ORT_ENABLE_ALL). Without a decision, :func:`plan` follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import onnx_ir as ir

from ..onednn import onednn_engine, onednn_library
from ..onednn.onednn_engine import Candidate
from ..onednn.onednn_translate import key
from ..ort import original_form, ort_engine
from ..plan import AUTO, NONE, ONEDNN, ONNXRUNTIME, ONNXRUNTIME_LONE, ORIGINAL, FusionPlan
from .tuner import Decision, Partition

SMALL_ROWS = 16


def without_vnni() -> bool:
    """Whether this CPU lacks VNNI for oneDNN's int8 kernels (they then sum u8 x s8 products in
    int16 pairs, and lose to onnxruntime's MLAS kernels)."""
    return onednn_library.int8_saturates()


NOT_FORMED = "oneDNN formed no partition with compute for these spec ops"

# (matches, engine, why): the first rule that matches a candidate partition decides.
RULES: tuple[tuple[Callable[[Candidate], bool], str, str], ...] = (
    (
        lambda c: any(d in ("s4", "u4") for d in c.weight_dtypes),
        ONNXRUNTIME,
        "4-bit weights: onnxruntime's MatMulNBits (0.76x-0.99x of the original, issue #23)",
    ),
    (
        lambda c: bool({"Convolution", "MatMul"} & set(c.kinds)) and without_vnni(),
        ONNXRUNTIME,
        "int8 compute on a CPU without VNNI: oneDNN v3.2's int8 kernels lose to onnxruntime's "
        "here (per layer: conv 3x3 32->64 @40x40 1.2x-2.0x, MatMul 128x768x768 1.0x-1.4x, "
        "1x768x768 5x-9x; nudenet's 64 convolutions 17.7 ms vs 10.1 ms, docs/benchmarks.md)",
    ),
    (
        lambda c: "MatMul" in c.kinds and c.rows is not None and c.rows <= SMALL_ROWS,
        ONNXRUNTIME,
        f"MatMul with M <= {SMALL_ROWS}: a oneDNN partition's per-call overhead loses "
        "(1x768x768: 26 us vs 12.4 us for onnxruntime's kernel, issue #24)",
    ),
    (
        lambda c: "Convolution" in c.kinds,
        ONEDNN,
        "int8 convolution: oneDNN's partition beat QLinearConv 1.2x-2.4x per layer (issue #24)",
    ),
    (
        lambda c: "MatMul" in c.kinds,
        ONEDNN,
        f"MatMul with M > {SMALL_ROWS} or unknown: oneDNN on par or ahead (128x768x768: "
        "196 vs 203 us, issue #24)",
    ),
    (
        lambda c: True,
        ONNXRUNTIME,
        "no convolution or MatMul: onnxruntime's QLinear kernels and int8 data movement, "
        "which stay in its own layout",
    ),
)


def choose(candidate: Candidate) -> tuple[str, str]:
    """(engine, why) for one partition oneDNN formed."""
    for matches, engine, why in RULES:
        if matches(candidate):
            return engine, why
    return ONNXRUNTIME, NOT_FORMED  # unreachable: the last rule matches everything


def partitions(model: ir.Model) -> list[Partition]:
    """The partitions with compute oneDNN forms on ``model`` (planned on a private copy), each
    with the rule table's guess: what fusion "auto" chooses among."""
    copy = model.clone()  # shares the tensors: external data stays where it is
    found: list[Partition] = []

    def record(candidate: Candidate) -> tuple[str, str]:
        engine, why = choose(candidate)
        found.append(Partition(_name(candidate), candidate.kinds, engine, why))
        return ONNXRUNTIME, why  # nothing is replaced in the copy

    onednn_engine.plan_with_rule(copy, record)
    return found


def plan(model: ir.Model, level: int, decision: Decision | None = None) -> FusionPlan:
    """oneDNN's units ``decision`` gives to oneDNN (without one: the rule table's), then
    onnxruntime's plan of the remaining spec ops; or, where ``decision`` chose the original's
    own form, every spec op lowered back (:mod:`quantgraph.fusion.ort.original_form`)."""
    if decision is not None and decision.choice.rest == ORIGINAL:
        found = original_form.plan(model, decision.why)
        found.tuning = decision
        return found
    rule: Callable[[Candidate], tuple[str, str]] = choose
    if decision is not None:
        chosen_plan = decision.choice

        def rule(candidate: Candidate) -> tuple[str, str]:
            return chosen_plan.engine_for(_name(candidate)), decision.why

    chosen, deferred = onednn_engine.plan_with_rule(model, rule)
    if decision is not None and decision.choice.rest == NONE:  # as fusion "onednn" leaves them
        return FusionPlan(AUTO, units=chosen.units, alone=chosen.alone, tuning=decision)
    # why oneDNN formed nothing for a spec op (4-bit weights on a oneDNN without them, ...)
    unformed = {a.node: a.reason for a in chosen.alone}
    lone = decision is not None and decision.choice.rest == ONNXRUNTIME_LONE
    rest = ort_engine.plan(model, level, lone=lone)
    units = list(chosen.units)
    for unit in rest.units:
        reason = deferred.get(unit.compute) or _not_formed(unit.nodes, unformed)
        units.append(replace(unit, reason=reason))
    return FusionPlan(AUTO, units=units, alone=list(rest.alone), tuning=decision)


def _not_formed(nodes: tuple[str, ...], unformed: dict[str, str]) -> str:
    """Why oneDNN formed no partition for a unit's spec ops: the first reason its planner
    gave one of them (most say the same), else :data:`NOT_FORMED`."""
    for node in nodes:
        reason = unformed.get(node)
        if reason:
            return f"oneDNN formed no partition: {reason}"
    return NOT_FORMED


def _name(candidate: Candidate) -> str:
    return candidate.compute.name or key(candidate.compute)
