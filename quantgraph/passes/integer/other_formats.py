"""Quantized nodes that are not Q/DQ: found, named and explained, never rewritten.

A user bringing a model from onnxruntime's quantizers in QOperator form, its MatMulNBits
weight-only form or quantize_dynamic gets, per node, a reason code and what they can do,
instead of a silent "nothing to convert".
"""

from __future__ import annotations

import functools

import onnx_ir as ir

from ...ir.walk import all_graphs
from ..report import OtherQuantizedNode, RewriteReport
from .qoperator import op_form

CONTRIB = "com.microsoft"
QDQ_ADVICE = (
    "re-quantize the float model in QDQ format (onnxruntime.quantization.quantize_static(..., "
    "quant_format=QuantFormat.QDQ)), whose QuantizeLinear/DequantizeLinear quantgraph converts"
)
# code -> what the nodes are and what the user can do
ADVICE = {
    "qoperator": "a QOperator-format node (integer kernel with its scales and zero points "
    "fused in) quantgraph has no rewrite for (it converts QLinearConv, QLinearMatMul, QGemm and "
    "the QLinear Add/Mul/Concat/AveragePool/GlobalAveragePool/LeakyRelu/Sigmoid/Softmax forms); "
    f"{QDQ_ADVICE}",
    "packed_weight_only": "onnxruntime's packed weight-only op: re-quantize the float model "
    "with MatMulNBitsQuantizer(..., quant_format=QuantFormat.QDQ) (blocked DequantizeLinear, "
    "which quantgraph converts)",
    "integer_op": "integer arithmetic quantgraph does not convert (MatMulInteger16, MulInteger, "
    "ReduceSumInteger; MatMulInteger/ConvInteger are converted with quantize_dynamic's scale "
    f"chain): it runs as it is in onnxruntime; for spec ops around it, {QDQ_ADVICE}",
    "fused_dynamic": "onnxruntime's fused dynamic quantization (quantize_dynamic): quantgraph "
    f"has no such op; {QDQ_ADVICE}",
}
_INTEGER = {"MatMulInteger16", "MulInteger", "ReduceSumInteger"}
_FUSED_DYNAMIC = {"DynamicQuantizeMatMul", "DynamicQuantizeLSTM", "MatMulIntegerToFloat"}
_PACKED = {"MatMulBnb4"}
# Published weight-only formats the conversion rewrites itself (nodes it cannot take are
# reported by its pass, with the reason), so they are not "other" formats.
CONVERTED = {"MatMulNBits", "GatherBlockQuantized"}
# quantize_dynamic's integer ops (ONNX domain): :mod:`.integer_ops` converts them with their
# scale chain and reports the ones it cannot take ("scale-chain", ...).
CONVERTED_STANDARD = {"MatMulInteger", "ConvInteger"}
_QOPERATOR = {
    "QGemm",
    "QAttention",
    "QEmbedLayerNormalization",
    "QMoE",
    "QuantizeWithOrder",
    "DequantizeWithOrder",
}


def reason_code(node: ir.Node) -> str | None:
    """The reason code of a quantized node that is not Q/DQ, None for any other node."""
    return _reason_code(node.domain, node.op_type)


@functools.cache  # asked of every node (twice a conversion), decided by a handful of op types
def _reason_code(domain: str, name: str) -> str | None:
    if domain not in ("", "ai.onnx", CONTRIB):
        return None
    if domain == CONTRIB and name in CONVERTED:
        return None
    if domain in ("", "ai.onnx") and name in CONVERTED_STANDARD:
        return None
    if op_form(domain, name) is not None:  # QOperator forms the conversion rewrites (.qoperator)
        return None
    if name in _INTEGER:
        return "integer_op"
    if name in _FUSED_DYNAMIC:
        return "fused_dynamic"
    if name.startswith("MatMulNBits") or name in _PACKED or name.startswith("MatMulBlockQuant"):
        return "packed_weight_only"
    if name.startswith(("QLinear", "QOrdered")) or name in _QOPERATOR:
        return "qoperator"
    return None


class OtherFormatsPass(ir.passes.InPlacePass):
    """Lists every quantized node that is not Q/DQ in ``report.other_quantized``."""

    def __init__(self, report: RewriteReport) -> None:
        super().__init__()
        self.report = report

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        for graph in all_graphs(model):
            where = "" if graph is model.graph else (graph.name or "")
            for node in graph:
                code = reason_code(node)
                if code is not None:
                    self.report.other_quantized.append(
                        OtherQuantizedNode(node.name or "", node.op_type, code, ADVICE[code], where)
                    )
        return ir.passes.PassResult(model, modified=False)
