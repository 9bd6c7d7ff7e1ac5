"""How one output of the two models is compared and judged: the one rule every comparison of the
verdict uses (the outputs of each sample, the logits of each generation step), so that a change
of how non-exact comparisons are judged is made here, once.

Exact (``tolerance`` None): any differing element is a disagreement (:mod:`quantgraph.reference.
compare`'s rule). Otherwise every element must lie within ``atol + rtol * |expected|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..reference.compare import TensorComparison, compare


@dataclass(frozen=True)
class Judge:
    """``tolerance``: (atol, rtol) where the comparison is not expected to be exact, else None."""

    tolerance: tuple[float, float] | None = None

    @property
    def exact(self) -> bool:
        return self.tolerance is None

    def compare(
        self, name: str, expected: np.ndarray, actual: np.ndarray, elem_type: int | None = None
    ) -> TensorComparison:
        return compare(name, expected, actual, elem_type, tolerance=self.tolerance)

    @staticmethod
    def passes(comparison: TensorComparison) -> bool:
        """Identical; or, compared with a tolerance, within it."""
        return comparison.within_tolerance
