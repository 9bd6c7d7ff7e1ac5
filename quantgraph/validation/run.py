"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently: ``optimized=True``,
judged by a tolerance apart from the exact one. Converted integer ops (integer_sums), QOperator
nodes (qoperator) and unfused nodes the original runs with another kernel (other_kernels) are
judged like with like: against a copy of the original in the arithmetic the spec form means
(like_reference), by a bound the model gives (rounding_spread), or by --atol/--rtol.

validate's steps, each in a module of its own: what it refuses before anything runs
(early_checks.py), what is compared (comparison_setup.py), the original's side, one session at
a time (original_runs.py, original.py; the bound's runs in bound_runs.py), the rewritten
model's side (rewritten_runs.py), the verdict's words (comparison_text.py) and the tensors
compared (tensors_compared.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from ..errors import ModelError
from ..fusion.plan import ONEDNN
from ..ir.model_files import ModelLike, load_model, source_files
from ..reference.compare import TensorComparison
from ..runtime.session import InferenceSession
from .bound_runs import bound_in_own_session
from .compare import given_back
from .compare.error_stats import quantization_steps
from .compare.judge import Judge
from .compare.rounding_spread import SpreadBound
from .comparison_setup import Setup, comparison_setup
from .comparison_text import describe_comparison
from .debug.debugger import from_run
from .early_checks import check_tolerance, same_inputs
from .generation.greedy import check_generation, run_generation
from .inputs import feeds
from .inputs.generated import generate as generate_inputs  # validate's `generate`: a step count
from .inputs.generated import ort_message
from .inputs.search import DEFAULT_MEMORY_BUDGET, DEFAULT_SEARCH_TIMEOUT
from .onednn import onednn_reference
from .onednn.partitions import Partitions
from .options import InputOptionError, memory_budget_bytes
from .original import Original, Progress, run_all
from .original_runs import OriginalRuns, as_run, reference_runs
from .report import DEFAULT_MIN_SQNR, ValidationReport
from .rewritten_runs import fetched_names, rewritten_session, run_rewritten
from .roles import check_roles
from .tensors_compared import aggregate, error_stats, intermediate_report

InputsArg = feeds.Given


def load_inputs(
    path: str | os.PathLike[str], model: ModelLike | None = None
) -> dict[str, np.ndarray]:
    """One sample: an .npz of arrays by input name, or with ``model`` a .npy for its only input;
    checked against ``model``'s inputs when given (see
    :mod:`quantgraph.validation.inputs.feeds`)."""
    return feeds.read(path, None if model is None else feeds.expected_inputs(load_model(model)))


def input_samples(inputs: InputsArg, model: ModelLike | None = None) -> list[dict[str, np.ndarray]]:
    """Feeds from a mapping, an .npz or .npy, several, or a directory of them (see
    :mod:`quantgraph.validation.inputs.feeds`); checked against ``model``'s inputs when given."""
    expected = None if model is None else feeds.expected_inputs(load_model(model))
    return [sample for _, sample in feeds.samples(inputs, expected)]


def validate(
    original: ModelLike,
    rewritten: ModelLike,
    *,
    inputs: InputsArg | None = None,
    backend: str | None = None,
    arithmetic: str | None = None,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    iterations: int = 1,
    optimized: bool = False,
    intermediate: bool = False,
    atol: float = 0.0,
    rtol: float = 0.0,
    fusion: str = "none",
    progress: Progress | None = None,
    memory_budget: int | str | None = DEFAULT_MEMORY_BUDGET,
    search_timeout: float | None = DEFAULT_SEARCH_TIMEOUT,
    sensitivity: int | None = None,
    generate: int | None = None,
    prompt_tokens: int | None = None,
    min_sqnr: float | None = None,
) -> ValidationReport:
    """Compare ``original`` (at ORT_DISABLE_ALL) with ``rewritten`` on one backend.

    Inputs: ``inputs`` (a mapping, an .npz, several, or a directory of them), else
    ``iterations`` seeded samples generated from what the graph says
    (:mod:`quantgraph.validation.inputs.plan`; ``dims`` keys are symbolic names or
    ``"INPUT:AXIS"``), searching other plans when the original refuses the first
    (:mod:`quantgraph.validation.inputs.search`; the report's ``input_search``): no plan whose
    estimated memory (:mod:`quantgraph.validation.inputs.memory`) exceeds ``memory_budget``
    (bytes, or a size such as ``"2GiB"``; None: no budget) runs, and the search stops after
    ``search_timeout`` seconds (None: never).
    ``optimized`` also compares the original at ORT_ENABLE_ALL, judged by ``atol``/``rtol``
    (the exact verdict is untouched). ``intermediate`` compares every tensor both models
    compute under one name and reports the first node where they part. ``fusion``: the
    rewritten model's fusion mode (:mod:`quantgraph.fusion`); with "onnxruntime" both sides
    run at ORT_ENABLE_ALL, where its units are onnxruntime's fused kernels on both sides, and
    the comparison is still exact. ``progress``, when given, is told each session being made
    and each sample run (:data:`Progress`). Against a float original, ``intermediate`` also
    measures the error each quantized tensor and node introduces
    (:mod:`quantgraph.validation.debug.debugger`), and ``sensitivity`` K reruns the K worst
    places kept in float (implies ``intermediate``).
    Unfused, where onnxruntime runs the original with kernels of another arithmetic
    (MatMulNBits, float16 Cast chains, integer ops, QOperator nodes), the original is evaluated
    as a like-with-like copy (:mod:`quantgraph.validation.compare.like_reference`; the original
    as run is compared beside, ``report.as_run``) and, unless ``atol``/``rtol`` are given, each
    output is judged by a bound the model gives
    (:mod:`quantgraph.validation.compare.rounding_spread`; ``report.bound``).
    A float original against its quantized form is judged by each output's SQNR, at least
    ``min_sqnr`` dB (default :data:`.report.DEFAULT_MIN_SQNR`; with ``atol``/``rtol`` and no
    ``min_sqnr``, by the tolerances alone).
    When the original is a decoder (:mod:`quantgraph.validation.inputs.decoder`), both models
    also generate greedily (:mod:`quantgraph.validation.generation.greedy`): a prompt of
    ``prompt_tokens`` ids from ``seed`` (default 16), the prefill, then ``generate`` steps
    (default 8; 0: none), compared step by step (the report's ``generation``).
    """
    if iterations < 1:
        raise ModelError("--iterations must be at least 1")
    budget = memory_budget_bytes(memory_budget)
    if search_timeout is not None and not search_timeout > 0:
        raise InputOptionError("--search-timeout", f"{search_timeout}: must be more than 0 s")
    tell = progress or _silent
    intermediate = intermediate or bool(sensitivity)
    tolerance = (atol, rtol)
    source = Original(original)
    rewritten_ir = load_model(rewritten)
    rewritten_label = _label(rewritten, rewritten_ir, "the rewritten model")
    check_roles(source.ir, rewritten_ir, source.label, rewritten_label)
    same_inputs(source.ir, rewritten_ir, (source.label, rewritten_label))
    generation = check_generation(source.ir, generate, prompt_tokens, source.label)
    check_tolerance(
        source.ir, rewritten_ir, backend, arithmetic, fusion, optimized, atol, rtol, min_sqnr
    )
    tell("original", 0, iterations)
    setup = comparison_setup(source, rewritten_ir, backend, arithmetic, fusion, intermediate)
    draw = partial(  # samples generated where no inputs are given
        generate_inputs,
        seed=seed,
        dims=dims,
        val_ranges=val_ranges,
        iterations=iterations,
        memory_budget=budget,
        search_timeout=search_timeout,
        keep_all=intermediate,
    )
    ran = reference_runs(
        source, rewritten_ir, setup, inputs, draw, seed, generation, sensitivity, tolerance, tell
    )  # the reference's session gone: one session of the original at a time
    ran.as_run = as_run(source, setup, ran, tell)  # gone too before the rewritten model's
    samples = ran.fed.samples

    tell("rewritten", 0, len(samples))
    # oneDNN's partitions: exposed only once planned (exposed before, no unit would form), and
    # each checked alone against the spec composition (not against a float original).
    parts = Partitions(fusion == ONEDNN) if intermediate and setup.onednn_fused else None
    parts = None if setup.float_reference else parts
    candidate = rewritten_session(
        rewritten, rewritten_ir, setup, backend, arithmetic, intermediate, samples[0], parts
    )
    reference_arithmetic = "onnx" if setup.reference is None else onednn_reference.ONEDNN
    if given_back.all_given_back(rewritten_ir, fusion, candidate.fusion_plan):
        setup = setup.given_back(rewritten_ir)  # the original's own nodes run on both sides
    exact = candidate.arithmetic == reference_arithmetic and not setup.float_reference
    exact = exact and not setup.onednn_fused and not setup.judged
    common, fetched = fetched_names(
        candidate, rewritten_ir, setup, ran.outputs, ran.tensor_names, parts
    )
    actual = run_rewritten(candidate, fetched, samples, ran.fed.plans, source, tell)

    bound = ran.bound
    if setup.judged and not (atol or rtol) and bound is None:  # a bound the model gives
        bound = bound_in_own_session(
            source, setup, rewritten_ir, ran.outputs, ran.declared, samples, tell
        )
    judge = Judge(None if exact else tolerance, bound)  # the one rule of outputs, generation
    report = _report(
        source, rewritten_ir, rewritten_label, setup, ran, candidate, actual, exact, judge,
        bound, reference_arithmetic, tolerance, min_sqnr, inputs_given=inputs is not None,
    )  # fmt: skip
    tensor_steps = {**quantization_steps(rewritten_ir.graph), **quantization_steps(source.ir.graph)}
    _add_comparisons_beside(report, source, ran, common, actual, tensor_steps, tolerance, bound)
    if generation is not None:
        report.generation = run_generation(
            generation,
            ran.generated if ran.generated is not None else candidate.run,  # None: unfit, none runs
            candidate.run,
            judge,
            seed=seed,
            logits_type=ran.declared.get(generation.signature.logits),
            labels=(source.label, rewritten_label),
            message=ort_message,
            tell=lambda side, done, total: tell(f"generation {side}", done, total),
        )
    if optimized:
        report.optimized = _optimized(source, ran, actual, tolerance, tell)
    if intermediate:
        _add_intermediate(
            report, source, rewritten_ir, setup, ran, common, fetched, actual, candidate, parts,
            sensitivity, tensor_steps, tell,
        )  # fmt: skip
    return report


def _report(
    source: Original,
    rewritten: ir.Model,
    rewritten_label: str,
    setup: Setup,
    ran: OriginalRuns,
    candidate: InferenceSession,
    actual: list[list[np.ndarray]],
    exact: bool,
    judge: Judge,
    bound: SpreadBound | None,
    reference_arithmetic: str,
    tolerance: tuple[float, float],
    min_sqnr: float | None,
    inputs_given: bool,
) -> ValidationReport:
    """The report of what was compared and each output's verdict by ``judge``."""
    atol, rtol = tolerance
    fusion, samples = setup.fusion, ran.fed.samples
    if setup.float_reference and not setup.qop and min_sqnr is None and not (atol or rtol):
        min_sqnr = DEFAULT_MIN_SQNR  # a float original: judged by each output's SQNR
    comparison, note = describe_comparison(setup, candidate, exact, bound, tolerance, min_sqnr)
    n_out = len(ran.outputs)
    return ValidationReport(
        comparison=comparison,
        comparison_note=note,
        backend=candidate.backend,
        arithmetic=candidate.arithmetic,
        engine=candidate.onednn_version,
        outputs=aggregate(
            ran.outputs,
            ran.declared,
            [e[:n_out] for e in ran.expected],
            [a[:n_out] for a in actual],
            judge=judge,
        ),
        inputs=ran.fed.described,
        seed=ran.fed.seed,
        sample_names=ran.fed.names,
        cases=ran.fed.cases,
        samples=len(samples),
        tolerance=tolerance,
        input_search=ran.fed.search,
        memory=ran.fed.memory,
        float_reference=setup.float_reference,
        integer_sums=setup.integer,
        qoperator=setup.qop,
        other_kernels=setup.kernels,
        fusion=fusion,
        fusion_plan=candidate.fusion_plan if fusion != "none" else None,
        like_reference=setup.like if setup.judged else None,
        bound=bound,
        reference_arithmetic=reference_arithmetic,
        original=source.label,
        rewritten=rewritten_label,
        model_files=(*source_files(source.ir), *source_files(rewritten)),
        min_sqnr=min_sqnr if setup.float_reference else None,
        inputs_given=inputs_given,
    )


def _add_comparisons_beside(
    report: ValidationReport,
    source: Original,
    ran: OriginalRuns,
    common: list[str],
    actual: list[list[np.ndarray]],
    tensor_steps: Mapping[str, float],
    tolerance: tuple[float, float],
    bound: SpreadBound | None,
) -> None:
    """How the differences spread, and the rewritten model beside the original in ONNX's
    arithmetic (where oneDNN's is the reference) and as onnxruntime runs it (where a
    like-with-like copy is)."""
    outputs, declared, n_out = ran.outputs, ran.declared, len(ran.outputs)
    index = {name: i for i, name in enumerate(ran.wanted)}
    report.error_stats = error_stats(
        outputs + common,
        declared,
        [[e[index[n]] for n in outputs + common] for e in ran.expected],
        actual,
        tensor_steps,
    )
    if ran.onnx_expected:
        first_outputs = [[e[index[n]] for n in outputs] for e in ran.onnx_expected]
        report.onnx_arithmetic = aggregate(
            outputs, declared, first_outputs, [a[:n_out] for a in actual], tolerance=tolerance
        )
        steps = quantization_steps(source.ir.graph)
        apart = error_stats(outputs, declared, first_outputs, actual, steps)
        report.onnx_arithmetic_steps = {name: apart[name].max_steps for name in outputs}
    if ran.as_run is not None:  # the original as onnxruntime runs it, beside the verdict
        report.as_run = aggregate(
            outputs,
            declared,
            ran.as_run,
            [a[:n_out] for a in actual],
            judge=Judge(tolerance, bound),
        )


def _optimized(
    source: Original,
    ran: OriginalRuns,
    actual: list[list[np.ndarray]],
    tolerance: tuple[float, float],
    tell: Progress,
) -> list[TensorComparison]:
    """The rewritten model's outputs against the original at ORT_ENABLE_ALL (onnxruntime's
    integer kernels), judged by ``tolerance``."""
    samples, n_out = ran.fed.samples, len(ran.outputs)
    tell("optimized", 0, len(samples))
    fused = source.session(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    fused_out = run_all(fused, ran.outputs, samples, source.label, tell, "optimized")
    return aggregate(
        ran.outputs, ran.declared, fused_out, [a[:n_out] for a in actual], tolerance=tolerance
    )


def _add_intermediate(
    report: ValidationReport,
    source: Original,
    rewritten: ir.Model,
    setup: Setup,
    ran: OriginalRuns,
    common: list[str],
    fetched: list[str],
    actual: list[list[np.ndarray]],
    candidate: InferenceSession,
    parts: Partitions | None,
    sensitivity: int | None,
    tensor_steps: Mapping[str, float],
    tell: Progress,
) -> None:
    """Every tensor both compute under one name, the first node where they part; against a
    float original each quantized place's own error; oneDNN's partitions each alone."""
    n_out = len(ran.outputs)
    index = {name: i for i, name in enumerate(ran.wanted)}
    pairs = [
        ([e[index[n]] for n in common], a[n_out:])
        for e, a in zip(ran.expected, actual, strict=True)
    ]
    compared = aggregate(common, ran.declared, [p[0] for p in pairs], [p[1] for p in pairs])
    report.intermediate = intermediate_report(source.ir, rewritten, compared)
    samples = ran.fed.samples
    if setup.float_reference:
        report.debug = from_run(
            rewritten,
            samples,
            ran.wanted,
            ran.expected,
            ran.outputs,
            actual,
            sensitivity,
            source.ir,
            tell,
        )
    if parts is not None and parts.checked and setup.exposed is not None:
        spec = source.session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, setup.exposed)
        parts.run(spec, samples, [dict(zip(fetched, a, strict=True)) for a in actual])
        report.intermediate.partitions = parts.checks(candidate.fusion_plan, tensor_steps)


def _silent(stage: str, done: int, total: int) -> None:
    pass


def _label(model: ModelLike, loaded: ir.Model, default: str) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    files = source_files(loaded)
    return str(files[0]) if files else default
