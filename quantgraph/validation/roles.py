"""Which model is which: ORIGINAL first, then REWRITTEN (its converted or its quantized form);
models given the wrong way round are refused before anything runs, with one message.

The original runs in plain onnxruntime, which knows no com.quantgraph op: given the arguments
the wrong way round, onnxruntime's "not a registered function/op" would say nothing of why. A
float original against its Q/DQ form is a legitimate pair (the quantization error); a quantized
ORIGINAL against a float REWRITTEN is that pair swapped, and would only ever DISAGREE (or
refuse --sensitivity). Every command taking both models asks :func:`check_roles` (validate,
convert --validate's, bench --model).
"""

from __future__ import annotations

from collections import Counter

import onnx_ir as ir

from ..errors import ModelError
from ..ir.walk import all_graphs, spec_nodes
from ..passes.integer.other_formats import CONTRIB
from .compare.error_stats import has_quantization

_QDQ = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def swapped(why: str, original_label: str, rewritten_label: str, command: str) -> ModelError:
    """The one message for arguments given the wrong way round: what shows it, and the
    command with them the right way round."""
    return ModelError(
        f"{why}: the arguments look swapped: quantgraph {command} {rewritten_label} "
        f"{original_label}"
    )


def check_roles(
    original: ir.Model,
    rewritten: ir.Model,
    original_label: str,
    rewritten_label: str,
    command: str = "validate",
) -> None:
    """Raise :class:`ModelError` (one line) when ``original`` holds quantgraph's spec ops
    ("the arguments look swapped" when ``rewritten`` holds Q/DQ and no spec op), or when
    ``original`` is quantized and ``rewritten`` a float model (swapped too). ``command``:
    how the message spells the right order (``validate``, ``bench --model``)."""
    found = Counter(node.op_type for _, node, _ in spec_nodes(original))
    first = f"ORIGINAL ({original_label}, the first argument)"
    if _quantized(original) and not _quantized(rewritten):
        held = ", ".join(f"{n} {op}" for op, n in sorted(found.items()))
        held = f" ({held})" if held else ""
        raise swapped(
            f"{first} is quantized{held} and REWRITTEN ({rewritten_label}) a float model (the "
            "float model comes first)",
            original_label,
            rewritten_label,
            command,
        )
    if not found:
        return
    ops = ", ".join(f"{n} {op}" for op, n in sorted(found.items()))
    first += f" holds quantgraph spec ops ({ops})"
    if not any(True for _ in spec_nodes(rewritten)) and _has_qdq(rewritten):
        raise swapped(
            f"{first} and REWRITTEN ({rewritten_label}) holds Q/DQ",
            original_label,
            rewritten_label,
            command,
        )
    raise ModelError(
        f"{first}, which plain onnxruntime cannot run: ORIGINAL is the model before conversion "
        f"(quantgraph {command} ORIGINAL REWRITTEN)"
    )


def _quantized(model: ir.Model) -> bool:
    return any(has_quantization(graph) for graph in all_graphs(model))


def _has_qdq(model: ir.Model) -> bool:
    return any(
        node.op_type in _QDQ and node.domain in ("", "ai.onnx", CONTRIB)
        for graph in all_graphs(model)
        for node in graph
    )
