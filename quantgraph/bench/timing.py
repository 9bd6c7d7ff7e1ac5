"""What the bench's rows share: the row, the session options, the interleaved timing, which
implementations can run here and the progress line."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime as ort

from ..testing import quiet_session_options

# Timing: blocks of calls lasting about _BLOCK_SECONDS, at most _BUDGET_SECONDS per
# implementation and case (see measure).
_BLOCK_SECONDS = 0.002
_BUDGET_SECONDS = 2.0

Progress = Callable[[str], None]


# The implementations that are a backend's kernels: (backend, arithmetic). native_onednn is the
# native kernels in oneDNN's arithmetic; onednn is oneDNN itself.
ON_BACKEND: dict[str, tuple[str, str | None]] = {
    "native": ("native", None),
    "native_onednn": ("native", "onednn"),
    "onednn": ("onednn", "onednn"),
    "python": ("python", None),
}


@dataclass(frozen=True)
class BenchRow:
    """One op, layout and size: the median seconds per call of each implementation."""

    op: str
    layout: str
    shape: tuple[int, ...]
    bytes_moved: int  # bytes one call reads and writes (f32 side + 8-bit side)
    seconds: dict[str, float | None]  # None: not run (see notes)
    notes: dict[str, str] = field(default_factory=dict)
    # Native time over native per-tensor at the same op and size, the two measured together
    # (interleaved, like the implementations of one row); None for per-tensor rows.
    vs_per_tensor: float | None = None

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape))

    def ratio(self, baseline: str, impl: str = "native") -> float | None:
        """``baseline`` time over ``impl`` time: above 1 means ``impl`` is faster."""
        a, b = self.seconds.get(impl), self.seconds.get(baseline)
        return None if a is None or b is None or a <= 0 else b / a

    def bandwidth(self, impl: str = "native") -> float | None:
        """Effective bandwidth of ``impl`` in bytes per second (bytes read + written)."""
        t = self.seconds.get(impl)
        if t is None or t <= 0:
            return None
        moved = 8 * self.elements if impl == "copyto" else self.bytes_moved
        return moved / t

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "layout": self.layout,
            "shape": list(self.shape),
            "elements": self.elements,
            "bytes_moved": self.bytes_moved,
            "seconds": dict(self.seconds),
            "onnxruntime_over_native": self.ratio("onnxruntime"),
            "python_over_native": self.ratio("python"),
            "python_over_numpy": self.ratio("python", "numpy"),
            "native_onednn_over_native": self.ratio("native_onednn"),
            "onednn_over_native": self.ratio("onednn"),
            "native_over_native_per_tensor": self.vs_per_tensor,
            "native_bytes_per_second": self.bandwidth("native"),
            "copyto_bytes_per_second": self.bandwidth("copyto"),
            "notes": dict(self.notes),
        }


@dataclass
class Settings:
    """Of every session the bench creates: intra-op threads (0: onnxruntime's default) and
    whether pool threads spin-wait after a run (onnxruntime's default). Set by ``run()``."""

    threads: int = 0
    spinning: bool = True


SETTINGS = Settings()


def timed_options() -> ort.SessionOptions:
    """ORT_DISABLE_ALL, quiet, with :data:`SETTINGS`' threads and spinning."""
    # Each session has its own intra-op pool, whose threads spin after a run by default: on a
    # machine with few cores they compete with the next session timed. Without spinning, every
    # parallel run pays for waking its threads instead.
    return quiet_session_options(threads=SETTINGS.threads, spinning=SETTINGS.spinning)


def measure(calls: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    """Median seconds per call of each implementation.

    Implementations take turns in rounds (so a burst of load elsewhere on the machine hits all
    of them alike); in a round each runs a block of calls lasting about _BLOCK_SECONDS, and
    the block's mean is one sample. Each round starts one implementation later than the last,
    so that each follows each of the others equally often (what ran before leaves the caches
    full of its data and memory busy with its write-backs: with a fixed order, native after
    copyto's 8 MB, 1M per-tensor quantize on one thread measured 0.92x of onnxruntime, which
    followed native). A slow implementation gets fewer rounds: at most _BUDGET_SECONDS in
    all, but at least 3.
    """
    blocks: dict[str, int] = {}
    rounds: dict[str, int] = {}
    for name, call in calls.items():
        for _ in range(2):  # warm up: first touch of buffers, thread pool start
            call()
        start = time.perf_counter()
        call()
        once = max(time.perf_counter() - start, 1e-9)
        blocks[name] = max(1, int(_BLOCK_SECONDS / once))
        rounds[name] = max(3, min(repeat, int(_BUDGET_SECONDS / (once * blocks[name]))))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(max(rounds.values(), default=0)):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            call = calls[name]
            if r >= rounds[name]:
                continue
            count = blocks[name]
            # An untimed block first: the one before (another implementation) left the caches
            # holding its data, or, with the buffers shared, warm for this one, and memory
            # busy writing back its dirty lines (the Python backend's 15 ms call dirties
            # ~20 MB: one untimed call after it left native's 1M per-tensor median 10% slow).
            for _ in range(count):
                call()
            start = time.perf_counter()
            for _ in range(count):
                call()
            samples[name].append((time.perf_counter() - start) / count)
    return {name: statistics.median(values) for name, values in samples.items()}


def unavailable_reason(impl: str) -> str | None:
    """Why ``impl`` cannot run here, or None."""
    if impl not in ON_BACKEND:
        return None
    from ..backends import get

    missing = get(ON_BACKEND[impl][0]).available()
    return None if missing is None else missing.message


def progress_line(row: BenchRow) -> str:
    times = ", ".join(f"{k} {microseconds(v)}" for k, v in row.seconds.items())
    return f"{row.op} {row.layout} n={row.elements}: {times}"


def microseconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    micro = seconds * 1e6
    return f"{micro:.1f}" if micro < 1000 else f"{micro:,.0f}"
