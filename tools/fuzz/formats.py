"""Fuzzing the published quantized formats (issue #34): hypothesis draws one model of a
pattern (:mod:`tools.fuzz.format_models`: MatMulNBits, quantize_dynamic's integer ops,
QOperator nodes, weight-only Cast x scale), accepted by its pass or refused, and each is checked:

* ``convert`` does not raise; the pass converts the pattern's nodes, or leaves them with the
  expected skip code (a weight-only Cast chain that is not one: no conversion, no report entry);
* converted: ``validate`` against onnxruntime running the original agrees at ORT_ENABLE_ALL with
  fusion "onnxruntime" (bit for bit where validation expects exactness, else within its stated
  bound) and at ORT_DISABLE_ALL (the same verdict; QOperator's integer kernels are another
  arithmetic there and u8 x s8 integer kernels saturate int16 pair sums on CPUs without VNNI:
  those differences are counted apart, with their largest step, not as failures);
* ``lower`` gives back the original nodes (op, domain, name, inputs, outputs, attributes) and
  initializers (type, shape and value bytes), and reports no skip.

Failures are recorded with the pattern's choices and seed (re-drawn by ``--seed``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import onnx
from onnx import numpy_helper

try:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
except ImportError as _missing:  # pragma: no cover - hypothesis is a dev dependency
    raise ImportError("tools.fuzz needs hypothesis: pip install hypothesis") from _missing

import quantgraph
from quantgraph.cpu import cpu
from quantgraph.errors import NoQuantization

from .format_models import BUILDERS, LEFT, FormatModel

PATTERNS = tuple(BUILDERS)
FUSIONS = ("onnxruntime", "none")
T = TypeVar("T")


class SeededKnobs:
    """The :class:`~tools.fuzz.format_models.Knobs` of one example: every choice and value from
    numpy seeded by hypothesis (its own integers lean to small values), so ``seed`` alone
    rebuilds the model (:func:`rebuild`)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def pick(self, name: str, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(0, len(options)))]

    def int(self, name: str, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))


@st.composite
def format_models(draw: st.DrawFn, pattern: str) -> tuple[FormatModel, int]:
    seed = draw(st.integers(0, 2**32 - 1))
    return BUILDERS[pattern](SeededKnobs(seed)), seed


def rebuild(pattern: str, seed: int) -> FormatModel:
    """The model a report's failure names (pattern and seed)."""
    return BUILDERS[pattern](SeededKnobs(seed))


@dataclass
class PatternStats:
    examples: int = 0
    converted: int = 0
    refused: dict[str, int] = field(default_factory=dict)  # expected skip code -> examples
    validated: dict[str, int] = field(default_factory=dict)  # fusion -> agreeing runs
    exact: dict[str, int] = field(default_factory=dict)  # fusion -> runs stated exact
    # ORT_DISABLE_ALL runs whose difference validation does not accept, where the original's
    # integer kernels are known to differ: (count, largest step)
    known_differences: int = 0
    largest_known_step: float = 0.0
    largest_known_diff: float = 0.0
    failures: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class FormatsReport:
    seed: int
    examples_per_pattern: int
    vnni: bool
    patterns: dict[str, PatternStats] = field(default_factory=dict)
    details: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> int:
        return sum(s.failures for s in self.patterns.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "examples_per_pattern": self.examples_per_pattern,
            "vnni": self.vnni,
            "failures": self.failures,
            "patterns": {k: v.to_dict() for k, v in self.patterns.items()},
            "details": self.details,
            "seconds": round(self.seconds, 2),
        }

    def summary(self) -> str:
        lines = [
            f"published formats: seed {self.seed}, {self.examples_per_pattern} examples per "
            f"pattern, VNNI {'yes' if self.vnni else 'no'}, {self.seconds:.1f} s"
        ]
        for name, s in self.patterns.items():
            refused = ", ".join(f"{k} {v}" for k, v in sorted(s.refused.items())) or "none"
            lines.append(
                f"  {name}: {s.examples} examples, {s.converted} converted, refused: {refused}; "
                f"agree {s.validated}, stated exact {s.exact}; known differences "
                f"{s.known_differences} (largest {s.largest_known_step:g} steps, "
                f"{s.largest_known_diff:.3g} abs); "
                f"failures {s.failures} ({s.seconds:.1f} s)"
            )
        for detail in self.details[:10]:
            lines.append(f"  FAIL {detail}")
        return "\n".join(lines)


def _nodes(model: onnx.ModelProto) -> list[tuple[object, ...]]:
    return [
        (
            n.op_type,
            n.domain,
            n.name,
            list(n.input),
            list(n.output),
            *[a.SerializeToString() for a in n.attribute],
        )
        for n in model.graph.node
    ]


def _initializers(model: onnx.ModelProto) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    found = {}
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        found[tensor.name] = (str(array.dtype), array.shape, array.tobytes())
    return found


