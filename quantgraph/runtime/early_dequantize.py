"""The float weights an unfused session writes at once, when onnxruntime's order runs every
weight's dequantize first.

onnxruntime runs nodes in priority order, ties broken by index, and a node its fusions make
(ORT_ENABLE_EXTENDED and up) gets a larger index than any node of the file: a dequantize that
reads only a weight is ready from the start and runs before the first fused node, so every
weight is written in float at once (a converted 1.1B decoder unfused: 4.5 GiB resident at
ORT_ENABLE_ALL against 1.0 at ORT_ENABLE_BASIC, measured). Nothing in onnxruntime's API sets a
node's priority: a user running a converted LLM unfused is told before it runs out of memory.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from ..fusion.ort.ort_engine import LEVEL_NAMES
from ..ir.values import constant_tensor
from ..ir.walk import spec_nodes

FIRST_LEVEL = 2  # ORT_ENABLE_EXTENDED: the first level whose fusions make new nodes
TOLD_FROM = 1 << 30  # bytes of float weights worth a warning


def dequantized_weight_bytes(model: ir.Model) -> int:
    """Bytes of the float tensors the model's dequantizes of weights write, all together."""
    total = 0
    for _, node, op in spec_nodes(model):
        weight = constant_tensor(node.inputs[0]) if node.inputs and not op.is_quantize else None
        if weight is None:
            continue
        output = node.outputs[0]
        width = output.dtype.bitwidth if output.dtype is not None else 32
        total += math.prod(weight.shape.numpy()) * max(width, 8) // 8
    return total


def early_dequantize_warning(model: ir.Model, level: int) -> str | None:
    """What to tell a user whose unfused session at ``level`` would hold every weight of
    ``model`` in float at once (None: nothing worth telling)."""
    if level < FIRST_LEVEL:
        return None
    found = dequantized_weight_bytes(model)
    if found < TOLD_FROM:
        return None
    named = LEVEL_NAMES.get(level, "ORT_ENABLE_ALL")
    return (
        f"unfused at {named}, onnxruntime runs every weight's dequantize "
        f"before the nodes its fusions make: {found / 2**30:.1f} GiB of float weights at once "
        "(fusion 'onnxruntime' runs the original's kernels on the quantized weights; "
        "ORT_ENABLE_BASIC keeps the graph's order)"
    )
