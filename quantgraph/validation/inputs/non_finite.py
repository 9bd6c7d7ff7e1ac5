"""NaN and inf that the original model itself computes on the inputs it was given, and which
inputs are the likely cause.

On generated inputs a non-finite output of the original is a refusal like an error (the search
tries other plans: :mod:`.search`); when nothing avoids it, or when the rewritten model fails
where the original computed NaN or inf (a DynamicQuantize refuses a NaN scale), the error is
the original's and says so: where the first non-finite value appears and which inputs reach it.

Where: the original is run once more with every tensor of its main graph exposed; a node is an
*origin* when it computes a non-finite value from finite ones (a constant -inf it reads counts as
finite: masking with -inf is by design). The origins that reach the first NaN (else the first
non-finite tensor) are where it starts, and the fed inputs they read, directly or not, are the
likely cause; those whose values the graph bounds (indices, lengths, counts) come last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ...errors import ModelError
from ...ir.values import constant_array
from .plan import InputSpec

# Inputs whose values these whys describe are bounded by the ops reading them: no cause.
_BOUNDED = ("indices of", "sequence_lens of", "a count or size of", "a mask")
ANALYSIS_BUDGET = 2 << 30  # bytes: above it, no tensor-by-tensor rerun (the error names no node)


class NonFinite(ModelError):
    """The original's outputs hold NaN or inf on inputs it was given (the message says where)."""


def non_finite_text(names: Sequence[str], outputs: Sequence[np.ndarray]) -> str | None:
    """``NaN in output 'y' (12 of 128 values)`` for the first output holding NaN (else inf),
    None when every floating output is finite."""
    worst: tuple[int, str] | None = None
    for name, array in zip(names, outputs, strict=False):
        found = _what(np.asarray(array))
        if found is not None and (worst is None or found[0] < worst[0]):
            worst = found[0], f"{found[1]} in output '{name}'{found[2]}"
    return None if worst is None else worst[1]


def check_finite(names: Sequence[str], outputs: Sequence[np.ndarray]) -> None:
    """Raise :class:`NonFinite` when an output of ``names`` holds NaN or inf."""
    text = non_finite_text(names, outputs)
    if text is not None:
        raise NonFinite(text)


def _what(array: np.ndarray) -> tuple[int, str, str] | None:
    """(0 for NaN, 1 for inf, the word, ``(k of n values)``) or None for a finite array."""
    if array.dtype.kind not in "fc" or array.size == 0:
        return None
    bad = ~np.isfinite(array)
    count = int(bad.sum())
    if not count:
        return None
    nan = bool(np.isnan(array).any())
    word = "NaN" if nan else ("inf and -inf" if _both_signs(array) else _sign(array) + "inf")
    return (0 if nan else 1), word, f" ({count:,} of {array.size:,} values)"


def _both_signs(array: np.ndarray) -> bool:
    return bool(np.isposinf(array).any() and np.isneginf(array).any())


def _sign(array: np.ndarray) -> str:
    return "-" if np.isneginf(array).any() else ""


@dataclass(frozen=True)
class Cause:
    """Where the original's first non-finite value appears and the inputs that reach it."""

    output: str | None  # "NaN in output 'y' (12 of 128 values)", None: only inside the graph
    tensor: str  # the first NaN (else non-finite) tensor in node order, "probs"
    what: str  # what it holds: "NaN (12 of 128 values)"
    origin: str  # "'mask_mul' (Mul)": a node making non-finite values of finite ones
    made: str  # what the origin makes: "inf"
    inputs: tuple[str, ...]  # the likely cause, most likely first

    def text(self, specs: Sequence[InputSpec] | None) -> str:
        """``gives NaN in output 'y' (...), first in tensor 'p'; it starts where node 'n'
        (Mul) makes inf of finite values, reading input 'm' (drawn from [-100, 100]:
        default)``."""
        by_name = {s.name: s for s in specs or ()}
        reads = ", ".join(_input_text(name, by_name.get(name)) for name in self.inputs)
        if self.output:
            text = f"gives {self.output}, first in tensor '{self.tensor}'"
        else:
            text = f"computes {self.what} in tensor '{self.tensor}'"
        text += f"; it starts where node {self.origin} makes {self.made} of finite values"
        if reads:
            text += f", reading input{'s' if len(self.inputs) > 1 else ''} {reads}"
        return text


def _input_text(name: str, spec: InputSpec | None) -> str:
    if spec is None:
        return f"'{name}'"
    if np.isfinite(spec.low) and np.isfinite(spec.high):
        return f"'{name}' (drawn from [{spec.low:g}, {spec.high:g}]: {spec.why})"
    return f"'{name}' ({spec.why})"  # standard normal


