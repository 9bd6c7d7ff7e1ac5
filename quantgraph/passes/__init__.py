"""Graph passes (onnx-ir): rewriting ONNX Q/DQ into the spec ops and back."""

from .explicit_form import ExplicitFormPass, StaticToDynamicPass
from .qdq_to_spec import QDQ_OPS, QdqToSpecPass, RewriteResult
from .report import ConvertedNode, RewriteReport, SkippedNode
from .spec_to_qdq import SpecToQdqPass

__all__ = [
    "QDQ_OPS",
    "ExplicitFormPass",
    "SpecToQdqPass",
    "StaticToDynamicPass",
    "ConvertedNode",
    "QdqToSpecPass",
    "RewriteReport",
    "RewriteResult",
    "SkippedNode",
]
