"""Generated inputs: the one planner of every command that makes inputs (validate and
convert --validate, run, tune, bench --model) and of the API (:func:`make_inputs`): the same
model and options give the same inputs everywhere.

A plan (:mod:`.inputs`: sizes and value ranges from what the graph says) is tried on the model
before it is used: the first plan the model runs with finite outputs is the one, and a plan it
refuses, or on which it computes NaN or inf, is varied as :mod:`.search` says. Validation tries
its plans on the original; a command holding a session of the model (run) on that session;
anything else on a session of the model made here (unfused: quantgraph's ops compute what the
original's Q/DQ did, so a converted model takes the plans its original takes). When no plan
runs because the model computes NaN or inf, the error is the original's (:mod:`.non_finite`):
it names the tensor where it starts, the inputs that reach it and the options that change them;
for a model holding quantgraph's ops, the original is its ops lowered back in memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from ..errors import ModelError
from ..ir.model_files import ModelLike, load_model, source_files
from ..ir.walk import spec_nodes
from ..runtime.session import InferenceSession
from .inputs import InputSpec, describe_feeds, draw
from .non_finite import NonFinite, check_finite, find_cause, fix_hint
from .report import InputSearch, MemoryCheck
from .search import DEFAULT_MEMORY_BUDGET, DEFAULT_SEARCH_TIMEOUT, Run, find_plan

ORIGINAL = "the original model itself"
LOWERED = "the model's original form (its quantgraph ops lowered back in memory)"
MODEL = "the model itself"


@dataclass(frozen=True)
class Generated:
    """The plan that ran, its samples (seeds ``seed``, ``seed + 1``, ...), the model's outputs
    on the first, the plan's memory check and the search that found it (None: the first plan
    ran)."""

    specs: list[InputSpec]
    samples: list[dict[str, np.ndarray]]
    outputs: list[np.ndarray]
    memory: MemoryCheck
    search: InputSearch | None
    seed: int

    @property
    def inputs(self) -> dict[str, dict[str, object]]:
        """Each input as reports describe it (dtype, shape, range, why, shape_from)."""
        return {spec.name: spec.to_dict() for spec in self.specs}


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

    def checked(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        results = runner.run(feeds)
        check_finite(runner.names, results[: len(runner.names)])  # raises NonFinite
        return results

    def explain(
        specs: Sequence[InputSpec], sample: Mapping[str, np.ndarray], refusal: BaseException
    ) -> tuple[str, str] | None:
        if original is not None and not isinstance(refusal, NonFinite):
            return None  # the original ran and refused: its own error says why
        reference = original if original is not None else _original_form(loaded)
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
    samples = [found.sample, *(draw(found.specs, seed + i) for i in range(1, iterations))]
    return Generated(found.specs, samples, found.outputs, found.memory, found.search, seed)


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
    options refuse fails before any session is made."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._session: InferenceSession | None = None
        self.names: list[str] = []

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._session is None:
            self._session = InferenceSession(self._model)
            self.names = [o.name for o in self._session.get_outputs()]
        return list(self._session.run(self.names, dict(feeds)))


def _who(model: ir.Model) -> str:
    return LOWERED if _holds_spec_ops(model) else MODEL


def _holds_spec_ops(model: ir.Model) -> bool:
    return any(True for _ in spec_nodes(model))


def _original_form(model: ir.Model) -> ir.Model | None:
    """``model`` as plain onnxruntime runs it: itself, or its quantgraph ops lowered back in
    memory (None when they cannot all be)."""
    if not _holds_spec_ops(model):
        return model
    from ..converter import lower

    try:
        return lower(model, check=False).model
    except ModelError:
        return None


def _label(model: ModelLike, loaded: ir.Model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    files = source_files(loaded)
    return str(files[0]) if files else "the model"


# "2 : INVALID_ARGUMENT : Non-zero status code returned while running Pad node. Name:'p' Status
# Message: why" says no more than "Pad node 'p': why".
_RUN_FAILURE = re.compile(
    r"^\d+ : \w+ : Non-zero status code returned while running (\w+) node\. "
    r"Name:'([^']*)' Status Message: "
)


def ort_message(error: BaseException) -> str:
    """onnxruntime's whole message on one line (its later lines say which dims differ),
    without its status prefix."""
    text = " ".join(str(error).split()) or type(error).__name__
    text = text.replace("[ONNXRuntimeError] : ", "")
    return _RUN_FAILURE.sub(lambda m: f"{m.group(1)} node '{m.group(2)}': ", text)
