"""Which model is which: an ORIGINAL holding quantgraph's ops is refused before anything runs.

The original runs in plain onnxruntime, which knows no com.quantgraph op: given the arguments
the wrong way round, onnxruntime's "not a registered function/op" would say nothing of why.
A float original against its Q/DQ form is a legitimate pair (the quantization error).
"""

from __future__ import annotations

from collections import Counter

import onnx_ir as ir

from ..errors import ModelError
from ..ir.walk import all_graphs, spec_nodes
from ..passes.other_formats import CONTRIB

_QDQ = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def check_roles(
    original: ir.Model, rewritten: ir.Model, original_label: str, rewritten_label: str
) -> None:
    """Raise :class:`ModelError` (one line) when ``original`` holds quantgraph's spec ops:
    "the arguments look swapped" when ``rewritten`` holds Q/DQ and no spec op."""
    found = Counter(node.op_type for _, node, _ in spec_nodes(original))
    if not found:
        return
    ops = ", ".join(f"{n} {op}" for op, n in sorted(found.items()))
    first = f"ORIGINAL ({original_label}, the first argument) holds quantgraph spec ops ({ops})"
    if not any(True for _ in spec_nodes(rewritten)) and _has_qdq(rewritten):
        raise ModelError(
            f"{first} and REWRITTEN ({rewritten_label}) holds Q/DQ: the arguments look swapped: "
            f"quantgraph validate {rewritten_label} {original_label}"
        )
    raise ModelError(
        f"{first}, which plain onnxruntime cannot run: ORIGINAL is the model before conversion "
        "(quantgraph validate ORIGINAL REWRITTEN)"
    )


def _has_qdq(model: ir.Model) -> bool:
    return any(
        node.op_type in _QDQ and node.domain in ("", "ai.onnx", CONTRIB)
        for graph in all_graphs(model)
        for node in graph
    )
