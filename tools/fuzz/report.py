"""The fuzzer's figures: :class:`OpStats` per op and the :class:`FuzzReport` (its JSON form and
the summary the command line prints); plain data, apart from the code that fills it in."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class OpStats:
    """Figures of one operator."""

    examples: int = 0  # calls made (each on every runner)
    valid_examples: int = 0
    error_examples: int = 0  # calls that break a rule
    elements: int = 0  # output elements compared, summed over the comparisons below
    compared: dict[str, int] = field(default_factory=dict)  # elements per "<runner>-vs-reference"
    onnxruntime_examples: int = 0  # calls also checked against onnxruntime's Q/DQ
    python_not_runnable: int = 0  # calls where the Python backend raised its BackendError
    onednn_refused: int = 0  # calls the onednn backend's oneDNN refused (its documented error)
    onednn_nan_s8: int = 0  # onednn calls whose only differences are the known s8 NaN one
    rows: dict[str, int] = field(default_factory=dict)  # calls per row (Signature.row)
    errors_checked: int = 0  # expected rule errors asserted (reference, native, python)
    mismatches: int = 0  # calls where a runner disagreed (values or errors)
    mismatched_elements: int = 0
    sessions: int = 0  # sessions created (all runners)
    seconds: float = 0.0


@dataclass
class FuzzReport:
    profile: str
    seed: int
    examples_per_op: int
    native: bool
    ops: dict[str, OpStats] = field(default_factory=dict)
    seconds: float = 0.0
    peak_rss_mib: float = 0.0  # the process's peak resident memory at the end of the run
    details: list[dict[str, Any]] = field(default_factory=list)  # first mismatches

    def total(self, name: str) -> int:
        return int(sum(getattr(stats, name) for stats in self.ops.values()))

    @property
    def examples(self) -> int:
        return self.total("examples")

    @property
    def elements(self) -> int:
        return self.total("elements")

    @property
    def mismatches(self) -> int:
        return self.total("mismatches")

    @property
    def errors_checked(self) -> int:
        return self.total("errors_checked")

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "seed": self.seed,
            "examples_per_op": self.examples_per_op,
            "native_backend": self.native,
            "seconds": round(self.seconds, 2),
            "peak_rss_mib": round(self.peak_rss_mib, 1),
            "totals": {
                "examples": self.examples,
                "error_examples": self.total("error_examples"),
                "elements": self.elements,
                "onnxruntime_examples": self.total("onnxruntime_examples"),
                "python_not_runnable": self.total("python_not_runnable"),
                "onednn_refused": self.total("onednn_refused"),
                "onednn_nan_s8": self.total("onednn_nan_s8"),
                "errors_checked": self.errors_checked,
                "mismatches": self.mismatches,
                "mismatched_elements": self.total("mismatched_elements"),
                "sessions": self.total("sessions"),
            },
            "ops": {
                name: {**asdict(stats), "seconds": round(stats.seconds, 2)}
                for name, stats in self.ops.items()
            },
            "mismatch_details": self.details,
        }

    def summary(self) -> str:
        head = (
            f"{'op':<18}{'examples':>9}{'errors':>8}{'elements':>12}{'vs ort':>8}"
            f"{'py n/a':>8}{'checked':>9}{'mismatch':>10}{'sessions':>10}"
            f"{'seconds':>9}"
        )
        lines = [
            f"quantgraph fuzz: profile {self.profile}, seed {self.seed}, "
            f"{self.examples_per_op} examples per op, native backend "
            f"{'on' if self.native else 'NOT BUILT'}",
            head,
        ]
        rows = [*self.ops.items(), ("total", None)]
        for name, stats in rows:
            if stats is None:
                values = [
                    self.examples,
                    self.total("error_examples"),
                    self.elements,
                    self.total("onnxruntime_examples"),
                    self.total("python_not_runnable"),
                    self.errors_checked,
                    self.total("mismatches"),
                    self.total("sessions"),
                ]
                seconds = self.seconds
            else:
                values = [
                    stats.examples,
                    stats.error_examples,
                    stats.elements,
                    stats.onnxruntime_examples,
                    stats.python_not_runnable,
                    stats.errors_checked,
                    stats.mismatches,
                    stats.sessions,
                ]
                seconds = stats.seconds
            widths = (9, 8, 12, 8, 8, 9, 10, 10)
            cells = "".join(f"{v:>{w},}" for v, w in zip(values, widths, strict=True))
            lines.append(f"{name:<18}{cells}{seconds:>9.1f}")
        compared: dict[str, int] = {}
        for stats in self.ops.values():
            for key, count in stats.compared.items():
                compared[key] = compared.get(key, 0) + count
        lines.append(
            "elements compared: " + ", ".join(f"{k} {v:,}" for k, v in sorted(compared.items()))
        )
        lines.append(
            f"onednn backend: {self.total('onednn_refused'):,} calls refused by oneDNN; "
            f"{self.total('onednn_nan_s8'):,} differ only where x * (1/scale) is NaN (s8: "
            "oneDNN gives 127, the model -128; known, counted apart)"
        )
        lines.append(f"peak RSS {self.peak_rss_mib:,.0f} MiB")
        lines.append(f"mismatches: {self.mismatches}")
        for detail in self.details[:10]:
            lines.append("  " + json.dumps(detail, default=str)[:600])
        return "\n".join(lines)
