"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently; that comparison is
available as ``optimized=True`` and reported separately, never mixed up with the exact one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from .compare import TensorComparison, compare
from .errors import ModelError
from .io import ModelLike, load_model
from .session import InferenceSession

EXACT = (
    "original vs rewritten, both at ORT_DISABLE_ALL (unfused Q/DQ: the spec's composition; "
    "no other graph rewrite changes either side's arithmetic)"
)
OPTIMIZED = "original at ORT_ENABLE_ALL (fused integer kernels) vs rewritten"


@dataclass
class ValidationReport:
    comparison: str
    backend: str
    outputs: list[TensorComparison]
    inputs: dict[str, list[int]]
    seed: int | None
    optimized: list[TensorComparison] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return all(o.agree for o in self.outputs)

    def to_dict(self) -> dict[str, object]:
        return {
            "agree": self.agree,
            "comparison": self.comparison,
            "backend": self.backend,
            "seed": self.seed,
            "inputs": self.inputs,
            "outputs": [o.to_dict() for o in self.outputs],
            "optimized": {"comparison": OPTIMIZED, "outputs": [o.to_dict() for o in self.optimized]}
            if self.optimized
            else None,
        }


def make_inputs(
    model: ModelLike | ort.InferenceSession,
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    default_dim: int = 1,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input (initializers excluded), from a seed.

    Symbolic dims take ``dims[name]`` or ``default_dim``. ``model`` may be an onnxruntime
    session already made for it: its declared inputs are read there, with no parse of the file.
    """
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    feeds: dict[str, np.ndarray] = {}
    for name, elem_type, declared in _declared_inputs(model):
        if elem_type is None or declared is None:
            raise ModelError(f"input '{name}' has no tensor type and shape to generate from")
        shape = tuple(
            dim if isinstance(dim, int) else int(dims.get(str(dim), default_dim))
            for dim in declared
        )
        feeds[name] = _random(rng, elem_type, shape)
    return feeds


Dim = int | str | None

# onnxruntime's type strings ("tensor(float8e4m3fn)") and the ONNX element types they name.
_ELEM_TYPES = {
    f"tensor({onnx.TensorProto.DataType.Name(t).lower()})": int(t)
    for t in onnx.TensorProto.DataType.values()
    if t != onnx.TensorProto.UNDEFINED
}


def _declared_inputs(
    model: ModelLike | ort.InferenceSession,
) -> list[tuple[str, ir.DataType | None, list[Dim] | None]]:
    """(name, element type, shape with symbolic dims as names) of every fed input."""
    if isinstance(model, (ort.InferenceSession, InferenceSession)):
        found = []
        for arg in model.get_inputs():
            known = _ELEM_TYPES.get(arg.type)
            elem = None if known is None else ir.DataType(known)
            shape = None if arg.shape is None else [d if d is not None else "" for d in arg.shape]
            found.append((arg.name, elem, shape))
        return found
    graph = load_model(model).graph
    declared = []
    for value in graph.inputs:
        if value.is_initializer() or value.name is None:
            continue
        shape = (
            None
            if value.shape is None
            else [d if isinstance(d, int) else str(d.value) for d in value.shape]
        )
        declared.append((value.name, value.dtype, shape))
    return declared


def _random(rng: np.random.Generator, dtype: ir.DataType, shape: tuple[int, ...]) -> np.ndarray:
    np_type = dtype.numpy()
    if np_type.kind == "f":
        return rng.standard_normal(shape).astype(np_type)
    if np_type.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if np_type.kind in "iu":
        info = np.iinfo(np_type)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(
            np_type
        )
    raise ModelError(f"cannot generate inputs of type {dtype.name}; pass them with --inputs")


def load_inputs(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: cannot read inputs ({error})") from None


def _original_session(model: ModelLike, level: ort.GraphOptimizationLevel) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    if isinstance(model, (str, os.PathLike)):
        # onnxruntime reads the file itself; only a file it refuses is read here, to say why.
        try:
            return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        except Exception as error:
            load_model(model)  # a bad file is a ModelError naming the rule it breaks
            first = str(error).strip().splitlines()[0] if str(error).strip() else "failed"
            raise ModelError(f"{model}: onnxruntime cannot load the original: {first}") from None
    if isinstance(model, bytes):
        source = model
    elif isinstance(model, onnx.ModelProto):
        source = model.SerializeToString()
    else:
        source = ir.to_proto(model).SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _compare_all(
    session: ort.InferenceSession, expected: list[np.ndarray], actual: list[np.ndarray]
) -> list[TensorComparison]:
    outputs = session.get_outputs()
    return [
        compare(o.name, e, a, _ELEM_TYPES.get(o.type))
        for o, e, a in zip(outputs, expected, actual, strict=True)
    ]


def validate(
    original: ModelLike,
    rewritten: ModelLike,
    *,
    inputs: Mapping[str, np.ndarray] | str | os.PathLike[str] | None = None,
    backend: str | None = None,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    optimized: bool = False,
) -> ValidationReport:
    """Compare ``original`` (at ORT_DISABLE_ALL) with ``rewritten`` on one backend.

    Either model may be a path, bytes, a ModelProto or an ir.Model: nothing is read twice.
    """
    session = _original_session(original, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    if inputs is None:
        feeds = make_inputs(session, seed=seed, dims=dims)
        used_seed: int | None = seed
    else:
        feeds = load_inputs(inputs) if isinstance(inputs, (str, os.PathLike)) else dict(inputs)
        used_seed = None
    names = [o.name for o in session.get_outputs()]
    expected = session.run(names, feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    candidate = InferenceSession(rewritten, backend, options=options)
    actual = candidate.run(names, feeds)
    report = ValidationReport(
        comparison=f"{EXACT} on the {candidate.backend} backend",
        backend=candidate.backend,
        outputs=_compare_all(session, expected, actual),
        inputs={k: list(v.shape) for k, v in feeds.items()},
        seed=used_seed,
    )
    if optimized:
        fused_session = _original_session(original, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        fused = fused_session.run(names, feeds)
        report.optimized = _compare_all(session, fused, actual)
    return report