def fix_hint(cause: Cause | None, specs: Sequence[InputSpec] | None) -> str:
    """The options that change the inputs the cause names."""
    names = list(cause.inputs if cause is not None else ())
    if not names:
        names = [s.name for s in specs or () if not s.why.startswith(_BOUNDED)]
    ranges = " ".join(f"--val-range {name}:LOW,HIGH" for name in names[:3])
    if ranges:
        return f"set their values with {ranges}, or pass inputs with --inputs FILE"
    return "pass inputs with --inputs FILE"


def find_cause(
    model: ir.Model,
    feeds: Mapping[str, np.ndarray],
    specs: Sequence[InputSpec] | None,
    budget: int | None = ANALYSIS_BUDGET,
) -> Cause | None:
    """Where ``model`` (runnable by plain onnxruntime) first computes NaN or inf on ``feeds``;
    None when it computes none, cannot be run so, or keeping every tensor would need more than
    ``budget`` bytes (:mod:`.memory`'s estimate)."""
    import onnxruntime as ort

    from ...backends.ort_sessions import ort_session
    from ..debug.intermediate import with_all_outputs
    from .memory import estimate

    planned = {name: tuple(np.shape(array)) for name, array in feeds.items()}
    if budget is not None and estimate(model, planned, keep_all=True).total > budget:
        return None
    try:
        exposed, _ = with_all_outputs(model)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4
        session = ort_session(exposed, options)
        names = [o.name for o in session.get_outputs()]
        values = dict(zip(names, session.run(names, dict(feeds)), strict=True))
    except Exception:  # the analysis is a hint: without it the error names no node
        return None
    return _cause(model, values, specs)


def _cause(
    model: ir.Model, values: Mapping[str, np.ndarray], specs: Sequence[InputSpec] | None
) -> Cause | None:
    bad: dict[str, tuple[int, str, str]] = {}
    for name, array in values.items():
        found = _what(np.asarray(array))
        if found is not None:
            bad[name] = found
    if not bad:
        return None
    nodes = list(model.graph)  # in order: the first NaN is the one computed first
    first: ir.Value | None = None
    for rank in (0, 1):  # the first NaN, else the first inf
        for node in nodes:
            hit = next((v for v in node.outputs if bad.get(v.name or "", (9,))[0] == rank), None)
            if hit is not None:
                first = hit
                break
        if first is not None:
            break
    if first is None:
        return None
    origins = _origins(first, bad)
    fed: dict[str, None] = {}
    for node in origins:
        for name in _fed_ancestors(node):
            fed.setdefault(name, None)
    by_name = {s.name: s for s in specs or ()}
    free = [n for n in fed if n not in by_name or not by_name[n].why.startswith(_BOUNDED)]
    ranked = free or list(fed)  # values the graph bounds are a cause only when nothing else is
    _, word, count = bad[first.name or ""]
    origin = origins[0] if origins else first.producer()
    assert origin is not None  # first is a node's output
    label = f"'{origin.name}' ({origin.op_type})" if origin.name else origin.op_type
    made = next(bad[v.name or ""][1] for v in origin.outputs if (v.name or "") in bad)
    outputs = [v.name or "" for v in model.graph.outputs if (v.name or "") in values]
    output = non_finite_text(outputs, [values[name] for name in outputs])
    return Cause(output, first.name or "", f"{word}{count}", label, made, tuple(ranked))


def _origins(first: ir.Value, bad: Mapping[str, object]) -> list[ir.Node]:
    """The nodes whose non-finite values reach ``first`` along non-finite tensors and that make
    them of finite ones (a constant's -inf counts as finite): where it starts."""
    found: list[ir.Node] = []
    seen: set[int] = set()
    stack = [first]
    while stack:
        producer = stack.pop().producer()
        if producer is None or id(producer) in seen:
            continue
        seen.add(id(producer))
        carried = [
            v
            for v in producer.inputs
            if v is not None and (v.name or "") in bad and constant_array(v) is None
        ]
        if carried:
            stack.extend(carried)
        else:
            found.append(producer)
    return found


def _fed_ancestors(node: ir.Node) -> list[str]:
    """The fed inputs whose values ``node`` reads, directly or not (not through Shape or Size,
    which read a shape only), in the graph's input order."""
    reached: set[str] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen or current.op_type in ("Shape", "Size"):
            continue
        seen.add(id(current))
        for value in current.inputs:
            if value is None:
                continue
            if value.is_graph_input() and not value.is_initializer():
                reached.add(value.name or "")
            producer = value.producer()
            if producer is not None:
                stack.append(producer)
    graph = node.graph
    order = [v.name for v in graph.inputs] if graph is not None else sorted(reached)
    return [name for name in order if name and name in reached]
