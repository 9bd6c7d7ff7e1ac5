"""A model with nothing to rewrite: ``convert`` refuses a model with nothing quantized, and
``lower`` a model with no quantgraph op, instead of writing a copy.

A float model holds no Q/DQ, no quantized node of another format (:mod:`.other_formats`) and
no quantgraph op; "converted 0 node(s)" and exit 0 would leave a newcomer believing the copy
is a converted model. So would "converted 0 node(s)" from ``lower`` given a model never
converted (its input, or a float model): the copy is not a lowered model either.
"""

from __future__ import annotations

from collections import Counter

import onnx_ir as ir

from ...errors import NoQuantization, NothingToLower
from ...ir.walk import all_graphs
from ...spec import DOMAIN
from ..integer.other_formats import CONTRIB, CONVERTED, CONVERTED_STANDARD, reason_code
from ..integer.qoperator import form_of
from ..qdq.cast_scale import is_cast_scale

_QDQ = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", *CONVERTED_STANDARD}
_SHOWN = 6  # op types named in the message, most frequent first
ADVICE = (
    "quantize it first, e.g. onnxruntime.quantization.quantize_static(..., "
    "quant_format=QuantFormat.QDQ), then convert the result"
)


def is_quantized(node: ir.Node) -> bool:
    """Q/DQ of any domain quantgraph reads, a quantized node of another format (converted or
    not), an op of quantgraph's domain, or the Cast starting a weight-only Cast x scale chain."""
    if node.domain == DOMAIN:
        return True
    if node.domain in ("", "ai.onnx", CONTRIB) and node.op_type in _QDQ:
        return True
    if node.domain == CONTRIB and node.op_type in CONVERTED:
        return True
    if form_of(node) is not None:  # a QOperator form (QLinearConv, QGemm, ...)
        return True
    return reason_code(node) is not None or is_cast_scale(node)


def refuse_unquantized(model: ir.Model, label: str) -> None:
    """Raise :class:`NoQuantization` (one line: what the model holds, what to do) when no node
    of any graph or function of ``model`` is quantized; ``label``: "path: " or ""."""
    counts: Counter[str] = Counter()
    for graph in all_graphs(model):
        for node in graph:
            if is_quantized(node):
                return
            counts[node.op_type] += 1
    raise no_quantization(counts, label)


def no_quantization(counts: Counter[str], label: str) -> NoQuantization:
    """The error for a model that holds the op types ``counts`` and nothing quantized."""
    return NoQuantization(
        f"{label}the model holds no quantization (no QuantizeLinear/DequantizeLinear nor any "
        f"other quantized node; it holds {_holds(counts)}): {ADVICE}"
    )


def refuse_unconverted(model: ir.Model, label: str) -> None:
    """Raise :class:`NothingToLower` (one line: what the model holds, what to do) when no node
    of any graph or function of ``model`` is a quantgraph op; ``label``: "path: " or ""."""
    counts: Counter[str] = Counter()
    for graph in all_graphs(model):
        for node in graph:
            if node.domain == DOMAIN:  # an op lowering does not know is its to report
                return
            counts[node.op_type] += 1
    quantized = any(is_quantized(node) for graph in all_graphs(model) for node in graph)
    what = (
        "it is in its quantized form already; lower gives back the Q/DQ of a model "
        "quantgraph convert wrote"
        if quantized
        else f"it is a float model: {ADVICE}"
    )
    raise NothingToLower(
        f"{label}the model holds no quantgraph op to lower (no node of domain {DOMAIN}; it "
        f"holds {_holds(counts)}): {what}"
    )


def _holds(counts: Counter[str]) -> str:
    """The op types most frequent first, at most a few: "12 MatMul, 8 Add, ..."."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{n} {op}" for op, n in ranked[:_SHOWN])
    return f"{shown}, ..." if len(ranked) > _SHOWN else shown or "no nodes at all"
