"""Which fed inputs are masks, and why.

An input is a mask when it is named like one (``mask``, ``*_mask``, ``*.mask``: ``attention_mask``,
``padding_mask``) or used as one: the condition of a ``Where``, cast to bool, or read by an
attention op of onnxruntime (com.microsoft ``Attention``, ``QAttention``, ``MultiHeadAttention``,
``GroupQueryAttention``) at its mask input, directly or reduced to lengths through ``ReduceSum``
(``GroupQueryAttention``'s ``seqlens_k`` is ``ReduceSum(attention_mask) - 1``). Values are
followed through ops that pass them on unchanged (Cast to another type, Identity, Reshape,
Squeeze, Unsqueeze, Flatten, Transpose, Expand, Tile, Slice, Concat, Gather of the value itself)
and, once reduced, through Add/Sub of a constant and Cast. A comparison (``mask == 0``) ends the
walk: token ids compared with a padding id are not a mask.

A mask's values are 0 and 1 with at least one 1 in every row (along its last axis): a row of
zeros masks every position, and a softmax over no position is NaN in the original itself.
"""

from __future__ import annotations

import re

import onnx_ir as ir

from ...ir.values import constant_array

MASK_NAME = re.compile(r"(?:^|[_.])mask$")
CONTRIB = "com.microsoft"
# com.microsoft attention ops and the index of their mask input (lengths, or 0/1 per position).
ATTENTION_MASKS = {
    "Attention": (3,),  # mask_index
    "QAttention": (5,),  # mask_index
    "MultiHeadAttention": (4,),  # key_padding_mask
    "GroupQueryAttention": (5,),  # seqlens_k (from ReduceSum of the mask)
    "DecoderMaskedMultiHeadAttention": (4,),  # mask_index
}
_PASSING = {
    "Cast",
    "CastLike",
    "Identity",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Transpose",
    "Expand",
    "Tile",
    "Slice",
    "Concat",
    "Gather",
}
_BOOL = int(ir.DataType.BOOL)


def mask_reason(value: ir.Value) -> str | None:
    """Why ``value`` (a fed input) is a mask, or None when it is not one (the module doc)."""
    if MASK_NAME.search((value.name or "").lower()):
        return "a mask: named like one"
    return _used_as_mask(value)


def _label(node: ir.Node) -> str:
    return f"'{node.name}' ({node.op_type})" if node.name else node.op_type


def _through(path: tuple[str, ...]) -> str:
    return f", through {' -> '.join(path)}" if path else ""


def _used_as_mask(value: ir.Value) -> str | None:
    seen: set[tuple[int, bool]] = set()
    # (value, reduced to lengths on the way, ops passed)
    stack: list[tuple[ir.Value, bool, tuple[str, ...]]] = [(value, False, ())]
    while stack:
        current, reduced, path = stack.pop()
        if (id(current), reduced) in seen:
            continue
        seen.add((id(current), reduced))
        for node, index in current.uses():
            op = node.op_type
            if node.domain == CONTRIB and index in ATTENTION_MASKS.get(op, ()):
                return f"a mask: read by {_label(node)}{_through(path)}"
            if node.domain not in ("", "ai.onnx") or not node.outputs:
                continue
            if not reduced and op == "Where" and index == 0:
                return f"a mask: the condition of {_label(node)}{_through(path)}"
            if not reduced and op == "Cast" and node.attributes.get_int("to", 0) == _BOOL:
                return f"a mask: cast to bool by {_label(node)}{_through(path)}"
            if op in _PASSING and (index == 0 or op == "Concat"):
                stack.append((node.outputs[0], reduced, (*path, op)))
            elif _reduces(node, index, reduced):  # the mask's lengths, on their way
                stack.append((node.outputs[0], True, (*path, op)))
    return None


def _reduces(node: ir.Node, index: int, reduced: bool) -> bool:
    """ReduceSum of a mask, or (once reduced) Add/Sub of a constant: lengths."""
    if node.op_type == "ReduceSum":
        return index == 0
    if not reduced or node.op_type not in ("Add", "Sub") or len(node.inputs) != 2:
        return False
    return constant_array(node.inputs[1 - index]) is not None
