"""Generated inputs: the one planner of every command that makes inputs (validate and
convert --validate, run, tune, bench --model) and of the API (:func:`make_inputs`): the same
model and options give the same inputs everywhere.

A plan (:mod:`quantgraph.validation.inputs.plan`: sizes and value ranges from what the graph says)
is tried on the model before it is used: the first plan the model runs with finite outputs is the
one, and a plan it refuses, or on which it computes NaN or inf, is varied as :mod:`.search` says.
Validation tries its plans on the original; a command holding a session of the model (run) on that
session; anything else on a session of the model made here (unfused: quantgraph's ops compute what
the original's Q/DQ did, so a converted model takes the plans its original takes). When no plan
runs because the model computes NaN or inf, the error is the original's (:mod:`.non_finite`):
it names the tensor where it starts, the inputs that reach it and the options that change them;
for a model holding quantgraph's ops, the original is its ops lowered back in memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ...backends.ort_sessions import ort_session
from ...errors import ORT_NODE, ModelError
from ...ir.model_files import ModelLike, load_model, source_files
from ...ir.walk import spec_nodes
from ...runtime.session import InferenceSession
from .non_finite import NonFinite, check_finite, find_cause, fix_hint, non_finite_text
from .plan import GENERATED, Case, InputSpec, describe_feeds, draw
from .search import DEFAULT_MEMORY_BUDGET, DEFAULT_SEARCH_TIMEOUT, Run, find_plan
from .search_report import InputSearch, MemoryCheck

ORIGINAL = "the original model itself"
LOWERED = "the model's original form (its quantgraph ops lowered back in memory)"
MODEL = "the model itself"


@dataclass(frozen=True)
class Generated:
    """The plan that ran (every case of it: one, or a decoder's prefill and decode step), its
    samples (per case, seeds ``seed``, ``seed + 1``, ...) with their names and specs, the
    model's outputs on the first, the plan's memory check and the search that found it (None:
    the first plan ran)."""

    cases: list[Case]
    samples: list[dict[str, np.ndarray]]
    names: list[str]
    plans: list[list[InputSpec]]  # the specs each sample was drawn from
    outputs: list[np.ndarray]
    memory: MemoryCheck
    search: InputSearch | None
    seed: int

    @property
    def specs(self) -> list[InputSpec]:
        """The first case's specs (most models have one case)."""
        return self.cases[0].specs

    @property
    def inputs(self) -> dict[str, dict[str, object]]:
        """The first case's inputs as reports describe them (dtype, shape, range, why,
        shape_from)."""
        return described(self.specs)

    @property
    def described_cases(self) -> dict[str, dict[str, dict[str, object]]] | None:
        """Each case's inputs by the case's name, for a model of several cases (a decoder)."""
        if len(self.cases) == 1:
            return None
        return {case.name: described(case.specs) for case in self.cases}


def described(specs: Sequence[InputSpec]) -> dict[str, dict[str, object]]:
    return {spec.name: spec.to_dict() for spec in specs}


def generate(
    model: ModelLike,
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    iterations: int = 1,
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
    search_timeout: float | None = DEFAULT_SEARCH_TIMEOUT,
    run: Run | None = None,
    outputs: Sequence[str] | None = None,
    original: ir.Model | None = None,
    label: str | None = None,
    message: Callable[[BaseException], str] | None = None,
    keep_all: bool = False,
) -> Generated:
    """Plan ``model``'s inputs and draw ``iterations`` samples (the module doc).

    ``run`` runs the model on feeds (default: a session made here) and ``outputs`` names its
    first results (checked for NaN and inf); ``original`` is the model whose NaN or inf an
    error explains (default: ``model``, its quantgraph ops lowered back). ``label`` names the
    model in errors, ``message`` words the runner's errors; ``keep_all``: every tensor is kept
    to the end of a run (the memory estimate counts them all)."""
    loaded = load_model(model)
    if label is None:
        label = _label(model, loaded)
    words = message or ort_message
    who = ORIGINAL if original is not None else _who(loaded)
    runner = _Lazy(loaded) if run is None else _Given(run, outputs or [])
    form = _OriginalForm(original, loaded)

    def checked(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        try:
            results = runner.run(feeds)
        except Exception as error:
            # quantgraph's ops refuse what the original computes as NaN (a DynamicQuantize's
            # NaN scale): a refusal of the inputs' values, as the original's NaN is
            text = None if original is not None else form.non_finite(feeds)
            if text is None:
                raise
            raise NonFinite(text) from error
        check_finite(runner.names, results[: len(runner.names)])  # raises NonFinite
        return results

    def explain(
        specs: Sequence[InputSpec], sample: Mapping[str, np.ndarray], refusal: BaseException
    ) -> tuple[str, str] | None:
        if not isinstance(refusal, NonFinite):
            return None  # refused for another reason: its own error says why
        reference = form.model()
        if reference is None:
            return None
        cause = find_cause(reference, sample, specs, memory_budget)
        if cause is None:
            return None
        return f"{who} {cause.text(specs)}", fix_hint(cause, specs)

    found = find_plan(
        loaded,
        checked,
        label=label,
        message=words,
        dims=dims,
        val_ranges=val_ranges,
        seed=seed,
        memory_budget=memory_budget,
        timeout=search_timeout,
        keep_all=keep_all,
        explain=explain,
    )
    samples, names, plans = [], [], []
    for index, case in enumerate(found.cases):
        for step in range(iterations):
            first = index == 0 and step == 0  # the sample the search ran
            samples.append(found.sample if first else draw(case.specs, seed + step))
            named = "" if case.name == GENERATED else f"{case.name}, "
            names.append(f"{named}seed {seed + step}")
            plans.append(case.specs)
    return Generated(
        found.cases, samples, names, plans, found.outputs, found.memory, found.search, seed
    )


def make_inputs(
    model: ModelLike,
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
    search_timeout: float | None = DEFAULT_SEARCH_TIMEOUT,
) -> dict[str, np.ndarray]:
    """Inputs for every fed input of ``model`` from a seed: the first sample validate, run,
    tune and bench generate for the same options (:mod:`.generated`)."""
    found = generate(
        model,
        seed=seed,
        dims=dims,
        val_ranges=val_ranges,
        memory_budget=memory_budget,
        search_timeout=search_timeout,
    )
    return found.samples[0]


def explain_failure(
    label: str,
    original: ir.Model,
    sample: Mapping[str, np.ndarray],
    specs: Sequence[InputSpec] | None,
    error: BaseException,
    words: Callable[[BaseException], str],
) -> ModelError | None:
    """When the rewritten model failed on ``sample`` (a DynamicQuantize refusing a NaN scale)
    where ``original`` already computes NaN or inf: the error that says so, else None."""
    cause = find_cause(original, sample, specs)
    if cause is None:
        return None
    if specs is not None:
        given, hint = "the generated inputs", fix_hint(cause, specs)
    else:  # inputs from files: no option changes them
        given = "the inputs given"
        named = ", ".join(f"'{name}'" for name in cause.inputs) or "the inputs"
        hint = f"look at the values of {named} in them"
    return ModelError(
        f"{label}: {ORIGINAL} {cause.text(specs)}, on {given} ({describe_feeds(sample)}); the "
        f"rewritten model stops on the same values ({words(error)}); {hint}"
    )


def non_finite_error(
    label: str,
    original: ir.Model,
    sample: Mapping[str, np.ndarray],
    specs: Sequence[InputSpec] | None,
    error: NonFinite,
) -> ModelError:
    """The original's outputs hold NaN or inf on a generated sample after the first."""
    cause = find_cause(original, sample, specs)
    said = cause.text(specs) if cause is not None else f"gives {error}"
    return ModelError(
        f"{label}: {ORIGINAL} {said}, on the generated inputs ({describe_feeds(sample)}); "
        f"{fix_hint(cause, specs)}"
    )


class _Given:
    """A caller's runner and the names of its first results."""

    def __init__(self, run: Run, names: Sequence[str]) -> None:
        self.run = run
        self.names = list(names)


class _Lazy:
    """A session of the model (quantgraph's ops unfused), made at the first run: a plan the
    options refuse fails before any session is made.

    At ORT_ENABLE_BASIC, without the memory arena: unfused, every DynamicDequantize of a weight
    writes it whole in float. onnxruntime runs nodes in priority order, ties by index, and a
    node its fusions make (ORT_ENABLE_EXTENDED and up) has a larger index than any in the file:
    every weight's dequantize, ready from the start, ran before the first of them (a converted
    1.1B decoder: 4.5 GiB resident at ORT_ENABLE_ALL, 1.0 at ORT_ENABLE_BASIC). Finding a plan
    whose outputs are finite needs no fusion."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._session: InferenceSession | None = None
        self.names: list[str] = []

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._session is None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.enable_cpu_mem_arena = False
            self._session = InferenceSession(self._model, options=options)
            self.names = [o.name for o in self._session.get_outputs()]
        return list(self._session.run(self.names, dict(feeds)))


def _who(model: ir.Model) -> str:
    return LOWERED if _holds_spec_ops(model) else MODEL


def _holds_spec_ops(model: ir.Model) -> bool:
    return any(True for _ in spec_nodes(model))


class _OriginalForm:
    """The model whose NaN or inf an error explains: the original when validation has it, else
    the model itself, its quantgraph ops lowered back in memory (made when first needed)."""

    def __init__(self, original: ir.Model | None, model: ir.Model) -> None:
        self._given = original
        self._model = model
        self._lowered: ir.Model | None = None
        self._tried = False
        self._session: Any = None

    def model(self) -> ir.Model | None:
        if self._given is not None:
            return self._given
        if not _holds_spec_ops(self._model):
            return self._model
        if not self._tried:
            self._tried = True
            from ...converter import lower

            try:
                self._lowered = lower(self._model, check=False).model
            except ModelError:
                self._lowered = None  # an op with no ONNX form: no explanation
        return self._lowered

    def non_finite(self, feeds: Mapping[str, np.ndarray]) -> str | None:
        """Where the lowered model's outputs hold NaN or inf on ``feeds``, None when they do
        not, or when the model holds no quantgraph ops (its own error is the answer)."""
        if not _holds_spec_ops(self._model):
            return None
        if self._session is None:
            lowered = self.model()
            if lowered is None:
                return None
            options = ort.SessionOptions()
            options.log_severity_level = 4
            self._session = ort_session(lowered, options)
        names = [o.name for o in self._session.get_outputs()]
        try:
            results = self._session.run(names, dict(feeds))
        except Exception:
            return None
        return non_finite_text(names, results)


def _label(model: ModelLike, loaded: ir.Model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    files = source_files(loaded)
    return str(files[0]) if files else "the model"


# "2 : INVALID_ARGUMENT : Non-zero status code returned while running Pad node. Name:'p' Status
# Message: why" says no more than "Pad node 'p': why".
_RUN_FAILURE = re.compile(r"^\d+ : \w+ : " + ORT_NODE.pattern)


def ort_message(error: BaseException) -> str:
    """onnxruntime's whole message on one line (its later lines say which dims differ),
    without its status prefix."""
    text = " ".join(str(error).split()) or type(error).__name__
    text = text.replace("[ONNXRuntimeError] : ", "")
    return _RUN_FAILURE.sub(lambda m: f"{m.group(1)} node '{m.group(2)}': ", text)
