"""Validating a model whose integer ops were converted (quantgraph.passes.integer.integer_ops).

quantize_dynamic's MatMulInteger/ConvInteger sum (a - za)(w - zw) in int32 (exact) and scale the
sum once, ``float(sum) * (sa * sw)``; the spec form sums the dequantized operands
``(a - za) * sa * (w - zw) * sw`` in float32. The two are not bit-exact at ORT_DISABLE_ALL:
each output of such an op differs by the float32 rounding of a sum of K products (measured on
quantize_dynamic's MLPs and CNNs, K up to 256: at most 4e-7 relative to the output's largest
magnitude), and a later DynamicQuantizeLinear turns that into a quantization step where a value
sits at a rounding tie, which every later layer carries on (a 6-layer encoder's outputs of
magnitude ~3: up to 0.08 apart). So the comparison is judged by a bound the model gives
(:mod:`.rounding_spread`), or by --atol/--rtol where given; on a CPU whose u8 x s8 kernels
saturate, the reference stores int8 weights as uint8 (:mod:`.like_reference`). With fusion
"onnxruntime" the integer ops go back to onnxruntime as the original's (:mod:`.given_back`):
identical, not judged here.
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.walk import all_graphs
from ...passes.integer.integer_ops import RECORD

COMPARISON = (
    "{original} (integer ops summing in int32) vs rewritten (float {ops} of dequantized "
    "operands, summing in float32) on the {backend} backend, both at {level}: not expected to "
    "be exact, {judged}"
)
NOTE = (
    "MatMulInteger/ConvInteger sum (a - za)(w - zw) exactly in int32 and scale once; the spec "
    "form dequantizes both operands and sums in float32, so outputs differ by float rounding "
    "(about 1e-7 relative), and by a quantization step where a later DynamicQuantizeLinear "
    "meets a value at a tie, which every later layer carries on"
)


def converted(model: ir.Model) -> bool:
    """Whether ``model`` holds an op converted from an integer op (its record is on it)."""
    return any(RECORD in node.metadata_props for graph in all_graphs(model) for node in graph)


def comparison(backend: str, fusion: str, original: str, judged: str) -> tuple[str, str]:
    """(comparison, note): ``original`` names the reference, ``judged`` how it is judged."""
    level = "ORT_DISABLE_ALL" if fusion == "none" else f"ORT_ENABLE_ALL (fusion '{fusion}')"
    text = COMPARISON.format(
        original=original, ops="MatMul/Conv", backend=backend, level=level, judged=judged
    )
    return text, NOTE
