"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently: ``optimized=True``,
judged by a tolerance apart from the exact one (so are converted integer ops: integer_sums, and
unfused nodes the original runs with another kernel: other_kernels).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..backends.ort_sessions import ort_session
from ..errors import ModelError
from ..fusion.plan import AUTO, ONEDNN, PARTITION_MODES
from ..ir.model_files import ModelLike, load_model, source_files
from ..ir.opsets import check_opset
from ..reference.compare import TensorComparison, compare, merge, typed
from ..runtime.session import InferenceSession
from . import feeds, given_back, integer_sums, onednn_reference, other_kernels, qoperator
from .debugger import from_run
from .error_stats import ErrorStats, has_quantization, quantization_steps
from .inputs import describe_feeds, draw
from .inputs import plan_inputs as plan
from .intermediate import after_quantization, producers, with_all_outputs
from .options import InputOptionError, memory_budget_bytes
from .partitions import Partitions
from .report import (
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
    InputSearch,
    IntermediateReport,
    MemoryCheck,
    ValidationReport,
)
from .roles import check_roles
from .search import DEFAULT_MEMORY_BUDGET, DEFAULT_SEARCH_TIMEOUT, HINT, find_plan

InputsArg = Mapping[str, np.ndarray] | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
# progress(stage, done, total): stage "original", "rewritten" or "optimized"; done 0: loading.
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
    checked against ``model``'s inputs when given (see :mod:`.feeds`)."""
    return feeds.read(path, None if model is None else feeds.expected_inputs(load_model(model)))


def input_samples(inputs: InputsArg, model: ModelLike | None = None) -> list[dict[str, np.ndarray]]:
    """Feeds from a mapping, an .npz or .npy, several, or a directory of them (see
    :mod:`.feeds`); checked against ``model``'s inputs when given."""
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


def make_inputs(
    model: ModelLike,
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, np.ndarray]:
    """Inputs for every fed input of ``model`` from a seed (see :mod:`.inputs`)."""
    specs = plan(load_model(model), dims=dims, val_ranges=val_ranges)
    return draw(specs, seed)


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
        self, level: ort.GraphOptimizationLevel, exposed: ir.Model | None = None
    ) -> ort.InferenceSession:
        options = quiet_options(level)
        try:
            if exposed is not None:
                return ort_session(exposed, options)
            if self.path is not None:  # onnxruntime reads the file (and its weights) itself
                return ort_session(self.path, options)
            return ort_session(self.ir, options)
        except Exception as error:
            raise ModelError(
                f"{self.label}: onnxruntime cannot load the original: {_ort_message(error)}"
            ) from None


# "2 : INVALID_ARGUMENT : Non-zero status code returned while running Pad node. Name:'p' Status
# Message: why" says no more than "Pad node 'p': why".
_RUN_FAILURE = re.compile(
    r"^\d+ : \w+ : Non-zero status code returned while running (\w+) node\. "
    r"Name:'([^']*)' Status Message: "
)


def _ort_message(error: BaseException) -> str:
    """onnxruntime's whole message on one line (its later lines say which dims differ),
    without its status prefix."""
    text = " ".join(str(error).split()) or type(error).__name__
    text = text.replace("[ONNXRuntimeError] : ", "")
    return _RUN_FAILURE.sub(lambda m: f"{m.group(1)} node '{m.group(2)}': ", text)