class FormatChecker:
    def __init__(self, report: FormatsReport) -> None:
        self.report = report

    def _fail(self, example: FormatModel, seed: int, step: str, message: str) -> None:
        self.report.patterns[example.pattern].failures += 1
        if len(self.report.details) < 50:
            self.report.details.append(
                {
                    "pattern": example.pattern,
                    "step": step,
                    "message": message[:400],
                    "expect": example.expect,
                    "choices": example.choices,
                    "seed": seed,
                }
            )

    def check(self, example: FormatModel, seed: int) -> None:
        stats = self.report.patterns.setdefault(example.pattern, PatternStats())
        stats.examples += 1
        try:
            result = quantgraph.convert(example.model)
        except NoQuantization:
            if example.expect != LEFT:  # a float model: right only for a chain left alone
                self._fail(example, seed, "convert", "NoQuantization")
            else:
                stats.refused[LEFT] = stats.refused.get(LEFT, 0) + 1
            return
        except Exception as error:  # a refusal is a skip code, never an exception
            self._fail(example, seed, "convert", f"{type(error).__name__}: {error}")
            return
        report = result.report
        done = {op: report.converted.get(op, 0) for op in example.ops}
        if example.expect is not None:
            stats.refused[example.expect] = stats.refused.get(example.expect, 0) + 1
            codes = [s.code for s in report.skipped]
            main = next(iter(example.ops))  # a DynamicQuantizeLinear converts on its own
            if done[main]:
                self._fail(example, seed, "convert", f"converted {done}, expected a refusal")
            elif example.expect != LEFT and example.expect not in codes:
                self._fail(example, seed, "convert", f"skip codes {codes}, expected one")
            return
        if done != example.ops:
            skipped = [(s.node, s.code, s.reason) for s in report.skipped]
            self._fail(example, seed, "convert", f"converted {done} of {example.ops}: {skipped}")
            return
        stats.converted += 1
        for fusion in FUSIONS:
            self._validate(example, seed, result.proto, fusion, stats)
        self._lower(example, seed, result.proto)

    def _validate(
        self,
        example: FormatModel,
        seed: int,
        converted: onnx.ModelProto,
        fusion: str,
        stats: PatternStats,
    ) -> None:
        try:
            validation = quantgraph.validate(
                example.model, converted, backend="native", fusion=fusion, seed=seed % 2**31
            )
        except Exception as error:
            self._fail(example, seed, f"validate {fusion}", f"{type(error).__name__}: {error}")
            return
        if validation.exact_expected:
            stats.exact[fusion] = stats.exact.get(fusion, 0) + 1
        if validation.agree:
            stats.validated[fusion] = stats.validated.get(fusion, 0) + 1
            return
        steps = [stats_.max_steps or 0.0 for stats_ in validation.error_stats.values()] or [0.0]
        if example.inexact is not None or self._known(example, fusion):
            stats.known_differences += 1
            stats.largest_known_step = max(stats.largest_known_step, *steps)
            diff = max(o.max_abs_diff or 0.0 for o in validation.outputs)
            stats.largest_known_diff = max(stats.largest_known_diff, diff)
            return
        worst = [(o.name, o.mismatches, o.max_abs_diff) for o in validation.outputs if not o.agree]
        self._fail(
            example,
            seed,
            f"validate {fusion}",
            f"{validation.comparison}: {worst}, steps {steps}",
        )

    @staticmethod
    def _known(example: FormatModel, fusion: str) -> bool:
        """Unfused, QOperator's integer kernels requantize their own way (a step near a tie,
        which the bound the model gives need not cover on a tiny random model) and u8 x s8
        kernels without VNNI saturate int16 pair sums (where the like-with-like reference does
        not store a weight as uint8: a runtime or non-constant one). Fused, integer ops and
        QOperator nodes go back as the original's: the same kernel on both sides, never a known
        difference."""
        if fusion != "none":
            return False
        return example.pattern == "qoperator" or (example.saturates and not cpu().vnni)

    def _lower(self, example: FormatModel, seed: int, converted: onnx.ModelProto) -> None:
        try:
            lowered = quantgraph.lower(converted)
        except Exception as error:
            self._fail(example, seed, "lower", f"{type(error).__name__}: {error}")
            return
        if lowered.report.skipped:
            skipped = [(s.node, s.code) for s in lowered.report.skipped]
            self._fail(example, seed, "lower", f"skipped {skipped}")
        back = lowered.proto
        if _nodes(back) != _nodes(example.model):
            got = [(n.op_type, n.name) for n in back.graph.node]
            want = [(n.op_type, n.name) for n in example.model.graph.node]
            self._fail(example, seed, "lower", f"nodes {got} != original {want}")
        if _initializers(back) != _initializers(example.model):
            got_names = sorted(_initializers(back))
            want_names = sorted(_initializers(example.model))
            self._fail(example, seed, "lower", f"initializers differ: {got_names} vs {want_names}")


def run_formats(
    patterns: Sequence[str] = PATTERNS, examples: int = 50, seed: int = 0
) -> FormatsReport:
    """Draw ``examples`` models of each pattern (hypothesis seeded by ``seed``) and check them."""
    report = FormatsReport(seed, examples, cpu().vnni)
    checker = FormatChecker(report)
    start = time.perf_counter()
    for index, pattern in enumerate(patterns):
        if pattern not in BUILDERS:
            raise ValueError(f"unknown pattern {pattern!r}; choose from {', '.join(PATTERNS)}")
        report.patterns.setdefault(pattern, PatternStats())
        began = time.perf_counter()

        @hypothesis_seed(seed + index)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(drawn=format_models(pattern))
        def fuzz_one(drawn: tuple[FormatModel, int]) -> None:
            checker.check(*drawn)

        fuzz_one()
        report.patterns[pattern].seconds = time.perf_counter() - began
    report.seconds = time.perf_counter() - start
    return report
