"""Graph passes (onnx-ir): rewriting ONNX Q/DQ into the spec ops and back."""

from .qdq_to_spec import QDQ_OPS, QdqToSpecPass, RewriteResult
from .report import ConvertedNode, RewriteReport, SkippedNode

__all__ = [
    "QDQ_OPS",
    "ConvertedNode",
    "QdqToSpecPass",
    "RewriteReport",
    "RewriteResult",
    "SkippedNode",
]
