"""Where evaluations run: in this process, in local worker processes, or on a Ray cluster.
One interface (:class:`Runner`): the search hands a batch of sets and gets their qualities in
the same order, whichever runs them, so the result does not depend on the runner.

Local workers are processes of their own (onnxruntime's thread pools do not survive a fork)
and each holds the problem once; their number is bounded by the CPU count and by a memory
estimate (each worker holds both models and a session: three times their bytes). Ray is an
optional extra (``pip install 'quantgraph[ray]'``): ``address`` is a cluster's (``ray://...``
or ``auto``), or ``local`` to start one on this machine.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import ModelError
from .problem import FallbackProblem

DEFAULT_MEMORY_BUDGET = 8 << 30


class Runner(Protocol):
    """Evaluates batches of kept sets of one problem."""

    description: str
    width: int  # how many evaluations run at once

    def evaluate(self, sets: Sequence[frozenset[str]]) -> list[float]: ...

    def close(self) -> None: ...


class InProcess:
    def __init__(self, problem: FallbackProblem) -> None:
        self.problem = problem
        self.description = "in this process"
        self.width = 1

    def evaluate(self, sets: Sequence[frozenset[str]]) -> list[float]:
        return [self.problem.quality(kept) for kept in sets]

    def close(self) -> None:
        pass


def worker_count(problem: FallbackProblem, requested: int | None, budget: int) -> int:
    """Workers that fit: at most ``requested`` (default: the CPUs), at most what ``budget``
    bytes hold at three times the two models each, at least one."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    wanted = requested or cpus or 1
    each = 3 * (len(problem.float_model) + len(problem.quantized_model)) + sum(
        a.nbytes for s in problem.samples for a in s.values()
    )
    return max(1, min(wanted, budget // max(each, 1)))


class LocalProcesses:
    """Worker processes (``python -m quantgraph.float_fallback.worker PROBLEM``), each reading a
    kept set per line on stdin and answering its quality on stdout: no fork of this process
    and no import of the caller's main module (a script without a ``__main__`` guard works)."""

    def __init__(
        self,
        problem: FallbackProblem,
        workers: int | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> None:
        self.width = worker_count(problem, workers, memory_budget)
        self.description = f"{self.width} local worker process(es)"
        self._folder = tempfile.TemporaryDirectory(prefix="quantgraph-fallback-")
        path = Path(self._folder.name) / "problem.pickle"
        path.write_bytes(pickle.dumps(problem))
        self._workers = [
            subprocess.Popen(
                [sys.executable, "-m", "quantgraph.float_fallback.worker", str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(self.width)
        ]

    def evaluate(self, sets: Sequence[frozenset[str]]) -> list[float]:
        results: list[float] = []
        for start in range(0, len(sets), self.width):
            chunk = sets[start : start + self.width]
            for worker, kept in zip(self._workers, chunk, strict=False):
                assert worker.stdin is not None
                worker.stdin.write(json.dumps(sorted(kept)) + "\n")
                worker.stdin.flush()
            for worker, _ in zip(self._workers, chunk, strict=False):
                assert worker.stdout is not None
                line = worker.stdout.readline()
                answer = json.loads(line) if line else {"error": _last_error(worker)}
                if "error" in answer:
                    raise ModelError(f"fallback: an evaluation failed: {answer['error']}")
                results.append(float(answer["quality"]))
        return results

    def close(self) -> None:
        for worker in self._workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            for stream in (worker.stdin, worker.stdout, worker.stderr):
                if stream is not None:
                    stream.close()
        self._folder.cleanup()


def _last_error(worker: subprocess.Popen[str]) -> str:
    worker.wait(timeout=10)
    text = worker.stderr.read() if worker.stderr is not None else ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"the worker exited with {worker.returncode}"


def _ray_quality(problem: FallbackProblem, kept: frozenset[str]) -> float:
    return problem.quality(kept)


class RayCluster:
    def __init__(self, problem: FallbackProblem, address: str) -> None:
        try:
            import ray as module
        except ImportError:
            raise ModelError(
                "--ray: Ray is not installed (pip install 'quantgraph[ray]')"
            ) from None
        ray: Any = module  # its stubs are partial
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            options: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
            if address == "local":
                ray.init(num_cpus=os.cpu_count() or 1, **options)
            else:
                ray.init(address=address, **options)
        self.width = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.description = f"Ray at {address} ({self.width} CPUs)"
        self._problem = ray.put(problem)
        self._remote = ray.remote(num_cpus=1)(_ray_quality)

    def evaluate(self, sets: Sequence[frozenset[str]]) -> list[float]:
        ray = self._ray
        return [float(q) for q in ray.get([self._remote.remote(self._problem, s) for s in sets])]

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
