"""What a rewrite did: counts of converted nodes and each node left alone with the reason.

A node a rewrite cannot express is data, not an exception that escapes: the pass raises
:class:`Skip` inside its per-node step and records a :class:`SkippedNode` with the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import onnx_ir as ir

# Why a rewrite leaves a node alone: stable codes (the JSON's ``code``; docs/json.md lists
# them), each with what it means. The reason beside it is the sentence users read.
SKIP_CODES: dict[str, str] = {
    "contrib-off": "a com.microsoft Q/DQ kept as asked (contrib conversion off)",
    "opset": "the node's opset cannot express the node or its replacement",
    "unknown-attribute": "an attribute the rewrite does not know",
    "blocked-quantize": "a blocked QuantizeLinear: per_group is DynamicDequantize's only",
    "precision": "QuantizeLinear precision other than f32: the spec divides in f32",
    "missing-input": "a required input or attribute is absent",
    "input-type": "the float input's type is not the one the op takes",
    "scale-type": "the scale type is not one the spec takes for this op",
    "output-dtype": "DequantizeLinear output_dtype other than the scale's type",
    "quantized-type": "the quantized type is unknown or has no equivalent on the other side",
    "float8-saturate": "float8 saturate=0: the spec saturates",
    "float8-zero-point": "a float8 zero point that is not a constant zero",
    "float8-runtime-scale": "float8 needs the static ops, and the scale is not a constant",
    "unknown-shape": "a shape or dim the rewrite needs is unknown",
    "scale-rank": "a scale of rank above 1 without block_size",
    "zero-point-shape": "the zero point's shape differs from the scale's",
    "blocks": "blocks or groups that do not tile src along one axis",
    "scale-value": "a zero or non-finite constant scale of a quantize",
    "zero-point-range": "zero points outside the range of ONNX's zero point type",
    "runtime-zero-point": "zero points computed at run time of another type than ONNX's",
    "node-arity": "the node's inputs or outputs are not the op's",
    "unknown-op": "a com.quantgraph op the rewrite does not know",
    "act-order": "MatMulNBits g_idx that is not k // block_size (act-order): groups not blocks",
    "float-zero-point": "float zero points that are not integers of the quantized range",
    "packed-layout": "a packed weight whose layout or shapes are not the op's plain one",
    "runtime-weight": "a packed weight, scale or zero point that is not a constant",
    "scale-chain": "an integer op (MatMulInteger, ConvInteger) not followed by quantize_dynamic's "
    "Cast -> Mul(scales) chain, or whose operands are not a DynamicQuantizeLinear's or constants",
    "channels-last": "a QOperator pooling node with channels_last=1: the float op is NCHW",
    "gather-axis": "GatherBlockQuantized with quantize_axis == gather_axis: a gathered row's "
    "scale is its block's of rows, not a group of the gathered rows",
    "gemm-scaling": "QGemm alpha or beta other than 1 (the int32 bias scale depends on them)",
}


class Skip(Exception):
    """A node a rewrite leaves as it is (as onnxscript's MatchResult records a failed match):
    ``code`` (one of :data:`SKIP_CODES`) says which rule, the message is the reason shown to
    the user; ``node`` the node at fault when it is not the one rewritten."""

    def __init__(self, code: str, reason: str, node: ir.Node | None = None) -> None:
        if code not in SKIP_CODES:
            raise ValueError(f"unknown skip code {code!r} (known: {sorted(SKIP_CODES)})")
        super().__init__(reason)
        self.code = code
        self.node = node


@dataclass(frozen=True)
class SkippedNode:
    """A node a rewrite left alone: ``code`` the stable reason code ("" where none applies:
    fusion plans), ``source`` the ir.Node itself (not serialized; it may change after)."""

    node: str
    op_type: str
    reason: str
    graph: str = ""
    code: str = ""
    source: ir.Node | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        found = {
            "node": self.node,
            "op_type": self.op_type,
            "reason": self.reason,
            "graph": self.graph,
        }
        if self.code:
            found["code"] = self.code
        return found


@dataclass(frozen=True)
class ConvertedNode:
    node: str
    op_type: str
    new_op_type: str
    detail: str
    graph: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "new_op_type": self.new_op_type,
            "detail": self.detail,
            "graph": self.graph,
        }


@dataclass(frozen=True)
class OtherQuantizedNode:
    """A quantized node that is not Q/DQ (QOperator, MatMulNBits, quantize_dynamic's ops):
    ``code`` says which kind, ``advice`` what the user can do."""

    node: str
    op_type: str
    code: str
    advice: str
    graph: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "code": self.code,
            "advice": self.advice,
            "graph": self.graph,
        }


@dataclass
class RewriteReport:
    converted_nodes: list[ConvertedNode] = field(default_factory=list)
    skipped: list[SkippedNode] = field(default_factory=list)
    other_quantized: list[OtherQuantizedNode] = field(default_factory=list)
    # Nodes already in the rewrite's target form before it ran, per op type: quantgraph ops
    # for convert (a model converted before), QuantizeLinear/DequantizeLinear for lower.
    already: dict[str, int] = field(default_factory=dict)
    # Nodes of the original onnx.checker does not know (no schema in ONNX's domain) that
    # onnxruntime runs: kept as they are and not held against the result (quantgraph.ir.checker).
    unchecked: dict[str, int] = field(default_factory=dict)

    @property
    def converted(self) -> dict[str, int]:
        """Converted nodes counted per original op type."""
        return dict(sorted(Counter(n.op_type for n in self.converted_nodes).items()))

    @property
    def emitted(self) -> dict[str, int]:
        return dict(sorted(Counter(n.new_op_type for n in self.converted_nodes).items()))

    def to_dict(self) -> dict[str, object]:
        return {
            "converted": self.converted,
            "emitted": self.emitted,
            "skipped": [s.to_dict() for s in self.skipped],
            "nodes": [n.to_dict() for n in self.converted_nodes],
            "other_quantized": [n.to_dict() for n in self.other_quantized],
            "already": dict(sorted(self.already.items())),
            "unchecked": dict(sorted(self.unchecked.items())),
        }


@dataclass
class RewriteResult(ir.passes.PassResult):
    report: RewriteReport = field(default_factory=RewriteReport)
