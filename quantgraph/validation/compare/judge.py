"""How one output of the two models is compared and judged: the one rule every comparison of the
verdict uses (the outputs of each sample, the logits of each generation step), so that a change
of how non-exact comparisons are judged is made here, once.

Exact (``tolerance`` None): any differing element is a disagreement (:mod:`quantgraph.reference.
compare`'s rule). Otherwise every element must lie within ``atol + rtol * |expected|``: the
tolerance given, or where none was given to a comparison with the original's other kernels, the
output's own bound (:mod:`.rounding_spread`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...reference.compare import TensorComparison, compare
from .rounding_spread import SpreadBound


@dataclass(frozen=True)
class Judge:
    """``tolerance``: (atol, rtol) where the comparison is not expected to be exact, else None;
    ``bound``: where no --atol/--rtol was given to such a comparison, the bound the model gives
    each output (:mod:`.rounding_spread`), which then judges it instead."""

    tolerance: tuple[float, float] | None = None
    bound: SpreadBound | None = None

    @property
    def exact(self) -> bool:
        return self.tolerance is None

    def tolerance_of(self, name: str) -> tuple[float, float] | None:
        """The (atol, rtol) output ``name`` is judged by (None: exact)."""
        if self.tolerance is None or self.bound is None:
            return self.tolerance
        return (self.bound.atol(name), 0.0)

    def compare(
        self, name: str, expected: np.ndarray, actual: np.ndarray, elem_type: int | None = None
    ) -> TensorComparison:
        return compare(name, expected, actual, elem_type, tolerance=self.tolerance_of(name))

    @staticmethod
    def passes(comparison: TensorComparison) -> bool:
        """Identical; or, compared with a tolerance, within it."""
        return comparison.within_tolerance