def _run(
    session: ort.InferenceSession, names: list[str], feeds: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    return list(session.run(names, dict(feeds)))


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
) -> ValidationReport:
    """Compare ``original`` (at ORT_DISABLE_ALL) with ``rewritten`` on one backend.

    Inputs: ``inputs`` (a mapping, an .npz, several, or a directory of them), else
    ``iterations`` seeded samples generated from what the graph says (:mod:`.inputs`; ``dims``
    keys are symbolic names or ``"INPUT:AXIS"``), searching other plans when the original
    refuses the first (:mod:`.search`; the report's ``input_search``): no plan whose estimated
    memory (:mod:`.memory`) exceeds ``memory_budget`` (bytes, or a size such as ``"2GiB"``;
    None: no budget) runs, and the search stops after ``search_timeout`` seconds (None: never).
    ``optimized`` also compares the original at ORT_ENABLE_ALL, judged by ``atol``/``rtol``
    (the exact verdict is untouched). ``intermediate`` compares every tensor both models
    compute under one name and reports the first node where they part. ``fusion``: the
    rewritten model's fusion mode (:mod:`quantgraph.fusion`); with "onnxruntime" both sides
    run at ORT_ENABLE_ALL, where its units are onnxruntime's fused kernels on both sides, and
    the comparison is still exact. ``progress``, when given, is told each session being made
    and each sample run (:data:`Progress`). Against a float original, ``intermediate`` also
    measures the error each quantized tensor and node introduces (:mod:`.debugger`), and
    ``sensitivity`` K reruns the K worst tensors kept in float (implies ``intermediate``).
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
    check_tolerance(source.ir, rewritten_ir, backend, arithmetic, fusion, optimized, atol, rtol)
    tell("original", 0, iterations)
    exposed, tensor_names = with_all_outputs(source.ir) if intermediate else (None, [])
    level = (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if fusion == "none"
        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    session = source.session(level, exposed)
    outputs = [o.name for o in session.get_outputs()][: len(source.ir.graph.outputs)]
    declared = {o.name: ELEM_TYPES.get(o.type) for o in session.get_outputs()}
    tensor_names = [n for n in tensor_names if n not in outputs]
    float_reference = not has_quantization(source.ir.graph) and has_quantization(rewritten_ir.graph)
    if sensitivity and not float_reference:
        raise ModelError("--sensitivity needs a float original and its quantized (QDQ) form")
    reference = onednn_reference.for_validation(
        source.ir, source.label, float_reference, backend, arithmetic, fusion,
        quiet_options(level), intermediate,
    )  # fmt: skip
    if reference is not None:  # compare the tensors both compute under one name
        tensor_names = [n for n in tensor_names if n in reference.names]
    wanted = outputs + tensor_names

    if inputs is not None:
        given = _samples(inputs, feeds.expected_inputs(source.ir))
        samples = [sample for _, sample in given]
        described: dict[str, dict[str, object]] = {
            k: {"dtype": str(v.dtype), "shape": list(v.shape), "from": "--inputs"}
            for k, v in samples[0].items()
        }
        used_seed: int | None = None
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
        found = find_plan(
            source.ir,
            functools.partial(_run, session, wanted),
            label=source.label,
            message=_ort_message,
            dims=dims,
            val_ranges=val_ranges,
            seed=seed,
            memory_budget=budget,
            timeout=search_timeout,
            keep_all=intermediate,
        )
        specs, first, search, memory = found.specs, found.outputs, found.search, found.memory
        samples = [draw(specs, seed + i) for i in range(iterations)]
        tell("original", 1, len(samples))
        later = _run_all(session, wanted, samples[1:], source.label, tell, "original", done=1)
        expected = [first, *later]
        described = {spec.name: spec.to_dict() for spec in specs}
        used_seed = seed
    # Its outputs are in hand: the original's session (its copy of the weights) goes before
    # the rewritten model's is made, or both would hold the weights at once.
    del session

    onnx_expected: list[list[np.ndarray]] = []
    if reference is not None:
        tell("reference", 0, len(samples))
        onnx_expected, expected = expected, []
        for done, sample in enumerate(samples, 1):
            expected.append(reference.run(wanted, sample))
            tell("reference", done, len(samples))
    tell("rewritten", 0, len(samples))
    onednn_fused = fusion in PARTITION_MODES
    # oneDNN's partitions: exposed only once planned (exposed before, no unit would form), and
    # each checked alone against the spec composition (not against a float original).
    parts = Partitions(fusion == ONEDNN) if intermediate and onednn_fused else None
    parts = None if float_reference else parts
    candidate_model: ModelLike = rewritten
    if intermediate and not onednn_fused:
        candidate_model = with_all_outputs(rewritten_ir)[0]
    candidate = InferenceSession(
        candidate_model,
        backend,
        arithmetic=arithmetic,
        options=quiet_options(level),
        fusion=fusion,
        tune_inputs=samples[0] if fusion == AUTO else None,  # decided before outputs are named
        after_fusion=None if parts is None else parts.after_fusion,
    )
    reference_arithmetic = "onnx" if reference is None else onednn_reference.ONEDNN
    same_arithmetic = candidate.arithmetic == reference_arithmetic
    integer = integer_sums.converted(rewritten_ir) and not float_reference and not onednn_fused
    qop = qoperator.qoperator_ops(source.ir.graph, rewritten_ir.graph)  # integer kernels
    if given_back.all_given_back(rewritten_ir, fusion, candidate.fusion_plan):
        integer, qop = False, []  # the original's own nodes run on both sides
    exact = same_arithmetic and not float_reference and not onednn_fused
    kernels = [] if float_reference or qop else other_kernels.differing(rewritten_ir, fusion)
    exact = exact and not integer and not qop and not kernels
    candidate_names = {o.name for o in candidate.get_outputs()}
    alias = after_quantization(rewritten_ir.graph) if float_reference else {}
    common = [n for n in tensor_names if alias.get(n, n) in candidate_names]
    fetched = outputs + [alias.get(n, n) for n in common]
    fetched += [n for n in (parts.outputs if parts else []) if n not in fetched]
    actual = []
    for done, sample in enumerate(samples, 1):
        actual.append(candidate.run(fetched, sample))
        tell("rewritten", done, len(samples))

    n_out = len(outputs)
    backend_name = candidate.backend
    if qop:
        comparison, note = qoperator.comparison(qop, backend_name, fusion)
    elif float_reference:
        comparison, note = QUANTIZATION_ERROR.format(backend=backend_name), QUANTIZATION_NOTE
    elif onednn_fused:
        from ..backends import onednn

        comparison = FUSED_ONEDNN.format(
            fusion=fusion, backend=backend_name, engine=onednn.version()
        )
        note = FUSED_ONEDNN_NOTE
    elif integer:
        comparison, note, atol, rtol = integer_sums.comparison(backend_name, fusion, atol, rtol)
    elif kernels:
        comparison, note, atol, rtol = other_kernels.comparison(kernels, backend_name, atol, rtol)
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
            tolerance=None if exact else (atol, rtol),
        ),
        inputs=described,
        seed=used_seed,
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
        reference_arithmetic=reference_arithmetic,
        original=source.label,
        rewritten=rewritten_label,
        model_files=(*source_files(source.ir), *source_files(rewritten_ir)),
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
                rewritten_ir, samples, wanted, expected, outputs, actual, sensitivity
            )
        if parts is not None and parts.checked and exposed is not None:
            spec = source.session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, exposed)
            parts.run(spec, samples, [dict(zip(fetched, a, strict=True)) for a in actual])
            report.intermediate.partitions = parts.checks(candidate.fusion_plan, tensor_steps)
    return report


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
) -> None:
    """A tolerance where the comparison must be exact would be silently unused: say so before
    any model runs (convert --validate asks before it writes OUT)."""
    judged = optimized or fusion in PARTITION_MODES or integer_sums.converted(rewritten)
    judged = judged or bool(other_kernels.differing(rewritten, fusion))
    if judged or not (atol or rtol):
        return
    if not has_quantization(original.graph) and has_quantization(rewritten.graph):
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
) -> list[TensorComparison]:
    results: list[TensorComparison] = []
    for index, name in enumerate(names):
        merged: TensorComparison | None = None
        for want, got in zip(expected, actual, strict=True):
            one = compare(name, want[index], got[index], declared.get(name), tolerance=tolerance)
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
