"""The oracle: numpy kernels of the four operators in ONNX's arithmetic and a numpy model of
oneDNN's (:mod:`.onednn_arithmetic`), the ReferenceEvaluator ops (:mod:`.evaluator`) and the one
rule by which results are compared (:mod:`.compare`). Never imports onnxruntime.

``from quantgraph import reference`` then ``reference.run(...)``: the checked calls and ONNX's
arithmetic below."""

from .onnx_arithmetic import dequantize_values, expand_groups, quantize_values
from .operators import (
    Call,
    checked_call,
    dequantize,
    dynamic_dequantize,
    dynamic_quantize,
    quantize,
    run,
)

__all__ = [
    "Call",
    "checked_call",
    "dequantize",
    "dequantize_values",
    "dynamic_dequantize",
    "dynamic_quantize",
    "expand_groups",
    "quantize",
    "quantize_values",
    "run",
]
