"""Fusion "auto"'s candidate plans timed each in a worker process of its own.

As whole models are benchmarked, each variant in its own process: no candidate's thread
pools, allocator or oneDNN's OpenMP threads share a process with another's. (On nudenet s8 both
ways measured oneDNN's plan at 0.96-0.98x of the onnxruntime plan, as 11 rounds of whole
processes did, 0.88x against 0.92x of the original; an earlier 0.89x against 1.00x was
noise.) Each candidate's prepared model runs in a worker
(``python -m quantgraph.runtime.tuning_workers``) that the tuner drives turn by turn,
interleaved as before: only one works at a time, the others wait on a pipe. The protocol, one
line each way: the parent sends the worker's settings as JSON, the worker answers ``ready``
(its session built and run once); then each ``COUNT WARM`` asks for WARM untimed and COUNT
timed calls, answered by the seconds those took. End of input ends the worker; it ignores
Ctrl-C (the parent's interrupt ends it by closing its input, or kills it).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import onnx_ir as ir

from ..fusion.auto.tuner import MAKING, RUNNING, Dropped, Opener, Turn, drop
from ..ir.model_files import has_external_data, save_model
from .worker_models import MODEL, load_by_reference, save_by_reference

ENVIRONMENT = "QUANTGRAPH_TUNING_ISOLATION"  # "none": time every candidate in this process
# (its value "one-at-a-time": runtime.candidate_memory)
LARGEST_MODEL = 256 << 20  # bytes of weights a worker may copy; larger models time in-process
READY_SECONDS = 600.0  # a worker loads onnxruntime and builds its session in this time
TURN_SECONDS = 300.0  # one turn answers in this time, or the worker is stuck


class WorkerFailed(RuntimeError):
    """A candidate's worker process could not build or run its session: ``reason``, the
    worker's own error (or what it did not do), ``doing``, whether its session failed to be
    made or to run (:data:`~quantgraph.fusion.auto.tuner.MAKING`, ``RUNNING``; "" when not known).
    A candidate dropped for it says those (:func:`~quantgraph.fusion.auto.tuner.drop`)."""

    def __init__(self, message: str, reason: str = "", doing: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message
        self.doing = doing


# what a worker writes before its error when its session was made but failed to run
RUN_FAILED = "run failed: "


@dataclass(frozen=True)
class Job:
    """One candidate plan for a worker: its model, planned and prepared for the backend."""

    model: ir.Model
    partitions: bool  # whether it holds oneDNN partitions (their kernel is registered too)


@dataclass(frozen=True)
class Settings:
    """What every worker's session shares with the tuning session."""

    backend: str
    arithmetic: str
    level: int
    threads: int
    providers: tuple[str, ...]


class _Worker:
    def __init__(self, name: str, folder: Path, settings: dict[str, Any]) -> None:
        self.name = name
        self._errors = folder / "stderr.txt"
        with open(self._errors, "wb") as errors:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=_environment(),
            )
        self._send(json.dumps(settings))

    def _send(self, line: str) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except BrokenPipeError:
            raise self._failed("ended before its turn") from None

    def reply(self, timeout: float) -> str:
        stdout = self._process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline() if ready else b""
        if not line:
            raise self._failed(
                f"gave no answer in {timeout:.0f} s" if not ready else "ended without an answer"
            )
        return line.decode().strip()

    def ready(self) -> None:
        """Wait for the worker's session (raises :class:`WorkerFailed`)."""
        answer = self.reply(READY_SECONDS)
        if answer != "ready":
            raise self._failed(f"answered {answer!r}")

    def turn(self, count: int, warm: int) -> float:
        self._send(f"{count} {warm}")
        return float(self.reply(TURN_SECONDS))

    def _failed(self, what: str) -> WorkerFailed:
        self.stop()
        lines = self._errors.read_text(errors="replace").strip().splitlines()
        last = lines[-1] if lines else ""
        why = f": {last}" if last else ""
        doing = ""
        if last.startswith(RUN_FAILED):
            last, doing = last[len(RUN_FAILED) :], RUNNING
        elif last:
            doing = MAKING
        return WorkerFailed(
            f"fusion auto: the worker timing plan '{self.name}' {what}{why}",
            f"{last} (in its worker process)" if last else f"its worker process {what}",
            doing,
        )

    def stop(self) -> None:
        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(OSError):
                process.stdin.close()  # its end of input: the worker returns
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def in_process(model: ir.Model, feeds: Mapping[str, np.ndarray], size: int) -> str | None:
    """Why ``model``'s candidates (``size`` bytes of weights) are timed in this process rather
    than in workers (None: in workers): asked to, weights each worker would copy, inputs a
    file cannot carry."""
    why = one_at_a_time_in_process(feeds)
    if why is not None:
        return why
    if has_external_data(model):
        return "weights in external data (each worker would copy them)"
    if size > LARGEST_MODEL:
        return f"{size >> 20} MiB of weights (each worker would copy them)"
    return None


def one_at_a_time_in_process(feeds: Mapping[str, np.ndarray]) -> str | None:
    """Why candidates timed one at a time are timed in this process rather than each in a
    worker of its own (None: in workers)."""
    if os.environ.get(ENVIRONMENT, "") == "none":
        return f"{ENVIRONMENT}=none"
    if any(np.asarray(array).dtype.hasobject for array in feeds.values()):
        return "inputs of strings or objects"
    return None


def _environment() -> dict[str, str]:
    """The parent's environment, with its import path (a worktree or a source checkout)."""
    environment = dict(os.environ)
    paths = [p for p in sys.path if p]
    environment["PYTHONPATH"] = os.pathsep.join(paths)
    return environment


