"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently; that comparison is
available as ``optimized=True``, judged by a tolerance and never mixed up with the exact one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..compare import TensorComparison, compare, merge
from ..errors import ModelError
from ..io import ModelLike, load_model, source_files
from ..opsets import check_opset
from ..session import InferenceSession
from .inputs import SPATIAL_DEFAULT, SPATIAL_SIZES, InputSpec, describe, has_spatial_dims
from .inputs import plan_inputs as plan
from .intermediate import producers, with_all_outputs
from .report import EXACT, ONEDNN_ARITHMETIC, Divergence, IntermediateReport, ValidationReport

InputsArg = Mapping[str, np.ndarray] | str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
HINT = (
    "bind symbolic dims with --dim NAME=VALUE, value ranges with --val-range NAME:LOW,HIGH, "
    "or pass inputs with --inputs"
)

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


def load_inputs(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: cannot read inputs ({error})") from None


def input_samples(inputs: InputsArg) -> list[dict[str, np.ndarray]]:
    """Feeds from a mapping, an .npz, several .npz files, or a directory of .npz files."""
    if isinstance(inputs, Mapping):
        return [dict(inputs)]
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found = sorted(entry.glob("*.npz"))
            if not found:
                raise ModelError(f"{entry}: the directory has no .npz files")
            files.extend(found)
        else:
            files.append(entry)
    return [load_inputs(path) for path in files]


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


def draw(specs: Sequence[InputSpec], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {spec.name: spec.draw(rng) for spec in specs}


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
        self, level: ort.GraphOptimizationLevel, proto: onnx.ModelProto | None = None
    ) -> ort.InferenceSession:
        options = quiet_options(level)
        try:
            if proto is not None:
                return ort.InferenceSession(proto.SerializeToString(), options, _CPU)
            if self.path is not None:  # onnxruntime reads the file (and its weights) itself
                return ort.InferenceSession(str(self.path), options, _CPU)
            serialized = ir.to_proto(self.ir).SerializeToString()
            return ort.InferenceSession(serialized, options, _CPU)
        except Exception as error:
            raise ModelError(
                f"{self.label}: onnxruntime cannot load the original: {_first_line(error)}"
            ) from None


_CPU = ["CPUExecutionProvider"]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line.replace("[ONNXRuntimeError] : ", "")


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
) -> ValidationReport:
    """Compare ``original`` (at ORT_DISABLE_ALL) with ``rewritten`` on one backend.

    Inputs: ``inputs`` (a mapping, an .npz, several, or a directory of them), else
    ``iterations`` seeded samples generated from what the graph says (:mod:`.inputs`).
    ``optimized`` also compares the original at ORT_ENABLE_ALL, judged by ``atol``/``rtol``
    (the exact verdict is untouched). ``intermediate`` compares every tensor both models
    compute under one name and reports the first node where they part.
    """
    if iterations < 1:
        raise ModelError("--iterations must be at least 1")
    source = _Original(original)
    exposed, tensor_names = with_all_outputs(source.ir) if intermediate else (None, [])
    session = source.session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, exposed)
    outputs = [o.name for o in session.get_outputs()][: len(source.ir.graph.outputs)]
    declared = {o.name: ELEM_TYPES.get(o.type) for o in session.get_outputs()}
    tensor_names = [n for n in tensor_names if n not in outputs]
    wanted = outputs + tensor_names

    if inputs is not None:
        samples = input_samples(inputs)
        described: dict[str, dict[str, object]] = {
            k: {"dtype": str(v.dtype), "shape": list(v.shape), "from": "--inputs"}
            for k, v in samples[0].items()
        }
        used_seed: int | None = None
        expected = [_run_original(session, wanted, s, source.label) for s in samples]
    else:
        specs, first = _runnable_specs(source, session, wanted, dims, val_ranges, seed)
        samples = [draw(specs, seed + i) for i in range(iterations)]
        later = [_run_original(session, wanted, s, source.label) for s in samples[1:]]
        expected = [first, *later]
        described = {spec.name: spec.to_dict() for spec in specs}
        used_seed = seed

    candidate_model: ModelLike = rewritten
    if intermediate:
        candidate_model = with_all_outputs(load_model(rewritten))[0]
    candidate = InferenceSession(
        candidate_model,
        backend,
        arithmetic=arithmetic,
        options=quiet_options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
    )
    candidate_names = {o.name for o in candidate.get_outputs()}
    common = [n for n in tensor_names if n in candidate_names]
    actual = [candidate.run(outputs + common, s) for s in samples]

    n_out = len(outputs)
    exact = candidate.arithmetic == "onnx"
    if exact:
        comparison = f"{EXACT} on the {candidate.backend} backend"
    else:
        engine = candidate.onednn_version or "oneDNN's arithmetic on the native backend"
        comparison = ONEDNN_ARITHMETIC.format(engine=engine)
    report = ValidationReport(
        comparison=comparison,
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
    )
    if optimized:
        fused = source.session(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        fused_out = [_run_original(fused, outputs, s, source.label) for s in samples]
        report.optimized = _aggregate(
            outputs, declared, fused_out, [a[:n_out] for a in actual], tolerance=(atol, rtol)
        )
    if intermediate:
        index = {name: i for i, name in enumerate(wanted)}
        pairs = [
            ([e[index[n]] for n in common], a[n_out:])
            for e, a in zip(expected, actual, strict=True)
        ]
        compared = _aggregate(common, declared, [p[0] for p in pairs], [p[1] for p in pairs])
        report.intermediate = _intermediate(source, load_model(rewritten), compared)
    return report


def _runnable_specs(
    source: _Original,
    session: ort.InferenceSession,
    names: list[str],
    dims: Mapping[str, int] | None,
    val_ranges: Mapping[str, tuple[float, float]] | None,
    seed: int,
) -> tuple[list[InputSpec], list[np.ndarray]]:
    """Input specs the original runs on, and its outputs for the first sample: image-like
    inputs try SPATIAL_SIZES in turn when the default size is refused."""
    sizes = SPATIAL_SIZES if has_spatial_dims(source.ir) else (SPATIAL_DEFAULT,)
    first_error: tuple[dict[str, np.ndarray], BaseException] | None = None
    for size in sizes:
        specs = plan(source.ir, dims=dims, val_ranges=val_ranges, spatial=size)
        feeds = draw(specs, seed)
        try:
            return specs, _run(session, names, feeds)
        except Exception as error:
            first_error = first_error or (feeds, error)
    assert first_error is not None
    tried = "" if len(sizes) == 1 else f" (and spatial sizes {', '.join(map(str, sizes[1:]))})"
    raise ModelError(
        f"{source.label}: the original model fails on the generated inputs "
        f"({describe(first_error[0])}{tried}): {_first_line(first_error[1])}; {HINT}"
    )


def _run_original(
    session: ort.InferenceSession, names: list[str], feeds: Mapping[str, np.ndarray], label: str
) -> list[np.ndarray]:
    try:
        return _run(session, names, feeds)
    except Exception as error:
        raise ModelError(
            f"{label}: the original model fails on the inputs ({describe(feeds)}): "
            f"{_first_line(error)}; {HINT}"
        ) from None


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
    return IntermediateReport(len(compared), len(differing), first, differing)
