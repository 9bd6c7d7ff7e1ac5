"""Validating at ORT_DISABLE_ALL a conversion whose original onnxruntime runs with another kernel
than the spec's composition, so not expected to be exact there (found by tools.fuzz.formats):

* com.microsoft MatMulNBits: onnxruntime's kernel, not DequantizeLinear + MatMul. With one row
  of A it takes its GEMV path, which sums the K products in another order than MatMul (measured
  on onnxruntime 1.32, float32, accuracy_level 0 or unset: 1.2e-7 to 4.8e-6 apart, K <= 300);
  accuracy_level >= 1 quantizes A to int8 (the reference is then the original at accuracy_level
  0: :mod:`.like_reference`), typed zero points and g_idx compute q*s - zp*s, and the bias is
  added inside the kernel.
* A weight-only float16 Cast [-> Sub] -> Mul: onnxruntime's CPU has no float16 Sub/Mul, so it
  computes them in float32 and, where the next op runs in float32 too, drops the Cast pair
  between them (InsertCastTransformer): the consumer reads the unrounded float32 weight. The
  spec form (and ONNX) rounds the weight to float16: each weight element is up to half a
  float16 ulp (2^-11 relative) apart, and each output by up to 2^-11 * sum |a * w| before its
  own rounding to float16.

Both are judged by a bound the model gives (:mod:`.rounding_spread`), or --atol/--rtol where
given. With fusion "onnxruntime" (ORT_ENABLE_ALL) both go back to onnxruntime in the original's form
(quantgraph.fusion.ort.ort_engine): the same kernel on both sides, must be identical.
"""

from __future__ import annotations

import json

import onnx_ir as ir

from ...ir.walk import all_graphs
from ...passes.contrib.matmul_nbits import RECORD as NBITS_RECORD
from ...passes.qdq.cast_scale import RECORD as CAST_RECORD

MATMUL_NBITS = "MatMulNBits"
FLOAT16_CHAIN = "float16 Cast -> Mul"
COMPARISON = (
    "{original} ({kinds} as onnxruntime's kernels compute them) vs rewritten (the spec's "
    "composition) on the {backend} backend, both at ORT_DISABLE_ALL: not expected to be exact, "
    "{judged}"
)
NOTES = {
    MATMUL_NBITS: "MatMulNBits runs onnxruntime's own kernel, not DequantizeLinear + MatMul: one "
    "row of A takes its GEMV path, which sums the K products in another order (float32: apart "
    "by at most 2(K-1) * 2^-24 * sum |a * w|, measured <= 4.8e-6); accuracy_level >= 1 "
    "quantizes A to int8 (so the reference is the original at accuracy_level 0), float16 rows "
    "round the weight otherwise, typed zero points and g_idx compute q*s - zp*s, a bias is "
    "added inside the kernel",
    FLOAT16_CHAIN: "onnxruntime's CPU computes a float16 Sub/Mul in float32 and hands the "
    "unrounded weight to a float32 consumer (InsertCastTransformer drops the cast pair); the "
    "spec form rounds it to float16 as ONNX does: each weight element up to 2^-11 relative "
    "apart, each output up to 2^-11 * sum |a * w| plus its own float16 rounding",
}
NOTE_END = (
    "; with fusion 'onnxruntime' at ORT_ENABLE_ALL these nodes go back to onnxruntime in the "
    "original's form and must be identical"
)


def differing(model: ir.Model, fusion: str) -> list[str]:
    """The kinds of converted node in ``model`` whose original onnxruntime computes otherwise
    than the spec form when nothing is fused (fusion "none"); empty for other fusions."""
    if fusion != "none":
        return []
    found: set[str] = set()
    for graph in all_graphs(model):
        for node in graph:
            if NBITS_RECORD in node.metadata_props:
                found.add(MATMUL_NBITS)
            record = node.metadata_props.get(CAST_RECORD)
            if record is not None and _to_float16(record):
                found.add(FLOAT16_CHAIN)
    return sorted(found)


def _to_float16(record: str) -> bool:
    attributes = dict((name, value) for name, value in json.loads(record)["cast"][2])
    return bool(attributes.get("to") == ir.DataType.FLOAT16.value)


def comparison(kinds: list[str], backend: str, original: str, judged: str) -> tuple[str, str]:
    """(comparison, note): ``original`` names the reference, ``judged`` how it is judged."""
    text = COMPARISON.format(
        original=original, kinds=", ".join(kinds), backend=backend, judged=judged
    )
    return text, "; ".join(NOTES[k] for k in kinds) + NOTE_END
