"""What a validation compares, decided before any model runs: the reference (the original as
written, its like-with-like copy, or the original in oneDNN's arithmetic), the tensors exposed
(--intermediate), the optimization level, and where the rewritten model computes in another
arithmetic than the original as run (integer sums, QOperator kernels, other kernels)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import onnx
import onnx_ir as ir
import onnxruntime as ort

from ..fusion.plan import PARTITION_MODES
from .compare import integer_sums, other_kernels, qoperator
from .compare.error_stats import has_quantization
from .compare.like_reference import LikeReference, like_reference
from .debug.intermediate import with_all_outputs
from .onednn import onednn_reference
from .original import Original, quiet_options


@dataclass(frozen=True)
class Setup:
    fusion: str
    level: ort.GraphOptimizationLevel  # both sides' (ORT_ENABLE_ALL where fused)
    float_reference: bool  # a float original against its quantized form
    like: LikeReference | None  # the like-with-like reference (None: the original is its own)
    exposed: ir.Model | onnx.ModelProto | None  # the reference, every tensor an output
    tensor_names: list[str]  # the tensors exposed beside the outputs
    reference: onednn_reference.OnednnReference | None  # the original in oneDNN's arithmetic
    onednn_fused: bool  # oneDNN's partitions run the rewritten side
    integer: bool  # converted integer ops (integer_sums)
    qop: list[str]  # QOperator nodes, run by the original with integer kernels
    kernels: list[str]  # unfused nodes the original runs with another kernel

    @property
    def judged(self) -> bool:
        """Whether the rewritten side computes another arithmetic than the original as run,
        and is judged (by a bound or --atol/--rtol) rather than compared exactly."""
        return bool(self.qop or self.integer or self.kernels)

    def noise_base(self, original: ir.Model) -> onnx.ModelProto:
        """The model the bound's rounding noise goes into: the like-with-like reference, else
        the original."""
        return self.like.proto if self.like is not None else ir.to_proto(original)

    def given_back(self, rewritten: ir.Model) -> Setup:
        """The setup once the fusion plan gave every one of the original's nodes back: they
        run on both sides, so neither integer sums nor QOperator kernels differ."""
        kernels = [] if self.float_reference else other_kernels.differing(rewritten, self.fusion)
        return replace(self, integer=False, qop=[], kernels=kernels)


def comparison_setup(
    source: Original,
    rewritten: ir.Model,
    backend: str | None,
    arithmetic: str | None,
    fusion: str,
    intermediate: bool,
) -> Setup:
    float_reference = not has_quantization(source.ir.graph) and has_quantization(rewritten.graph)
    like = _like(source.ir, rewritten, fusion, float_reference)
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
    integer = integer_sums.converted(rewritten) and not float_reference and not onednn_fused
    qop = qoperator.qoperator_ops(source.ir.graph, rewritten.graph)  # integer kernels
    kernels = [] if float_reference or qop else other_kernels.differing(rewritten, fusion)
    return Setup(
        fusion, level, float_reference, like, exposed, tensor_names, reference, onednn_fused,
        integer, qop, kernels,
    )  # fmt: skip


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
