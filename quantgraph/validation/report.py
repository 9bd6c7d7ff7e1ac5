"""What a validation found, for people (cli.py prints it) and machines (``to_dict``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..compare import TensorComparison

EXACT = (
    "original vs rewritten, both at ORT_DISABLE_ALL (unfused Q/DQ: the spec's composition; "
    "no other graph rewrite changes either side's arithmetic)"
)
OPTIMIZED = (
    "original at ORT_ENABLE_ALL (fused integer kernels) vs rewritten: not expected to be exact "
    "(fused kernels round differently); judged by --atol/--rtol"
)


@dataclass(frozen=True)
class Divergence:
    """The first tensor, in the original's node order, on which the two models part."""

    node: str
    op_type: str
    rewritten_op_type: str
    tensor: str
    max_abs_diff: float
    max_ulp_diff: int
    mismatches: int
    elements: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class IntermediateReport:
    tensors_compared: int
    tensors_differing: int
    first_divergence: Divergence | None
    differing: list[TensorComparison] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        first = self.first_divergence
        return {
            "tensors_compared": self.tensors_compared,
            "tensors_differing": self.tensors_differing,
            "first_divergence": None if first is None else first.to_dict(),
            "differing": [t.to_dict() for t in self.differing],
        }


@dataclass
class ValidationReport:
    comparison: str
    backend: str
    outputs: list[TensorComparison]
    inputs: dict[str, dict[str, object]]  # name -> dtype, shape, range, why (or "file")
    seed: int | None
    samples: int = 1
    optimized: list[TensorComparison] = field(default_factory=list)
    tolerance: tuple[float, float] = (0.0, 0.0)
    intermediate: IntermediateReport | None = None

    @property
    def agree(self) -> bool:
        return all(o.agree for o in self.outputs)

    def to_dict(self) -> dict[str, object]:
        atol, rtol = self.tolerance
        return {
            "agree": self.agree,
            "comparison": self.comparison,
            "backend": self.backend,
            "seed": self.seed,
            "samples": self.samples,
            "inputs": self.inputs,
            "outputs": [o.to_dict() for o in self.outputs],
            "optimized": {
                "comparison": OPTIMIZED,
                "atol": atol,
                "rtol": rtol,
                "within_tolerance": all(o.within_tolerance for o in self.optimized),
                "outputs": [o.to_dict() for o in self.optimized],
            }
            if self.optimized
            else None,
            "intermediate": None if self.intermediate is None else self.intermediate.to_dict(),
        }
