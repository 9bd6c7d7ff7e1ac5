"""What a validation found, for people (cli.py prints it) and machines (``to_dict``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fusion.plan import PARTITION_MODES
from ..reference.compare import TensorComparison
from .compare.error_stats import ErrorStats
from .compare.like_reference import LikeReference
from .compare.rounding_spread import SpreadBound
from .debug.debugger import QuantizationDebug
from .generation.generation_report import GenerationReport
from .inputs.search_report import InputSearch, MemoryCheck
from .onednn.partition_report import PartitionCheck, PartitionDivergence, first_divergence
from .page.html_page import write_page

# Each comparison is a short line (``comparison``) and why it is judged so (``..._NOTE``).
EXACT = "original vs rewritten on the {backend} backend, both at ORT_DISABLE_ALL: must be identical"
EXACT_NOTE = (
    "ORT_DISABLE_ALL runs Q/DQ unfused (the spec's composition); no other graph rewrite changes "
    "either side's arithmetic"
)
ONEDNN_ARITHMETIC = (
    "original (ONNX's arithmetic) vs rewritten as {engine} computes it, both at "
    "ORT_DISABLE_ALL: not expected to be exact, judged by --atol/--rtol"
)
ONEDNN_NOTE = (
    "oneDNN quantizes as rne(x * (1/s) + zp) in float32 where ONNX computes rne(x / s) + zp, so "
    "values at or near .5 ties can land one quantization step apart (and so can everything "
    "computed from them), and float8 overflow becomes NaN where ONNX saturates"
)
ONEDNN_LIKE = (
    "original in oneDNN's arithmetic vs rewritten as {engine} computes it, both at {level}: "
    "must be identical"
)
ONEDNN_LIKE_NOTE = (
    "oneDNN quantizes as rne(x * (1/s) + zp) in float32, ONNX as rne(x / s) + zp (the spec leaves "
    "rounding open), so the original is evaluated in oneDNN's arithmetic: converted, on the native "
    "backend's model of oneDNN (bit for bit with oneDNN in the conformance tests); its distance "
    "to the original in ONNX's arithmetic is information, in quantization steps"
)
ONNX_ARITHMETIC = (
    "original in ONNX's arithmetic vs rewritten: informational, not part of the verdict; judged "
    "by --atol/--rtol"
)
FUSED = (
    "original vs rewritten with fusion '{fusion}' on the {backend} backend, both at "
    "ORT_ENABLE_ALL: must be identical"
)
FUSED_NOTE = (
    "the rewritten model's units run as onnxruntime's fused kernels, as the original's Q/DQ do "
    "(converted integer ops, QOperator nodes, MatMulNBits and Cast chains go back as the "
    "original's own nodes); the spec ops onnxruntime does not fuse run on the backend, "
    "bit-exact with its QuantizeLinear/DequantizeLinear"
)
FUSED_ONEDNN = (
    "original at ORT_ENABLE_ALL vs rewritten with fusion '{fusion}' on the {backend} backend "
    "({engine}): not expected to be exact, judged by --atol/--rtol; each output's largest "
    "difference is also given in its quantization steps"
)
FUSED_ONEDNN_NOTE = (
    "oneDNN's partitions requantize as oneDNN does (rne(x * (1/s) + zp) in float32, "
    "accumulating in its own order), and onnxruntime's fused kernels on the original side round "
    "their own way, so quantized values can land a step apart and everything computed from them "
    "follows"
)
QUANTIZATION_ERROR = (
    "float model vs quantized model on the {backend} backend, both at ORT_DISABLE_ALL: the "
    "quantization error, judged by {judged}"
)
# A float model against its quantized form, without a tolerance: each output's signal to
# quantization-noise ratio over every sample must reach this (noise energy at most 1% of the
# signal's). --min-sqnr sets another; --atol/--rtol alone judge element by element instead.
DEFAULT_MIN_SQNR = 20.0
# Fewer output values than this in all (a model whose only output is a score, one sample)
# make a verdict that says little: the report says so, and how many samples would compare
# ENOUGH_VALUES.
FEW_VALUES = 10
ENOUGH_VALUES = 100
QUANTIZATION_NOTE = (
    "tensors are paired by name, each float activation with its value after its Q/DQ pair (what "
    "the next layer reads, as onnxruntime's qdq_loss_debug pairs them); not expected to be exact: "
    "the page of --report shows the SQNR of every tensor"
)
AS_RUN = (
    "original as onnxruntime runs it vs rewritten: informational, not part of the verdict; "
    "judged as the verdict is (the bound, or --atol/--rtol)"
)
OPTIMIZED = (
    "original at ORT_ENABLE_ALL vs rewritten: informational, not part of the verdict; judged by "
    "--atol/--rtol"
)
OPTIMIZED_NOTE = (
    "at ORT_ENABLE_ALL onnxruntime fuses Q/DQ into integer kernels (QLinearConv, ...), which "
    "round differently: not expected to be exact"
)


@dataclass(frozen=True)
class Divergence:
    """The first tensor, in the original's node order, on which the two models part."""

    node: str
    op_type: str
    rewritten_op_type: str
    tensor: str
    max_abs_diff: float
    max_ulp_diff: int
    mismatches: int
    elements: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class IntermediateReport:
    tensors_compared: int
    tensors_differing: int
    first_divergence: Divergence | None
    differing: list[TensorComparison] = field(default_factory=list)
    # Every compared tensor's name in the original's node order (the page plots along it),
    # with the original's node and op type that computes it.
    order: list[str] = field(default_factory=list)
    producers: dict[str, tuple[str, str]] = field(default_factory=dict)
    # oneDNN's partitions (fusion "onednn", or "auto" where it chose some), in graph order,
    # each checked alone against the spec's composition of its ops
    # (:mod:`quantgraph.validation.onednn.partitions`).
    partitions: list[PartitionCheck] | None = None

    @property
    def first_partition_divergence(self) -> PartitionDivergence | None:
        return None if self.partitions is None else first_divergence(self.partitions)

    def to_dict(self) -> dict[str, object]:
        first = self.first_divergence
        partition = self.first_partition_divergence
        return {
            "tensors_compared": self.tensors_compared,
            "tensors_differing": self.tensors_differing,
            "first_divergence": None if first is None else first.to_dict(),
            "differing": [t.to_dict() for t in self.differing],
            "partitions": None
            if self.partitions is None
            else [p.to_dict() for p in self.partitions],
            "first_partition_divergence": None if partition is None else partition.to_dict(),
        }


