"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently: ``optimized=True``,
judged by a tolerance apart from the exact one. Converted integer ops (integer_sums), QOperator
nodes (qoperator) and unfused nodes the original runs with another kernel (other_kernels) are
judged like with like: against a copy of the original in the arithmetic the spec form means
(like_reference), by a bound the model gives (rounding_spread), or by --atol/--rtol.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..backends.ort_sessions import ort_session
from ..errors import ModelError
from ..fusion.plan import AUTO, ONEDNN, ONNXRUNTIME, PARTITION_MODES
from ..ir.model_files import ModelLike, load_model, source_files
from ..ir.opsets import check_opset
from ..reference.compare import TensorComparison, merge, typed
from ..runtime.session import InferenceSession
from .compare import given_back, integer_sums, other_kernels, qoperator, rounding_spread
from .compare.error_stats import ErrorStats, has_quantization, quantization_steps
from .compare.judge import Judge
from .compare.like_reference import LikeReference, like_reference
from .debug.debugger import from_run
from .debug.intermediate import after_quantization, producers, with_all_outputs
from .generation.greedy import check_generation, generate_side, run_generation
from .inputs import feeds
from .inputs.generated import explain_failure, non_finite_error
from .inputs.generated import generate as generate_inputs  # validate's `generate` is a step count
from .inputs.generated import ort_message as _ort_message
from .inputs.non_finite import NonFinite, check_finite
from .inputs.plan import InputSpec, describe_feeds
from .inputs.search import DEFAULT_MEMORY_BUDGET, DEFAULT_SEARCH_TIMEOUT, HINT
from .inputs.search_report import InputSearch, MemoryCheck
from .onednn import onednn_reference
from .onednn.partitions import Partitions
from .options import InputOptionError, memory_budget_bytes
from .report import (
    DEFAULT_MIN_SQNR,
    EXACT,
    EXACT_NOTE,
    FUSED,
    FUSED_NOTE,
    FUSED_ONEDNN,
    FUSED_ONEDNN_NOTE,
    ONEDNN_ARITHMETIC,
    ONEDNN_LIKE,
    ONEDNN_LIKE_NOTE,
    ONEDNN_NOTE,
    QUANTIZATION_ERROR,
    QUANTIZATION_NOTE,
    Divergence,
    IntermediateReport,
    ValidationReport,
)
from .roles import check_roles

InputsArg = Mapping[str, np.ndarray] | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
# progress(stage, done, total): stage "original", "reference", "rewritten", "spread" (the bound),
# "as run" (the original beside a like-with-like reference) or "optimized"; done 0: loading;
# "search": done = the plan of inputs tried (total 0: not known); "nodes": each quantized
# node's own error being measured; "sensitivity": done of total reruns.
Progress = Callable[[str, int, int], None]

# onnxruntime's type strings ("tensor(float8e4m3fn)") and the ONNX element types they name.
ELEM_TYPES = {
    f"tensor({onnx.TensorProto.DataType.Name(t).lower()})": int(t)
    for t in onnx.TensorProto.DataType.values()
    if t != onnx.TensorProto.UNDEFINED
}


def quiet_options(level: ort.GraphOptimizationLevel) -> ort.SessionOptions:
    """Session options whose onnxruntime log lines never reach the terminal (errors arrive as
    exceptions, which quantgraph reports in one line)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 4
    return options


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
    return [sample for _, sample in _samples(inputs, expected)]


def _samples(
    inputs: InputsArg, expected: Sequence[feeds.Expected] | None
) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(where each sample came from, the sample)."""
    if isinstance(inputs, Mapping):
        sample = dict(inputs)
        if expected is not None:
            feeds.check(sample, expected, "inputs")
        return [("inputs", sample)]
    return [(str(path), feeds.read(path, expected)) for path in feeds.files_of(inputs)]


class _Original:
    """The original model: its IR (to plan inputs and name nodes) and onnxruntime sessions."""

    def __init__(self, model: ModelLike) -> None:
        self.ir = load_model(model)
        check_opset(self.ir, model)
        files = source_files(self.ir)
        self.path: Path | None = files[0] if files else None
        self.label = f"{model}" if isinstance(model, (str, os.PathLike)) else "the original"
        if self.path is not None and self.label == "the original":
            self.label = str(self.path)

    def session(
        self,
        level: ort.GraphOptimizationLevel,
        exposed: ir.Model | onnx.ModelProto | None = None,
    ) -> ort.InferenceSession:
        """A session on the original, or on ``exposed`` (a copy of it: the like-with-like
        reference, all tensors exposed), whose external weights are the original's."""
        options = quiet_options(level)
        try:
            if exposed is not None:
                return ort_session(exposed, options, origin=self.ir)
            if self.path is not None:  # onnxruntime reads the file (and its weights) itself
                return ort_session(self.path, options)
            return ort_session(self.ir, options)
        except Exception as error:
            raise ModelError(
                f"{self.label}: onnxruntime cannot load the original: {_ort_message(error)}"
            ) from None


