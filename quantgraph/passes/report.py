"""What a rewrite did: counts of converted nodes and each node left alone with the reason.

A node a rewrite cannot express is data, not an exception that escapes: the pass raises
:class:`Skip` inside its per-node step and records a :class:`SkippedNode` with the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import onnx_ir as ir


class Skip(Exception):
    """A node a rewrite leaves as it is; the message is the reason shown to the user."""


@dataclass(frozen=True)
class SkippedNode:
    node: str
    op_type: str
    reason: str
    graph: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "reason": self.reason,
            "graph": self.graph,
        }


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
        }


@dataclass
class RewriteResult(ir.passes.PassResult):
    report: RewriteReport = field(default_factory=RewriteReport)
