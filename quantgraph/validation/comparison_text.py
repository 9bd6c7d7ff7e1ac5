"""The report's words for what was compared with what, and how it was judged (its comparison
and comparison_note)."""

from __future__ import annotations

from ..runtime.session import InferenceSession
from .compare import integer_sums, other_kernels, qoperator
from .compare.rounding_spread import SpreadBound
from .comparison_setup import Setup
from .onednn import onednn_reference
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
)


def describe_comparison(
    setup: Setup,
    candidate: InferenceSession,
    exact: bool,
    bound: SpreadBound | None,
    tolerance: tuple[float, float],
    min_sqnr: float | None,
) -> tuple[str, str]:
    """(comparison, note) of the report."""
    atol, rtol = tolerance
    fusion, backend_name = setup.fusion, candidate.backend
    like, qop, integer, kernels = setup.like, setup.qop, setup.integer, setup.kernels
    judged_text = (
        "judged per output by a bound the model gives (bound: its own spread under rounding noise)"
        if bound is not None
        else f"judged by atol={atol:g}, rtol={rtol:g} as given"
    )
    original_text = like.describe() if like is not None and setup.judged else "original"
    if qop:
        return qoperator.comparison(qop, backend_name, fusion, original_text, judged_text)
    if setup.float_reference:
        judged_by = "--atol/--rtol" if min_sqnr is None else "each output's SQNR (--min-sqnr)"
        comparison = QUANTIZATION_ERROR.format(backend=backend_name, judged=judged_by)
        return comparison, QUANTIZATION_NOTE
    if setup.onednn_fused:
        from ..backends import onednn

        comparison = FUSED_ONEDNN.format(
            fusion=fusion, backend=backend_name, engine=onednn.version()
        )
        return comparison, FUSED_ONEDNN_NOTE
    if integer:
        return integer_sums.comparison(backend_name, fusion, original_text, judged_text)
    if kernels:
        return other_kernels.comparison(kernels, backend_name, original_text, judged_text)
    if exact and setup.reference is not None:
        comparison = ONEDNN_LIKE.format(
            engine=candidate.onednn_version or "oneDNN's arithmetic on the native backend",
            level="ORT_DISABLE_ALL" if fusion == "none" else f"ORT_ENABLE_ALL (fusion '{fusion}')",
        )
        return comparison, ONEDNN_LIKE_NOTE
    if exact and fusion != "none":
        return FUSED.format(fusion=fusion, backend=backend_name), FUSED_NOTE
    if exact:
        return EXACT.format(backend=backend_name), EXACT_NOTE
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
    return comparison, note
