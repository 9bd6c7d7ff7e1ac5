"""What the search for inputs the original runs found (:mod:`.search`): every plan it considered
and what became of it, and the memory estimate of the plan that ran. The report carries them
(``ValidationReport.input_search``, ``.memory``)."""

from __future__ import annotations

from dataclasses import dataclass

# What became of a plan the search considered (:mod:`.search`).
RAN, FAILED, OVER_BUDGET, TOO_LARGE, NOT_REACHED = (
    "ran",
    "failed",
    "over budget",
    "too large",
    "not reached",
)
STATUSES = (RAN, FAILED, OVER_BUDGET, TOO_LARGE, NOT_REACHED)


@dataclass(frozen=True)
class Tried:
    """One plan the search considered: its number (0: the first plan), what it varies, its
    estimated memory in bytes (None: not estimated) and what became of it (:data:`STATUSES`:
    ran; failed in the original; over the memory budget; an input over the size limit; not
    reached before the search timeout)."""

    number: int
    plan: str
    estimate: int | None
    status: str

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InputSearch:
    """The original refused the first plan of generated inputs, or it was over the memory
    budget; search attempt ``attempt`` (:mod:`.search`) is the plan it ran.
    ``tried``: every plan considered, in the order tried."""

    first_error: str
    attempt: int
    plan: str
    tried: tuple[Tried, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "first_error": self.first_error,
            "attempt": self.attempt,
            "plan": self.plan,
            "tried": [t.to_dict() for t in self.tried],
        }


@dataclass(frozen=True)
class MemoryCheck:
    """The estimate of the plan that ran (:mod:`.memory`) and the budget it had
    to fit (None: no budget)."""

    estimate: int
    weights: int
    unresolved: int
    budget: int | None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)
