"""How the differences of one tensor are distributed: what a page draws, beyond the counts.

``compare`` says whether two tensors agree and by how much at most; a person debugging a
disagreement, or asking where quantization hurts, wants the distribution too: a histogram of
the absolute differences on fixed decade bins (so samples merge), for tensors with a known
quantization step the differences counted in steps, and the signal and noise energies that
give the SQNR (as onnxruntime's ``qdq_loss_debug`` computes it: 10 log10(sum x^2 / sum (x-y)^2)).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from ...ir.values import constant_array
from ...ir.walk import GraphLike, spec_op
from ...passes.qdq.cast_scale import is_cast_scale
from ...reference.compare import mismatch_mask

# |difference| bins: exactly 0, then one bin per decade from 1e-8 up, the last open-ended.
DECADES = tuple(range(-8, 5))  # bin k holds 10**DECADES[k-1] <= |d| < 10**DECADES[k]
# Differences in quantization steps: <= -4, -3 .. 3, >= 4 (the JSON's histogram).
STEP_LIMIT = 4
# The page's step histogram spans the true range: exact counts of -SPAN .. SPAN steps (beyond
# them, the outermost counts), and the extreme steps themselves.
STEP_SPAN = 256


def abs_bin_labels() -> list[str]:
    """Short labels, each bin named by its lower edge: "0", "<1e-8", "1e-8" (up to 1e-7), ..."""
    return ["0", f"<1e{DECADES[0]}", *(f"1e{low}" for low in DECADES[:-1]), f">=1e{DECADES[-1]}"]


def abs_bin_ranges() -> list[str]:
    """What each bin of :func:`abs_bin_labels` holds, in words (tooltips, JSON)."""
    inner = [f"[1e{low}, 1e{high})" for low, high in itertools.pairwise(DECADES)]
    return ["0", f"(0, 1e{DECADES[0]})", *inner, f"[1e{DECADES[-1]}, inf)"]


def step_bin_labels() -> list[str]:
    inner = [str(k) for k in range(-STEP_LIMIT + 1, STEP_LIMIT)]
    return [f"<={-STEP_LIMIT}", *inner, f">={STEP_LIMIT}"]


@dataclass
class ErrorStats:
    """The distribution of ``expected - actual`` for one tensor over every sample compared."""

    name: str
    elements: int = 0
    signal: float = 0.0  # sum of expected**2 over the finite pairs
    noise: float = 0.0  # sum of (expected - actual)**2 over the finite pairs
    nonfinite: int = 0  # pairs where either side is NaN or infinite and they differ
    max_abs: float = 0.0  # over the finite pairs
    step: float | None = None  # one quantization step of the tensor, when known
    abs_histogram: list[int] = field(default_factory=lambda: [0] * (len(DECADES) + 2))
    step_histogram: list[int] | None = None
    dtype: str = ""  # the expected side's element type
    step_counts: list[int] | None = None  # -STEP_SPAN .. STEP_SPAN steps (clipped), the page's
    step_range: tuple[float, float] | None = None  # the lowest and highest difference in steps

    @property
    def sqnr_db(self) -> float:
        """Signal to quantization-noise ratio in dB; +inf when there is no noise."""
        if self.noise == 0.0:
            return math.inf
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)

    def add(self, expected: np.ndarray, actual: np.ndarray) -> None:
        """Count one sample (same shape; shape or type mismatches are ``compare``'s to report)."""
        if np.shape(expected) != np.shape(actual):
            return
        self.dtype = self.dtype or str(np.asarray(expected).dtype)
        want = _wide(expected)
        got = _wide(actual)
        if want is None or got is None or want.shape != got.shape:
            return
        self.elements += int(want.size)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = want - got
        finite = np.isfinite(diff)
        # compare's rule decides whether a NaN or infinite pair differs at all
        expected, actual = np.asarray(expected), np.asarray(actual)
        differ = (
            mismatch_mask(expected, actual)
            if expected.dtype == actual.dtype
            else np.ones(want.size, dtype=bool)
        )
        same_special = ~finite & ~differ
        self.nonfinite += int(np.sum(~finite & differ))
        d = diff[finite]
        w = want[finite]
        self.signal += float(np.dot(w, w))
        self.noise += float(np.dot(d, d))
        magnitude = np.abs(d)
        if magnitude.size:
            self.max_abs = max(self.max_abs, float(magnitude.max()))
        zero = magnitude == 0
        self.abs_histogram[0] += int(np.sum(zero)) + int(np.sum(same_special))
        nonzero = magnitude[~zero]
        if nonzero.size:
            edges = np.power(10.0, np.array(DECADES, dtype=np.float64))
            counts = np.bincount(np.searchsorted(edges, nonzero, side="right"))
            for index, count in enumerate(counts):
                self.abs_histogram[1 + index] += int(count)
        if self.step:
            if self.step_histogram is None:
                self.step_histogram = [0] * (2 * STEP_LIMIT + 1)
            exact = np.rint(diff[finite] / self.step)
            self._count_steps(exact)
            steps = np.clip(exact, -STEP_LIMIT, STEP_LIMIT)
            bins = (steps + STEP_LIMIT).astype(np.int64)
            counts = np.bincount(bins, minlength=2 * STEP_LIMIT + 1)
            for index, count in enumerate(counts):
                self.step_histogram[index] += int(count)

    def _count_steps(self, steps: np.ndarray) -> None:
        if not steps.size:
            return
        if self.step_counts is None:
            self.step_counts = [0] * (2 * STEP_SPAN + 1)
        low, high = float(steps.min()), float(steps.max())
        if self.step_range is not None:
            low, high = min(low, self.step_range[0]), max(high, self.step_range[1])
        self.step_range = (low, high)
        bins = (np.clip(steps, -STEP_SPAN, STEP_SPAN) + STEP_SPAN).astype(np.int64)
        for index, count in enumerate(np.bincount(bins, minlength=2 * STEP_SPAN + 1)):
            self.step_counts[index] += int(count)

    def step_bins(self, most: int = 17) -> tuple[list[str], list[int]] | None:
        """The page's step histogram: at most ``most`` bins from the lowest difference in steps
        to the highest (one step a bin when they fit; beyond STEP_SPAN, the outermost bins)."""
        if self.step_counts is None or self.step_range is None:
            return None
        low = int(max(-STEP_SPAN, min(0.0, self.step_range[0])))
        high = int(min(STEP_SPAN, max(0.0, self.step_range[1])))
        width = max(1, math.ceil((high - low + 1) / most))
        labels, counts = [], []
        for start in range(low, high + 1, width):
            end = min(high, start + width - 1)
            counts.append(sum(self.step_counts[start + STEP_SPAN : end + STEP_SPAN + 1]))
            text = str(start) if start == end else f"{start}..{end}"
            if start == -STEP_SPAN and self.step_range[0] < -STEP_SPAN:
                text = f"{self.step_range[0]:.0f}..{end}"
            if end == STEP_SPAN and self.step_range[1] > STEP_SPAN:
                text = f"{start}..{self.step_range[1]:.0f}"
            labels.append(text)
        return labels, counts

    @property
    def max_steps(self) -> float | None:
        """The largest finite difference in quantization steps, when the step is known."""
        return None if not self.step else self.max_abs / self.step

    def to_dict(self) -> dict[str, object]:
        sqnr = self.sqnr_db
        return {
            "name": self.name,
            "elements": self.elements,
            "sqnr_db": None if math.isinf(sqnr) else round(sqnr, 3),
            "identical": self.noise == 0.0 and self.nonfinite == 0,
            "max_abs_diff": self.max_abs,
            "nonfinite_differences": self.nonfinite,
            "step": self.step,
            "max_abs_diff_steps": self.max_steps,
            "abs_histogram": dict(zip(abs_bin_ranges(), self.abs_histogram, strict=True)),
            "step_histogram": None
            if self.step_histogram is None
            else dict(zip(step_bin_labels(), self.step_histogram, strict=True)),
        }


def _wide(array: np.ndarray) -> np.ndarray | None:
    """``array`` as float64, or None for what has no numeric difference (strings, objects)."""
    values = np.asarray(array)
    if values.dtype.kind in "OSU":
        return None
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            return values.astype(np.float64).reshape(-1)
    except (TypeError, ValueError):
        return None


def quantization_steps(graph: GraphLike) -> dict[str, float]:
    """One quantization step of each tensor a graph's nodes quantize or dequantize, where
    it is one number: 1 for a quantized (integer) tensor, the scale for a tensor dequantized
    with one constant scale (per-axis and blocked scales give no single step)."""
    steps: dict[str, float] = {}
    for node in graph:
        if not node.outputs or not node.outputs[0].name:
            continue
        name = node.outputs[0].name
        op = spec_op(node)
        if op is None and node.domain not in QDQ_DOMAINS:
            continue
        if op is not None:
            quantize = op.is_quantize
        elif node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            quantize = node.op_type == "QuantizeLinear"
        else:
            continue
        if quantize:
            steps[name] = 1.0
            continue
        scale = _one_scale(node, static=op is not None and op.has_attribute("scales"))
        if scale is not None and math.isfinite(scale) and scale > 0:
            steps[name] = scale
    return steps


def has_quantization(graph: GraphLike) -> bool:
    """Whether a graph quantizes anything: Q/DQ (any domain), spec ops, integer kernels or a
    weight-only Cast x scale chain."""
    return any(
        spec_op(node) is not None
        or is_cast_scale(node)
        or node.op_type in QUANTIZED_OPS
        or (node.domain in QDQ_DOMAINS and node.op_type.startswith("QLinear"))
        for node in graph
    )


QDQ_DOMAINS = ("", "ai.onnx", "com.microsoft")
QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "MatMulNBits",
        "QGemm",
        "QAttention",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
    }
)


def _one_scale(node: ir.Node, static: bool) -> float | None:
    if static:
        attribute = node.attributes.get("scales")
        values = None if attribute is None else list(attribute.as_floats())
        return float(values[0]) if values is not None and len(values) == 1 else None
    scale = constant_array(node.inputs[1] if len(node.inputs) > 1 else None)
    if scale is None or scale.size != 1:
        return None
    return float(scale.astype(np.float64).reshape(-1)[0])
