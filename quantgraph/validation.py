"""Run the original QDQ model and the rewritten one on the same inputs; compare every output.

The original runs with ``ORT_DISABLE_ALL``: onnxruntime then executes each QuantizeLinear and
DequantizeLinear as written (the spec's own composition). With optimizations on it would fuse
Q/DQ into integer kernels (QLinearConv, ...), which rounds differently; that comparison is
available as ``optimized=True`` and reported separately, never mixed up with the exact one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from .errors import ModelError
from .io import ModelLike, load_model
from .session import InferenceSession

EXACT = (
    "original vs rewritten, both at ORT_DISABLE_ALL (unfused Q/DQ: the spec's composition; "
    "no other graph rewrite changes either side's arithmetic)"
)
OPTIMIZED = "original at ORT_ENABLE_ALL (fused integer kernels) vs rewritten"


@dataclass(frozen=True)
class OutputComparison:
    name: str
    dtype: str
    shape: list[int]
    max_abs_diff: float
    mismatches: int
    elements: int
    max_ulp_diff: int

    @property
    def agree(self) -> bool:
        return self.mismatches == 0

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "agree": self.agree}


@dataclass
class ValidationReport:
    comparison: str
    backend: str
    outputs: list[OutputComparison]
    inputs: dict[str, list[int]]
    seed: int | None
    optimized: list[OutputComparison] = field(default_factory=list)

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
    model: ModelLike,
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    default_dim: int = 1,
) -> dict[str, np.ndarray]:
    """Random inputs for every graph input (initializers excluded), from a seed.

    Symbolic dims take ``dims[name]`` or ``default_dim``.
    """
    graph = load_model(model).graph
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    feeds: dict[str, np.ndarray] = {}
    for value in graph.inputs:
        if value.is_initializer() or value.name is None:
            continue
        if value.dtype is None or value.shape is None:
            raise ModelError(f"input '{value.name}' has no tensor type and shape to generate from")
        shape = []
        for dim in value.shape:
            if isinstance(dim, int):
                shape.append(dim)
            else:
                shape.append(int(dims.get(str(dim.value), default_dim)))
        feeds[value.name] = _random(rng, value.dtype, tuple(shape))
    return feeds


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


def compare(name: str, expected: np.ndarray, actual: np.ndarray) -> OutputComparison:
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return OutputComparison(
            name,
            f"{expected.dtype} vs {actual.dtype}",
            list(expected.shape),
            float("inf"),
            int(max(expected.size, actual.size)),
            int(expected.size),
            -1,
        )
    if expected.dtype.kind == "f":
        both_nan = np.isnan(expected) & np.isnan(actual)
        same = (expected == actual) | both_nan
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(same, 0.0, np.abs(expected.astype(np.float64) - actual))
        ulps = _ulp_distance(expected.astype(np.float32), actual.astype(np.float32))
        ulps = np.where(same, 0, ulps)
    else:
        diff = np.abs(expected.astype(np.int64) - actual.astype(np.int64)).astype(np.float64)
        same = diff == 0
        ulps = diff.astype(np.int64)  # integers: one unit of the last place is 1
    return OutputComparison(
        name,
        str(expected.dtype),
        list(expected.shape),
        float(np.nanmax(diff)) if diff.size else 0.0,
        int((~same).sum()),
        int(expected.size),
        int(ulps.max()) if ulps.size else 0,
    )


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Map float32 bit patterns to a monotonic integer line; the distance counts floats between.
    def line(x: np.ndarray) -> np.ndarray:
        bits = x.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    distance: np.ndarray = np.abs(line(a) - line(b))
    return distance


def _run_original(
    model: ModelLike, feeds: Mapping[str, np.ndarray], level: ort.GraphOptimizationLevel
) -> tuple[list[str], list[np.ndarray]]:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    source = (
        str(model)
        if isinstance(model, (str, os.PathLike))
        else ir.to_proto(load_model(model)).SerializeToString()
    )
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return names, session.run(names, dict(feeds))


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
    """Compare ``original`` (at ORT_DISABLE_ALL) with ``rewritten`` on one backend."""
    if inputs is None:
        feeds = make_inputs(original, seed=seed, dims=dims)
        used_seed: int | None = seed
    else:
        feeds = load_inputs(inputs) if isinstance(inputs, (str, os.PathLike)) else dict(inputs)
        used_seed = None
    names, expected = _run_original(original, feeds, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = InferenceSession(rewritten, backend, options=options)
    actual = session.run(names, feeds)
    report = ValidationReport(
        comparison=f"{EXACT} on the {session.backend} backend",
        backend=session.backend,
        outputs=[compare(n, e, a) for n, e, a in zip(names, expected, actual, strict=True)],
        inputs={k: list(v.shape) for k, v in feeds.items()},
        seed=used_seed,
    )
    if optimized:
        _, fused = _run_original(original, feeds, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        report.optimized = [compare(n, e, a) for n, e, a in zip(names, fused, actual, strict=True)]
    return report
