"""Validating a QOperator original (QLinearConv, QLinearMatMul, QGemm, QLinearAdd, ...) against
its conversion: not the same arithmetic, so not expected to be exact.

The converted model computes each node as the spec's composition (dequantize, the float op in
float32, quantize); the original's kernels sum in int32 and requantize with their own rounding,
and onnxruntime's u8 x s8 kernels on x86 CPUs without VNNI saturate int16 pair sums (vpmaddubsw):
measured on such a CPU, a 3x3 QLinearConv with u8 activations 49 steps apart on one element,
while s8 activations (s8 x s8 kernels) gave 0 differences in 200 samples. With fusion
"onnxruntime" at ORT_ENABLE_ALL each QOperator node goes back to onnxruntime as the original's
node (quantgraph.fusion.ort.ort_engine): the same kernels on both sides, so the comparison must be
identical (:mod:`.given_back`); this text judges only a node that could not go back. Unfused
the comparison is judged by a bound the model gives (:mod:`.rounding_spread`: a step flipped at
a tie, carried on by later layers), or --atol/--rtol where given; on a CPU whose u8 x s8 kernels
saturate, the reference stores int8 weights as uint8 (:mod:`.like_reference`).
"""

from __future__ import annotations

from ...ir.walk import GraphLike
from ...passes.integer.qoperator import form_of

QOPERATOR = (
    "{original} (QOperator integer kernels: {ops}) vs rewritten (the spec's composition around "
    "the float op) on the {backend} backend, both at {level}: not expected to be exact, "
    "{judged}; each output's largest difference is also given in its quantization steps"
)
QOPERATOR_NOTE = (
    "QLinearConv/QLinearMatMul/QGemm sum in int32 and requantize with their own rounding where "
    "the spec computes the float op in float32 between dequantize and quantize: a value near a "
    ".5 tie lands one step apart, and onnxruntime's u8 x s8 kernels on CPUs without VNNI saturate "
    "int16 pair sums (tens of steps on a 3x3 Conv, measured); with fusion 'onnxruntime' at "
    "ORT_ENABLE_ALL a QOperator node that goes back to onnxruntime as the original's node is "
    "identical, one that cannot (an exposed intermediate output) is judged here"
)


def qoperator_ops(original: GraphLike, rewritten: GraphLike) -> list[str]:
    """The QOperator op types the original computes and the rewritten model no longer has."""
    kept = {n.op_type for n in rewritten if form_of(n) is not None}
    return sorted({n.op_type for n in original if form_of(n) is not None} - kept)


def comparison(
    ops: list[str], backend: str, fusion: str, original: str, judged: str
) -> tuple[str, str]:
    """(comparison, note): ``original`` names the reference, ``judged`` how it is judged."""
    level = "ORT_DISABLE_ALL" if fusion == "none" else f"ORT_ENABLE_ALL (fusion '{fusion}')"
    text = QOPERATOR.format(
        original=original, ops=", ".join(ops), backend=backend, level=level, judged=judged
    )
    return text, QOPERATOR_NOTE