def _run(
    session: ort.InferenceSession, names: list[str], feeds: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    return list(session.run(names, dict(feeds)))


class _Reference:
    """The reference's session; that of its noisy copy
    (:mod:`quantgraph.validation.compare.rounding_spread`) runs with the noise off, bit for bit
    the reference."""

    def __init__(self, session: ort.InferenceSession, noisy: bool) -> None:
        self.session = session
        self._fixed = {rounding_spread.SWITCH: np.array(False)} if noisy else {}

    def get_outputs(self) -> list[ort.NodeArg]:
        return list(self.session.get_outputs())

    def run(self, names: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return list(self.session.run(list(names), {**feeds, **self._fixed}))


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
    source = _Original(original)
    rewritten_ir = load_model(rewritten)
    rewritten_label = _label(rewritten, rewritten_ir, "the rewritten model")
    check_roles(source.ir, rewritten_ir, source.label, rewritten_label)
    _same_inputs(source, rewritten_ir, rewritten_label)
    generation = check_generation(source.ir, generate, prompt_tokens, source.label)
    check_tolerance(
        source.ir, rewritten_ir, backend, arithmetic, fusion, optimized, atol, rtol, min_sqnr
    )
    tell("original", 0, iterations)
    float_reference = not has_quantization(source.ir.graph) and has_quantization(rewritten_ir.graph)
    like = _like(source.ir, rewritten_ir, fusion, float_reference)
    if intermediate:
        exposed, tensor_names = with_all_outputs(
            _copy(like.proto) if like else source.ir, base=source.ir
        )
    else:
        exposed, tensor_names = None, []
    level = (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if fusion == "none"
        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    reference = onednn_reference.for_validation(
        source.ir, source.label, float_reference, backend, arithmetic, fusion,
        quiet_options(level), intermediate,
    )  # fmt: skip
    onednn_fused = fusion in PARTITION_MODES
    integer = integer_sums.converted(rewritten_ir) and not float_reference and not onednn_fused
    qop = qoperator.qoperator_ops(source.ir.graph, rewritten_ir.graph)  # integer kernels
    kernels = [] if float_reference or qop else other_kernels.differing(rewritten_ir, fusion)
    # Where no fusion plan can give the original's nodes back (given_back: fusion
    # "onnxruntime"), whether a bound is needed is known now: the reference is then its noisy
    # copy with the noise off (bit for bit the reference: rounding_spread.with_noise), one
    # session (one copy of the weights) for the reference's outputs, the bound's runs and the
    # generation, gone before the rewritten model's session is made.
    noisy_sites = None
    reference_model = exposed or (like.proto if like else None)
    bound_now = (qop or integer or kernels) and not (atol or rtol) and fusion != ONNXRUNTIME
    if bound_now and exposed is None and reference is None:
        base = like.proto if like is not None else ir.to_proto(source.ir)
        noisy_sites = rounding_spread.sites(base, rewritten_ir, integer, kernels, bool(qop))
        reference_model = rounding_spread.with_noise(base, noisy_sites)
    session = _Reference(source.session(level, reference_model), noisy_sites is not None)
    outputs = [o.name for o in session.get_outputs()][: len(source.ir.graph.outputs)]
    declared = {o.name: ELEM_TYPES.get(o.type) for o in session.get_outputs()}
    tensor_names = [n for n in tensor_names if n not in outputs]
    if sensitivity and not float_reference:
        raise ModelError(
            f"--sensitivity needs a float ORIGINAL and its quantized form as REWRITTEN: "
            f"ORIGINAL ({source.label}) is quantized"
        )
    if reference is not None:  # compare the tensors both compute under one name
        tensor_names = [n for n in tensor_names if n in reference.names]
    wanted = outputs + tensor_names

    if inputs is not None:
        given = _samples(inputs, feeds.expected_inputs(source.ir))
        samples = [sample for _, sample in given]
        described = feeds.described_given(samples[0])
        used_seed: int | None = None
        plans: list[list[InputSpec] | None] = [None] * len(samples)  # files: no specs
        names = [origin for origin, _ in given]
        cases = None
        search: InputSearch | None = None
        memory: MemoryCheck | None = None
        expected = _run_all(
            session,
            wanted,
            [s for _, s in given],
            source.label,
            tell,
            "original",
            origins=[f for f, _ in given],
        )
    else:
        plans_tried = iter(range(1 << 30))
        run_original = partial(_run, session, wanted)  # bound now: the session goes later

        def attempt(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            tried = next(plans_tried)
            if tried:  # the first plan refused (or over the budget): the search is on
                tell("search", tried, 0)
            return run_original(feeds)

        found = generate_inputs(
            source.ir,
            run=attempt,
            outputs=outputs,
            original=source.ir,
            label=source.label,
            message=_ort_message,
            seed=seed,
            dims=dims,
            val_ranges=val_ranges,
            iterations=iterations,
            memory_budget=budget,
            search_timeout=search_timeout,
            keep_all=intermediate,
        )
        search, memory = found.search, found.memory
        samples, names, cases = found.samples, found.names, found.described_cases
        plans = list(found.plans)
        tell("original", 1, len(samples))
        later = _run_all(session, wanted, samples[1:], source.label, tell, "original", done=1)
        for sample, specs, results in zip(samples[1:], found.plans[1:], later, strict=True):
            try:
                check_finite(outputs, results[: len(outputs)])
            except NonFinite as error:
                raise non_finite_error(source.label, source.ir, sample, specs, error) from None
        expected = [found.outputs, *later]
        described = found.inputs
        used_seed = seed
        del run_original, attempt  # they hold the session: it goes below
    n_out = len(outputs)
    bound = None
    if noisy_sites is not None:  # the bound's noisy runs, on the reference's own session
        bound = _spread_bound(source, noisy_sites, partial(_run, session.session, outputs),
                              outputs, declared, samples, [e[:n_out] for e in expected],
                              tell)  # fmt: skip
    onnx_expected: list[list[np.ndarray]] = []
    if reference is not None:
        tell("reference", 0, len(samples))
        onnx_expected, expected = expected, []
        for done, sample in enumerate(samples, 1):
            expected.append(reference.run(wanted, sample))
            tell("reference", done, len(samples))
    generated = None
    if generation is not None:  # the original's side, while its session is here
        generated = generate_side(
            generation,
            reference.run if reference is not None else session.run,
            seed=seed,
            label=source.label,
            message=_ort_message,
            tell=lambda side, done, total: tell(f"generation {side}", done, total),
        )
    # Its outputs are in hand: the original's session (its copy of the weights) goes before
    # any other is made, or both would hold the weights at once.
    del session
    as_run_out = None
    if like is not None and (qop or integer or kernels):  # fusion "none": nothing given back
        tell("as run", 0, len(samples))  # the original as onnxruntime runs it, one session
        as_run = source.session(level)
        as_run_out = _run_all(as_run, outputs, samples, source.label, tell, "as run")
        del as_run
    tell("rewritten", 0, len(samples))
    # oneDNN's partitions: exposed only once planned (exposed before, no unit would form), and
    # each checked alone against the spec composition (not against a float original).
    parts = Partitions(fusion == ONEDNN) if intermediate and onednn_fused else None
    parts = None if float_reference else parts
    candidate_model: ModelLike = rewritten
    if intermediate and not onednn_fused:
        candidate_model = with_all_outputs(rewritten_ir)[0]
    candidate_options = quiet_options(level)
    # Unfused, every DynamicDequantize writes a whole float weight; onnxruntime's arena would
    # keep the largest of them all for the session's life (1.1B decoder: peak 1.94 -> 1.66 GiB,
    # under 2x its weights file; CPU +4%). Validation runs are not timed.
    candidate_options.enable_cpu_mem_arena = False
    candidate = InferenceSession(
        candidate_model,
        backend,
        arithmetic=arithmetic,
        options=candidate_options,
        fusion=fusion,
        tune_inputs=samples[0] if fusion == AUTO else None,  # decided before outputs are named
        after_fusion=None if parts is None else parts.after_fusion,
    )
    reference_arithmetic = "onnx" if reference is None else onednn_reference.ONEDNN
    same_arithmetic = candidate.arithmetic == reference_arithmetic
    if given_back.all_given_back(rewritten_ir, fusion, candidate.fusion_plan):
        integer, qop = False, []  # the original's own nodes run on both sides
        kernels = [] if float_reference else other_kernels.differing(rewritten_ir, fusion)
    exact = same_arithmetic and not float_reference and not onednn_fused
    exact = exact and not integer and not qop and not kernels
    candidate_names = {o.name for o in candidate.get_outputs()}
    alias = after_quantization(rewritten_ir.graph) if float_reference else {}
    common = [n for n in tensor_names if alias.get(n, n) in candidate_names]
    fetched = outputs + [alias.get(n, n) for n in common]
    fetched += [n for n in (parts.outputs if parts else []) if n not in fetched]
    actual = []
    for done, (sample, plan) in enumerate(zip(samples, plans, strict=True), 1):
        try:
            actual.append(candidate.run(fetched, sample))
        except Exception as error:  # the original's NaN or inf, refused: the original's error
            explained = explain_failure(source.label, source.ir, sample, plan, error, _ort_message)
            if explained is None:
                raise
            raise explained from None
        tell("rewritten", done, len(samples))

    backend_name = candidate.backend
    judged = bool(qop or integer or kernels)
    if judged and not (atol or rtol) and bound is None:  # a bound the model gives
        base = like.proto if like is not None else ir.to_proto(source.ir)
        found_sites = rounding_spread.sites(base, rewritten_ir, integer, kernels, bool(qop))
        tell("spread", 0, len(samples))
        noisy = source.session(level, rounding_spread.with_noise(base, found_sites))
        bound = _spread_bound(source, found_sites, partial(_run, noisy, outputs), outputs,
                              declared, samples, None, tell)  # fmt: skip
        del noisy
    judged_text = (
        "judged per output by a bound the model gives (bound: its own spread under rounding noise)"
        if bound is not None
        else f"judged by atol={atol:g}, rtol={rtol:g} as given"
    )
    original_text = like.describe() if like is not None and judged else "original"
    if qop:
        comparison, note = qoperator.comparison(
            qop, backend_name, fusion, original_text, judged_text
        )
    elif float_reference:
        if min_sqnr is None and not (atol or rtol):
            min_sqnr = DEFAULT_MIN_SQNR
        judged_by = "--atol/--rtol" if min_sqnr is None else "each output's SQNR (--min-sqnr)"
        comparison = QUANTIZATION_ERROR.format(backend=backend_name, judged=judged_by)
        note = QUANTIZATION_NOTE
    elif onednn_fused:
        from ..backends import onednn

        comparison = FUSED_ONEDNN.format(
            fusion=fusion, backend=backend_name, engine=onednn.version()
        )
        note = FUSED_ONEDNN_NOTE
    elif integer:
        comparison, note = integer_sums.comparison(backend_name, fusion, original_text, judged_text)
    elif kernels:
        comparison, note = other_kernels.comparison(
            kernels, backend_name, original_text, judged_text
        )
    elif exact and reference is not None:
        comparison = ONEDNN_LIKE.format(
            engine=candidate.onednn_version or "oneDNN's arithmetic on the native backend",
            level="ORT_DISABLE_ALL" if fusion == "none" else f"ORT_ENABLE_ALL (fusion '{fusion}')",
        )
        note = ONEDNN_LIKE_NOTE
    elif exact and fusion != "none":
        comparison, note = FUSED.format(fusion=fusion, backend=backend_name), FUSED_NOTE
    elif exact:
        comparison, note = EXACT.format(backend=backend_name), EXACT_NOTE
    else:
        engine = candidate.onednn_version or "oneDNN's arithmetic on the native backend"
        comparison, note = ONEDNN_ARITHMETIC.format(engine=engine), ONEDNN_NOTE
        if not onednn_reference.available():
            note += f"; {onednn_reference.UNAVAILABLE}"
        if fusion != "none":
            comparison = comparison.replace(
                "both at ORT_DISABLE_ALL", f"both at ORT_ENABLE_ALL (fusion '{fusion}')"
            )
            note += (
                f"; fusion '{fusion}': onnxruntime's fused kernels run the units on both sides, "
                "the spec ops it does not fuse run on the rewritten side's backend"
            )
    judge = Judge(None if exact else (atol, rtol), bound)  # the one rule of outputs, generation
    report = ValidationReport(
        comparison=comparison,
        comparison_note=note,
        backend=candidate.backend,
        arithmetic=candidate.arithmetic,
        engine=candidate.onednn_version,
        outputs=_aggregate(
            outputs,
            declared,
            [e[:n_out] for e in expected],
            [a[:n_out] for a in actual],
            judge=judge,
        ),
        inputs=described,
        seed=used_seed,
        sample_names=names,
        cases=cases,
        samples=len(samples),
        tolerance=(atol, rtol),
        input_search=search,
        memory=memory,
        float_reference=float_reference,
        integer_sums=integer,
        qoperator=qop,
        other_kernels=kernels,
        fusion=fusion,
        fusion_plan=candidate.fusion_plan if fusion != "none" else None,
        like_reference=like if judged else None,
        bound=bound,
        reference_arithmetic=reference_arithmetic,
        original=source.label,
        rewritten=rewritten_label,
        model_files=(*source_files(source.ir), *source_files(rewritten_ir)),
        min_sqnr=min_sqnr if float_reference else None,
        inputs_given=inputs is not None,
    )
    index = {name: i for i, name in enumerate(wanted)}
    tensor_steps = {**quantization_steps(rewritten_ir.graph), **quantization_steps(source.ir.graph)}
    report.error_stats = _error_stats(
        outputs + common,
        declared,
        [[e[index[n]] for n in outputs + common] for e in expected],
        actual,
        tensor_steps,
    )
    if onnx_expected:
        first_outputs = [[e[index[n]] for n in outputs] for e in onnx_expected]
        report.onnx_arithmetic = _aggregate(
            outputs, declared, first_outputs, [a[:n_out] for a in actual], tolerance=(atol, rtol)
        )
        steps = quantization_steps(source.ir.graph)
        apart = _error_stats(outputs, declared, first_outputs, actual, steps)
        report.onnx_arithmetic_steps = {name: apart[name].max_steps for name in outputs}
    if as_run_out is not None:  # the original as onnxruntime runs it, beside the verdict
        report.as_run = _aggregate(
            outputs,
            declared,
            as_run_out,
            [a[:n_out] for a in actual],
            judge=Judge((atol, rtol), bound),
        )
    if generation is not None:
        report.generation = run_generation(
            generation,
            generated if generated is not None else candidate.run,  # None: unfit, none runs
            candidate.run,
            judge,
            seed=seed,
            logits_type=declared.get(generation.signature.logits),
            labels=(source.label, rewritten_label),
            message=_ort_message,
            tell=lambda side, done, total: tell(f"generation {side}", done, total),
        )
    if optimized:
        tell("optimized", 0, len(samples))
        fused = source.session(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        fused_out = _run_all(fused, outputs, samples, source.label, tell, "optimized")
        report.optimized = _aggregate(
            outputs, declared, fused_out, [a[:n_out] for a in actual], tolerance=(atol, rtol)
        )
    if intermediate:
        pairs = [
            ([e[index[n]] for n in common], a[n_out:])
            for e, a in zip(expected, actual, strict=True)
        ]
        compared = _aggregate(common, declared, [p[0] for p in pairs], [p[1] for p in pairs])
        report.intermediate = _intermediate(source, rewritten_ir, compared)
        if float_reference:
            report.debug = from_run(
                rewritten_ir,
                samples,
                wanted,
                expected,
                outputs,
                actual,
                sensitivity,
                source.ir,
                tell,
            )
        if parts is not None and parts.checked and exposed is not None:
            spec = source.session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, exposed)
            parts.run(spec, samples, [dict(zip(fetched, a, strict=True)) for a in actual])
            report.intermediate.partitions = parts.checks(candidate.fusion_plan, tensor_steps)
    return report


def _like(
    original: ir.Model, rewritten: ir.Model, fusion: str, float_reference: bool
) -> LikeReference | None:
    """The like-with-like reference of an unfused comparison with the original's other kernels
    (:mod:`quantgraph.validation.compare.like_reference`); None where the original is its own
    reference. Fused, the original's own nodes run on both sides (and must be identical)."""
    if fusion != "none" or float_reference:
        return None
    return like_reference(original, rewritten)


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy


def _spread_bound(
    source: _Original,
    sites: list[rounding_spread.Site],
    noisy: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]],
    outputs: list[str],
    declared: Mapping[str, int | None],
    samples: Sequence[Mapping[str, np.ndarray]],
    still: Sequence[Sequence[np.ndarray]] | None,
    tell: Progress,
) -> rounding_spread.SpreadBound:
    """Each output's bound from the reference's own spread under rounding noise
    (:mod:`quantgraph.validation.compare.rounding_spread`): ``noisy`` runs the noisy copy on
    feeds (its switch among them); ``still``: its outputs with the noise off on each sample,
    where in hand."""
    per_sample = rounding_spread.RUNS + (still is None)
    tell("spread", 0, len(samples))
    done = [0]

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        found = noisy(feeds)
        done[0] += 1
        if done[0] % per_sample == 0:
            tell("spread", done[0] // per_sample, len(samples))
        return found

    values = rounding_spread.spread(run, outputs, declared, samples, still=still)
    steps = quantization_steps(source.ir.graph)
    return rounding_spread.SpreadBound(
        sites,
        rounding_spread.RUNS,
        len(samples),
        values,
        {name: steps[name] for name in outputs if name in steps},
    )


def _error_stats(
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


def _silent(stage: str, done: int, total: int) -> None:
    pass


def _run_all(
    session: ort.InferenceSession,
    names: list[str],
    samples: Sequence[Mapping[str, np.ndarray]],
    label: str,
    tell: Progress,
    stage: str,
    done: int = 0,
    origins: Sequence[str | None] | None = None,
) -> list[list[np.ndarray]]:
    """The original's outputs on each sample; ``origins``: the files they came from."""
    results = []
    for index, sample in enumerate(samples):
        origin = None if origins is None else origins[index]
        results.append(_run_original(session, names, sample, label, origin))
        tell(stage, done + index + 1, done + len(samples))
    return results


def _run_original(
    session: ort.InferenceSession,
    names: list[str],
    sample: Mapping[str, np.ndarray],
    label: str,
    origin: str | None,
) -> list[np.ndarray]:
    """The original's outputs on one sample; ``origin``: the file it came from (None:
    generated, and the error then says how to generate others)."""
    try:
        return _run(session, names, sample)
    except Exception as error:
        given = "generated inputs" if origin is None else f"inputs of {origin}"
        hint = f"; {HINT}" if origin is None else ""
        raise ModelError(
            f"{label}: the original model fails on the {given} ({describe_feeds(sample)}): "
            f"{_ort_message(error)}{hint}"
        ) from None


def _label(model: ModelLike, loaded: ir.Model, default: str) -> str:
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    files = source_files(loaded)
    return str(files[0]) if files else default


def check_tolerance(
    original: ir.Model,
    rewritten: ir.Model,
    backend: str | None,
    arithmetic: str | None,
    fusion: str,
    optimized: bool,
    atol: float,
    rtol: float,
    min_sqnr: float | None = None,
) -> None:
    """A tolerance where the comparison must be exact would be silently unused: say so before
    any model runs (convert --validate asks before it writes OUT); so would an output SQNR
    anywhere but against a float original."""
    float_original = not has_quantization(original.graph) and has_quantization(rewritten.graph)
    if min_sqnr is not None and not float_original:
        raise ModelError(
            f"--min-sqnr {min_sqnr:g} would judge nothing: it judges a float ORIGINAL against "
            "its quantized form (each output's SQNR); these models are a quantized model and a "
            "rewritten form of it, compared exactly or by --atol/--rtol"
        )
    judged = optimized or fusion in PARTITION_MODES or integer_sums.converted(rewritten)
    judged = judged or bool(other_kernels.differing(rewritten, fusion))
    judged = judged or bool(qoperator.qoperator_ops(original.graph, rewritten.graph))
    if judged or not (atol or rtol):
        return
    if float_original:
        return  # a float original: judged by the tolerance
    from ..backends import require, resolve_arithmetic

    if resolve_arithmetic(require(backend), arithmetic) != "onnx":
        return
    raise ModelError(
        f"--atol {atol:g} / --rtol {rtol:g} would judge nothing: the rewritten model computes "
        "ONNX's arithmetic, so it must equal the original exactly; tolerances judge "
        "--optimized, a float original, and oneDNN's arithmetic (--arithmetic onednn, "
        "--backend onednn, --fusion onednn or auto)"
    )


def _same_inputs(source: _Original, rewritten: ir.Model, rewritten_label: str) -> None:
    """Two unrelated models fail here, before anything runs, saying how their inputs differ."""
    differences = feeds.signature_differences(source.ir, rewritten, source.label, rewritten_label)
    if differences:
        raise ModelError(
            "the models' inputs differ, so the rewritten model is not a form of the original: "
            + "; ".join(differences)
        )


def _aggregate(
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


def _intermediate(
    source: _Original, rewritten: ir.Model, compared: list[TensorComparison]
) -> IntermediateReport:
    made_by = producers(source.ir.graph)
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