@dataclass
class ValidationReport:
    comparison: str
    backend: str
    outputs: list[TensorComparison]
    inputs: dict[str, dict[str, object]]  # name -> dtype, shape, range, why (or "file")
    seed: int | None
    samples: int = 1
    # What each sample was: "seed 0", a decoder's "prefill (past 0, 128 new tokens), seed 0",
    # or the file it came from; and each case's inputs when a model has several (a decoder).
    sample_names: list[str] = field(default_factory=list)
    cases: dict[str, dict[str, dict[str, object]]] | None = None
    optimized: list[TensorComparison] = field(default_factory=list)
    tolerance: tuple[float, float] = (0.0, 0.0)
    intermediate: IntermediateReport | None = None
    arithmetic: str = "onnx"  # the rewritten side's (see quantgraph.backends)
    engine: str | None = None  # the oneDNN that ran the rewritten side (onednn backend)
    comparison_note: str = ""  # why the comparison is judged as it is
    input_search: InputSearch | None = None  # set when the first plan of inputs was refused
    memory: MemoryCheck | None = None  # generated inputs: the estimate of the plan that ran
    # The original is a float model and the other its quantized form: the quantization error.
    float_reference: bool = False
    # Integer ops converted to float ones (quantgraph.validation.compare.integer_sums): judged by
    # a bound.
    integer_sums: bool = False
    # The original's QOperator op types the rewritten model computes as the spec's composition
    # (quantgraph.validation.compare.qoperator): another arithmetic, not expected to be exact.
    qoperator: list[str] = field(default_factory=list)
    # Converted nodes whose original onnxruntime runs with another kernel unfused
    # (quantgraph.validation.compare.other_kernels): judged by a bound.
    other_kernels: list[str] = field(default_factory=list)
    # Where the original runs other kernels than the spec form means (accuracy_level >= 1
    # MatMulNBits, saturating u8 x s8 kernels): the copy it is evaluated as
    # (quantgraph.validation.compare.like_reference); the original as onnxruntime runs it is then
    # compared beside the verdict (``as_run``).
    like_reference: LikeReference | None = None
    as_run: list[TensorComparison] = field(default_factory=list)
    # The bound a comparison that cannot be exact is judged by when no --atol/--rtol is given:
    # per output, from the reference's own spread under rounding noise
    # (quantgraph.validation.compare.rounding_spread).
    bound: SpreadBound | None = None
    fusion: str = "none"  # the rewritten side's fusion mode (quantgraph.fusion)
    fusion_plan: Any = None  # its FusionPlan when fusion was used
    # Distributions of the differences, outputs then intermediate tensors (the HTML page).
    error_stats: dict[str, ErrorStats] = field(default_factory=dict)
    # The arithmetic the original was evaluated in: "onednn" where the rewritten side computes
    # oneDNN's (see quantgraph.validation.onednn.onednn_reference), then the comparison with the
    # original in ONNX's arithmetic is information, with each output's difference in steps.
    reference_arithmetic: str = "onnx"
    onnx_arithmetic: list[TensorComparison] = field(default_factory=list)
    onnx_arithmetic_steps: dict[str, float | None] = field(default_factory=dict)
    # The models' names as the page shows them, and the files they were read from (which the
    # page never replaces).
    original: str = "the original"
    rewritten: str = "the rewritten model"
    model_files: tuple[Path, ...] = ()
    # Against a float original with intermediate tensors: the error introduced per quantized
    # tensor and node, ranked, and what keeping the worst in float gains
    # (:mod:`quantgraph.validation.debug.debugger`).
    debug: QuantizationDebug | None = None
    # A decoder original: the greedy generation on both models
    # (:mod:`quantgraph.validation.generation.greedy`).
    generation: GenerationReport | None = None
    # Against a float original: the output SQNR (dB) every output must reach (None: judged by
    # the tolerances alone, which the caller gave instead).
    min_sqnr: float | None = None
    # The samples came from files (--inputs), not from a seed (how to compare more differs).
    inputs_given: bool = False

    def write_html(self, path: str | os.PathLike[str], *, force: bool = False) -> Path:
        """Write the report as ``validate --report``'s self-contained HTML page, by the rules
        of every output (:mod:`quantgraph.ir.output_files`: complete or not at all, never over
        either model, an existing file replaced only with ``force``)."""
        return write_page(
            Path(path), self, self.original, self.rewritten, force=force, protect=self.model_files
        )

    @property
    def exact_expected(self) -> bool:
        """Both sides compute one arithmetic (ONNX's, or oneDNN's on both): any difference is
        a disagreement. Not so against a float original, nor with oneDNN partitions (fusion
        "onednn"/"auto": they requantize and accumulate their own way), nor against a QOperator
        original (integer kernels), nor unfused where the original's kernel computes otherwise
        (MatMulNBits, float16 Cast chains: :mod:`quantgraph.validation.compare.other_kernels`)."""
        onednn_fused = self.fusion in PARTITION_MODES
        same = self.arithmetic == self.reference_arithmetic
        return (
            same
            and not self.float_reference
            and not onednn_fused
            and not self.integer_sums
            and not self.qoperator
            and not self.other_kernels
        )

    def _reference(self) -> dict[str, object]:
        assert self.like_reference is not None
        atol, rtol = self.tolerance
        found = self.like_reference.to_dict()
        found["original"] = {
            "comparison": AS_RUN,
            "comparison_note": self.like_reference.original_note(),
            "part_of_verdict": False,
            "atol": atol,
            "rtol": rtol,
            "within_tolerance": all(o.within_tolerance for o in self.as_run),
            "outputs": [o.to_dict() for o in self.as_run],
        }
        return found

    @property
    def judged_by_tolerance(self) -> bool:
        """Elements are judged by atol/rtol: where exactness is not expected, unless an
        output SQNR judges a float original and no tolerance was given."""
        if self.exact_expected:
            return False
        return self.min_sqnr is None or self.tolerance != (0.0, 0.0)

    @property
    def criterion(self) -> str:
        """The verdict's rule, stated."""
        if self.exact_expected:
            return "exact: any differing element (bitwise; NaN equals NaN) is a disagreement"
        rules = []
        if self.min_sqnr is not None:
            rules.append(
                f"each output's SQNR over all samples at least {self.min_sqnr:g} dB (its "
                f"noise energy at most {100 * 10 ** (-self.min_sqnr / 10):.3g}% of its "
                "signal's; --min-sqnr to change)"
            )
        if self.judged_by_tolerance and self.bound is not None and self.tolerance == (0.0, 0.0):
            rules.append("every element within the bound the model gives its output (bound:)")
        elif self.judged_by_tolerance:
            atol, rtol = self.tolerance
            rules.append(
                f"every element within atol + rtol * |expected| (atol={atol:g} rtol={rtol:g})"
            )
        return " and ".join(rules)

    def output_sqnr(self, name: str) -> float | None:
        """An output's SQNR over every sample, None where it has none to speak of (shapes
        apart, or a NaN or infinity where the other side has a number)."""
        stats = self.error_stats.get(name)
        output = next((o for o in self.outputs if o.name == name), None)
        if stats is None or output is None or stats.elements != output.elements:
            return None
        return None if stats.nonfinite else stats.sqnr_db

    def output_agrees(self, output: TensorComparison) -> bool:
        """One output by :attr:`criterion`."""
        if self.exact_expected:
            return output.agree
        if self.judged_by_tolerance and not output.within_tolerance:
            return False
        if self.min_sqnr is not None:
            found = self.output_sqnr(output.name)
            return found is not None and found >= self.min_sqnr
        return True

    @property
    def agree(self) -> bool:
        """Every output by :attr:`criterion`: identical; or, when exactness is not expected,
        within tolerance or the bound (and, against a float original, at the SQNR asked for);
        and a decoder's generation alike at every step fed the same tokens, by the same rule."""
        if self.generation is not None and not self.generation.agree:
            return False
        return all(self.output_agrees(o) for o in self.outputs)

    @property
    def values_compared(self) -> int:
        """Output values compared, over every output and sample."""
        return sum(o.elements for o in self.outputs)

    @property
    def few_values(self) -> str | None:
        """What to say when so few values were compared that the verdict says little."""
        compared = self.values_compared
        if compared >= FEW_VALUES or not self.outputs:
            return None
        each = max(1, compared // max(self.samples, 1))
        shapes = ", ".join(f"'{o.name}' {o.shape}" for o in self.outputs[:3])
        samples = "1 sample" if self.samples == 1 else f"{self.samples} samples"
        if self.inputs_given:
            more = "give more sample files to --inputs (a folder of .npz or .npy)"
        else:
            wanted = -(-ENOUGH_VALUES // each)
            more = f"--iterations {wanted} (iterations={wanted}) compares {wanted * each}"
        return (
            f"only {compared} output value{'' if compared == 1 else 's'} compared ({samples} "
            f"of {shapes}): a verdict on so few says little; {more}"
        )

    def to_dict(self) -> dict[str, object]:
        atol, rtol = self.tolerance
        return {
            "agree": self.agree,
            "criterion": self.criterion,
            "min_sqnr_db": self.min_sqnr,
            "values_compared": self.values_compared,
            "few_values": self.few_values,
            "comparison": self.comparison,
            "comparison_note": self.comparison_note,
            "exact_expected": self.exact_expected,
            "backend": self.backend,
            "arithmetic": self.arithmetic,
            "onednn": self.engine,
            "atol": atol,
            "rtol": rtol,
            "seed": self.seed,
            "samples": self.samples,
            "sample_names": list(self.sample_names),
            "inputs": self.inputs,
            "cases": self.cases,
            "input_search": None if self.input_search is None else self.input_search.to_dict(),
            "memory": None if self.memory is None else self.memory.to_dict(),
            "outputs": [o.to_dict() for o in self.outputs],
            "optimized": {
                "comparison": OPTIMIZED,
                "comparison_note": OPTIMIZED_NOTE,
                "part_of_verdict": False,
                "atol": atol,
                "rtol": rtol,
                "within_tolerance": all(o.within_tolerance for o in self.optimized),
                "outputs": [o.to_dict() for o in self.optimized],
            }
            if self.optimized
            else None,
            "reference_arithmetic": self.reference_arithmetic,
            "onnx_arithmetic": {
                "comparison": ONNX_ARITHMETIC,
                "comparison_note": ONEDNN_NOTE,
                "part_of_verdict": False,
                "atol": atol,
                "rtol": rtol,
                "within_tolerance": all(o.within_tolerance for o in self.onnx_arithmetic),
                "outputs": [o.to_dict() for o in self.onnx_arithmetic],
                "max_abs_diff_steps": dict(self.onnx_arithmetic_steps),
            }
            if self.onnx_arithmetic
            else None,
            "intermediate": None if self.intermediate is None else self.intermediate.to_dict(),
            "reference": None if self.like_reference is None else self._reference(),
            "bound": None if self.bound is None else self.bound.to_dict(),
            "float_reference": self.float_reference,
            "qoperator": list(self.qoperator),
            "fusion": self.fusion,
            "fusion_plan": None if self.fusion_plan is None else self.fusion_plan.to_dict(),
            "debug": None if self.debug is None else self.debug.to_dict(),
            "generation": None if self.generation is None else self.generation.to_dict(),
            "error_stats": [
                self.error_stats[o.name].to_dict()
                for o in self.outputs
                if o.name in self.error_stats
            ],
        }