@contextlib.contextmanager
def worker_turns(
    jobs: Mapping[str, Job],
    feeds: Mapping[str, np.ndarray],
    settings: Settings,
    dropped: Dropped | None = None,
) -> Iterator[dict[str, Turn]]:
    """Each of ``jobs`` in a worker process, ready; its turn is its worker's. A worker after
    the first that cannot get ready is stopped and its job dropped, when ``dropped`` records
    it (:func:`~quantgraph.fusion.auto.tuner.drop`). The workers end and their files go when the
    context ends (an interrupt included)."""
    workers: list[_Worker] = []
    with _prepared(jobs, feeds, settings, by_reference=False) as prepared:
        try:
            for name, (place, config) in prepared.items():
                workers.append(_Worker(name, place, config))
            ready: list[_Worker] = []
            for worker in workers:  # they build their sessions side by side
                try:
                    worker.ready()
                except WorkerFailed as error:
                    drop(worker.name, error, workers[0].name, dropped)
                    continue
                ready.append(worker)
            yield {worker.name: worker.turn for worker in ready}
        finally:
            for worker in workers:
                worker.stop()


@contextlib.contextmanager
def worker_openers(
    jobs: Mapping[str, Job], feeds: Mapping[str, np.ndarray], settings: Settings
) -> Iterator[dict[str, Opener]]:
    """Each of ``jobs`` opened in a worker process of its own for a block of turns, the
    process ended with the block (timed one at a time:
    :func:`~quantgraph.fusion.auto.tuner.time_one_at_a_time`): all it held goes with it, where
    memory a session frees in this process stays its address space (glibc's heap). Weights a
    file holds are not copied (:mod:`.worker_models`). Raises
    :class:`~.worker_models.NotByReference` for a model whose external files cannot be told
    apart by location."""
    with _prepared(jobs, feeds, settings, by_reference=True) as prepared:

        def opener(name: str) -> Opener:
            @contextlib.contextmanager
            def opened() -> Iterator[Turn]:
                place, config = prepared[name]
                worker = _Worker(name, place, config)
                try:
                    worker.ready()
                    yield worker.turn
                finally:
                    worker.stop()

            return opened

        yield {name: opener(name) for name in prepared}


@contextlib.contextmanager
def _prepared(
    jobs: Mapping[str, Job],
    feeds: Mapping[str, np.ndarray],
    settings: Settings,
    *,
    by_reference: bool,
) -> Iterator[dict[str, tuple[Path, dict[str, Any]]]]:
    """Each job's folder and worker settings, its model and the inputs saved in a scratch
    folder that goes when the context ends."""
    with tempfile.TemporaryDirectory(prefix="quantgraph-tuning-") as scratch:
        folder = Path(scratch)
        names = list(feeds)
        inputs = folder / "inputs.npz"
        np.savez(inputs, *[np.asarray(feeds[name]) for name in names])
        prepared: dict[str, tuple[Path, dict[str, Any]]] = {}
        for index, (name, job) in enumerate(jobs.items()):
            place = folder / str(index)
            place.mkdir()
            folders: dict[str, str] | None = None
            if by_reference:
                folders = save_by_reference(job.model, place)
            else:
                save_model(job.model, place / MODEL)
            prepared[name] = (
                place,
                {
                    "model": str(place / MODEL),
                    "folders": folders,
                    "inputs": str(inputs),
                    "names": names,
                    "partitions": job.partitions,
                    "backend": settings.backend,
                    "arithmetic": settings.arithmetic,
                    "level": settings.level,
                    "threads": settings.threads,
                    "providers": list(settings.providers),
                },
            )
        yield prepared


def _serve(settings: dict[str, Any], requests: IO[str], answers: IO[str]) -> None:
    from ..backends import require, resolve_arithmetic
    from .candidates import candidate_options, new_session
    from .weights_by_reference import source

    backend = require(settings["backend"])
    options = candidate_options(int(settings["level"]), int(settings["threads"]))
    path = Path(settings["model"])
    model: str | bytes = str(path)
    folders = settings.get("folders")
    if folders is not None:  # weights by reference: in their files, handed over from memory
        weights = source(load_by_reference(path.parent, folders), options)
        model = weights.model
    session = new_session(
        backend,
        resolve_arithmetic(backend, settings["arithmetic"]),
        model,
        options,
        partitions=bool(settings["partitions"]),
        providers=list(settings["providers"]),
    )
    with np.load(settings["inputs"], allow_pickle=False) as stored:
        feeds = {name: stored[f"arr_{i}"] for i, name in enumerate(settings["names"])}
    run: Any = session.run

    def call() -> None:
        backend.before_run()
        run(None, feeds)
        backend.after_run()

    try:
        call()
        print("ready", file=answers, flush=True)
        for line in requests:
            count, warm = (int(part) for part in line.split())
            for _ in range(warm):
                call()
            began = time.perf_counter()
            for _ in range(count):
                call()
            print(repr(time.perf_counter() - began), file=answers, flush=True)
    except Exception as error:
        raise _RunFailed(error) from error


class _RunFailed(Exception):
    """The worker's session was made and failed to run (the parent says which)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{RUN_FAILED}{_described(error)}")


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends its workers
    # Answers go on a copy of stdout; anything a library prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        _serve(json.loads(line), sys.stdin, answers)
    except _RunFailed as error:  # the parent reports it, with the candidate's name
        print(str(error), file=sys.stderr)
        return 1
    except Exception as error:
        print(_described(error), file=sys.stderr)
        return 1
    return 0


def _described(error: Exception) -> str:
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0] if first else ''}"


if __name__ == "__main__":
    sys.exit(main())
