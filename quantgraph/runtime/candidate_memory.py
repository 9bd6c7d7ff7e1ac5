"""Whether fusion "auto"'s candidate sessions fit in memory side by side.

Timed side by side (turns interleaved round by round, every candidate's session alive), N
candidates hold N copies of the weights and more: onnxruntime's initializers, its prepacked
forms, oneDNN's compiled partitions (at 208 MiB of weights, five candidates in one process
peaked at 2.3 GB: about twice the weights a session). Where that would not fit in what this
process may still use, the memory the system has available and the room under its address-space
limit (``ulimit -v``), the candidates are timed one at a time instead
(:func:`quantgraph.fusion.auto.tuner.time_one_at_a_time`): one session alive, each made again for
its second block, in a worker process that ends with the block where it can
(:func:`~.tuning_workers.worker_openers`). ``QUANTGRAPH_TUNING_ISOLATION=one-at-a-time`` asks
for that on any model.
"""

from __future__ import annotations

import contextlib
import os
import resource

import onnx_ir as ir

from ..ir.walk import subgraphs
from .tuning_workers import ENVIRONMENT

ONE_AT_A_TIME = "one-at-a-time"  # the value of ENVIRONMENT that asks for it
SESSION_FACTOR = 2  # bytes a candidate's session holds per byte of the model's weights
SHARE = 0.5  # of the room left: the rest for inputs, outputs and onnxruntime's own memory


def weights_bytes(model: ir.Model) -> int:
    """The bytes of ``model``'s initializers (external data counted, not read)."""
    return sum(
        value.const_value.nbytes
        for graph in (model.graph, *subgraphs(model.graph))
        for value in graph.initializers.values()
        if value.const_value is not None
    )


def room() -> int | None:
    """Bytes this process may still take: the system's available memory and what its
    address-space limit leaves, the smaller (None: neither is known)."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        found.append(_proc_kib("/proc/meminfo", "MemAvailable:") << 10)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        with contextlib.suppress(OSError, ValueError):
            found.append(max(0, soft - (_proc_kib("/proc/self/status", "VmSize:") << 10)))
    return min(found) if found else None


def crowded(weights: int, sessions: int) -> str | None:
    """Why ``sessions`` candidate sessions on ``weights`` bytes of weights are timed one at a
    time (None: side by side)."""
    if os.environ.get(ENVIRONMENT, "") == ONE_AT_A_TIME:
        return f"{ENVIRONMENT}={ONE_AT_A_TIME}"
    need = sessions * SESSION_FACTOR * weights
    free = room()
    if free is None or need <= SHARE * free:
        return None
    return (
        f"{sessions} sessions side by side would hold ~{_gib(need)} GiB, over half of the "
        f"{_gib(free)} GiB this process may still use"
    )


def _proc_kib(path: str, key: str) -> int:
    with open(path, encoding="ascii") as lines:
        for line in lines:
            if line.startswith(key):
                return int(line.split()[1])
    raise ValueError(f"{key} not in {path}")


def _gib(size: int) -> str:
    return f"{size / (1 << 30):.2f}"


__all__ = ["ONE_AT_A_TIME", "crowded", "room", "weights_bytes"]
