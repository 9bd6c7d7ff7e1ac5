"""What validate refuses before any model runs: a tolerance or --min-sqnr that would judge
nothing, and two models whose inputs differ."""

from __future__ import annotations

import onnx_ir as ir

from ..errors import ModelError
from ..fusion.plan import PARTITION_MODES
from .compare import integer_sums, other_kernels, qoperator
from .compare.error_stats import has_quantization
from .inputs import feeds


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


def same_inputs(original: ir.Model, rewritten: ir.Model, labels: tuple[str, str]) -> None:
    """Two unrelated models fail here, before anything runs, saying how their inputs differ."""
    differences = feeds.signature_differences(original, rewritten, *labels)
    if differences:
        raise ModelError(
            "the models' inputs differ, so the rewritten model is not a form of the original: "
            + "; ".join(differences)
        )
