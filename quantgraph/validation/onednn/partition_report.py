"""What checking each oneDNN partition alone found (:mod:`.partitions`): per output, the
difference it introduces when fed the spec composition's inputs and the one the fused run
shows there, both also in quantization steps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ...reference.compare import TensorComparison


@dataclass(frozen=True)
class PartitionOutput:
    """One output of a partition: what it introduces (fed the spec composition's inputs) and
    what the fused run shows there (upstream partitions' differences included)."""

    name: str
    step: float | None  # one quantization step of the tensor, when it has one
    introduced: TensorComparison
    inherited: TensorComparison | None

    @property
    def introduced_steps(self) -> float | None:
        return _steps(self.introduced, self.step)

    @property
    def inherited_steps(self) -> float | None:
        return None if self.inherited is None else _steps(self.inherited, self.step)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "step": self.step,
            "introduced": self.introduced.to_dict(),
            "introduced_steps": self.introduced_steps,
            "inherited": None if self.inherited is None else self.inherited.to_dict(),
            "inherited_steps": self.inherited_steps,
        }


@dataclass(frozen=True)
class PartitionCheck:
    """One OneDnnPartition node (``node``) of the unit whose compute is ``compute``."""

    node: str
    compute: str
    kernel: str
    reason: str = ""  # the plan's note on the unit (e.g. int8 products saturate on this CPU)
    outputs: tuple[PartitionOutput, ...] = ()
    note: str = ""  # why it was not checked

    @property
    def introduces(self) -> bool:
        return any(o.introduced.mismatches for o in self.outputs)

    @property
    def introduced_steps(self) -> float | None:
        return _largest(o.introduced_steps for o in self.outputs)

    @property
    def inherited_steps(self) -> float | None:
        return _largest(o.inherited_steps for o in self.outputs)

    def to_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "compute": self.compute,
            "kernel": self.kernel,
            "reason": self.reason,
            "note": self.note,
            "introduced_steps": self.introduced_steps,
            "inherited_steps": self.inherited_steps,
            "outputs": [o.to_dict() for o in self.outputs],
        }


@dataclass(frozen=True)
class PartitionDivergence:
    """The first partition, in graph order, whose output differs from the spec's composition
    when fed that composition's inputs: its worst output."""

    node: str
    compute: str
    kernel: str
    tensor: str
    max_abs_diff: float
    max_abs_diff_steps: float | None
    mismatches: int
    elements: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def first_divergence(checks: list[PartitionCheck]) -> PartitionDivergence | None:
    for check in checks:
        if not check.introduces:
            continue
        worst = max(
            (o for o in check.outputs if o.introduced.mismatches),
            key=lambda o: (o.introduced_steps or 0.0, o.introduced.max_abs_diff),
        )
        found = worst.introduced
        return PartitionDivergence(
            check.node,
            check.compute,
            check.kernel,
            worst.name,
            found.max_abs_diff,
            worst.introduced_steps,
            found.mismatches,
            found.elements,
        )
    return None


def _steps(comparison: TensorComparison, step: float | None) -> float | None:
    if not step or not np.isfinite(comparison.max_abs_diff):
        return None
    return comparison.max_abs_diff / step


def _largest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
