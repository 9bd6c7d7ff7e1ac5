"""What a fusion plan says: which spec ops run together with their compute, on which engine,
and, for every spec op left alone, why. Data only: engines make plans, sessions expose them,
reports print them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..passes.report import SkippedNode

NONE = "none"
ONNXRUNTIME = "onnxruntime"
ONEDNN = "onednn"
AUTO = "auto"
# fusion "auto"'s rest: onnxruntime's plan, and the Q/DQ it keeps as they are to onnxruntime too
ONNXRUNTIME_LONE = "onnxruntime, lone Q/DQ too"
# fusion "auto"'s candidate (and its rest) that runs the original's own form: every spec op
# lowered back to the original's nodes, as ``quantgraph lower`` writes them
# (:mod:`.ort.original_form`)
ORIGINAL = "original"
# Each mode and what it runs (the command line's help texts are made from these).
MODE_SUMMARIES: dict[str, str] = {
    NONE: "each spec op alone (the spec's exact composition)",
    ONNXRUNTIME: "units of spec ops and their compute (DQ -> Conv -> Q, int4 weight -> "
    "MatMul, ...) run as onnxruntime's fused kernels at ORT_ENABLE_ALL, as for the original "
    "QDQ model; the other spec ops on the backend",
    ONEDNN: "the partitions of spec ops and compute oneDNN Graph forms, compiled by oneDNN "
    "(needs oneDNN; it requantizes with its own rounding: not bit-exact)",
    AUTO: "the fastest of the candidate plans (all to onnxruntime's fused kernels, oneDNN's "
    "partitions, mixes of both, the original's own form), measured on this CPU at the "
    "session's input shapes and cached (quantgraph tune fills the cache ahead); never slower "
    "than onnxruntime's plan",
}
MODES: tuple[str, ...] = tuple(MODE_SUMMARIES)
# How the reason of a unit handed to onnxruntime as the original's own node begins
# (QLinearConv, MatMulInteger and its scale chain, MatMulNBits...): the same kernel as for the
# original runs it, so it computes what the original does.
GIVEN_BACK = "the original's "
# Modes whose units may requantize in oneDNN's arithmetic (partitions): never exact by design.
PARTITION_MODES: frozenset[str] = frozenset({ONEDNN, AUTO})


@dataclass(frozen=True)
class Unit:
    """Spec ops and the compute they feed or are fed by, handed to one engine as a whole.

    ``compute``: the compute node (Conv, MatMul, MaxPool, ...) or "" for a unit of Q/DQ nodes
    only; ``nodes``: the spec ops of the unit; ``kernel``: what the engine runs it as
    (onnxruntime's op type, e.g. QLinearConv, MatMulNBits; or the oneDNN partition's ops);
    ``reason``: why this engine (fusion "auto"), else "".
    """

    compute: str
    op_type: str
    nodes: tuple[str, ...]
    engine: str
    kernel: str
    graph: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "compute": self.compute,
            "op_type": self.op_type,
            "nodes": list(self.nodes),
            "engine": self.engine,
            "kernel": self.kernel,
            "graph": self.graph,
            "reason": self.reason,
        }


# A spec op that runs alone on the session's backend, and why: the shape of a rewrite's
# skipped node (node, op_type, reason, graph).
LeftAlone = SkippedNode


@dataclass
class FusionPlan:
    mode: str
    units: list[Unit] = field(default_factory=list)
    alone: list[LeftAlone] = field(default_factory=list)
    # fusion "auto": the measured decision behind the plan (quantgraph.fusion.auto.tuner.Decision)
    tuning: Any = None

    @property
    def fused_nodes(self) -> int:
        return sum(len(u.nodes) for u in self.units)

    @property
    def no_unit(self) -> str | None:
        """Why a fusion that was asked for formed no unit (None when it formed one, or had
        no spec op to fuse): the reasons its spec ops give, the most frequent first."""
        if self.mode == NONE or self.units or not self.alone:
            return None
        counts = Counter(a.reason for a in self.alone)
        reasons = "; ".join(
            f"{reason} ({count} spec op{'s' if count > 1 else ''})"
            for reason, count in counts.most_common(3)
        )
        more = len(counts) - 3
        return (
            f"fusion '{self.mode}' formed no unit: all {len(self.alone)} spec ops run alone: "
            f"{reasons}{f'; {more} other reasons' if more > 0 else ''}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "fused_spec_ops": self.fused_nodes,
            "spec_ops_alone": len(self.alone),
            "units": [u.to_dict() for u in self.units],
            "alone": [a.to_dict() for a in self.alone],
            "no_unit": self.no_unit,
            "tuning": None if self.tuning is None else self.tuning.to_dict(),
        }
