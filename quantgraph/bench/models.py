"""Whole-model timing: the original QDQ model at ORT_ENABLE_ALL and ORT_DISABLE_ALL against the
rewritten model per backend and fusion mode (``quantgraph bench --model ORIGINAL REWRITTEN``).

Each variant runs in processes of its own: onnxruntime sessions in one process spin-wait against
each other (measured: 60 ms beside three sessions, 23 ms alone). Two things move a process's
times on a shared machine, and the schedule answers both:

* the machine's speed drifts within seconds (on the 2-core VM of docs/benchmarks.md one
  process's 500-call medians went 33 -> 60 -> 39 -> 33 us). So the processes start once, build
  their sessions and warm up, then take turns: a round asks one process of each variant, in a
  rotated order, to time ``runs`` calls after ``warmup`` untimed ones, and each ratio is taken
  against the original at ORT_ENABLE_ALL of the same round, timed moments before or after.
  Between its turns a process is stopped (SIGSTOP), so that its intra-op threads, which spin
  for tens of ms after a run, take no core from the next one.
* where a process's buffers fall in pages and caches shifts its times by several per cent for
  its whole life. So each variant has ``processes`` of them, the rounds going round-robin.

A variant's figure is the median of its rounds' medians, its ratio the median of its round
ratios. ``fresh_processes`` is the earlier schedule: a new process per variant per round (each
round then lasts seconds, and holds each process's start-up).

A process that takes longer than ``turn_timeout`` seconds to build its session or to answer a
turn is killed and its variant reported as failed; the others go on (a kernel that hangs must
not hang the bench).
"""

from __future__ import annotations

import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

# quantgraph.validation.inputs.search's defaults, without importing it into every timed process
# (tests/test_validation_budget.py checks they agree).
MEMORY_BUDGET = 2 << 30
SEARCH_TIMEOUT = 60.0

BASELINE = "original ORT_ENABLE_ALL"
# Seconds a timed process may take to build its session or to answer one turn (at most a
# week: select() and subprocess take no larger wait).
DEFAULT_TURN_TIMEOUT = 600.0
MAX_TURN_TIMEOUT = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Variant:
    """One way to run a model: which file, onnxruntime's level, or a backend and fusion mode."""

    label: str
    model: str
    level: str = "ORT_ENABLE_ALL"
    backend: str | None = None  # None: plain onnxruntime (the original)
    fusion: str = "none"


@dataclass
class Timing:
    label: str
    process_medians_ms: list[float] = field(default_factory=list)  # one per round
    ratios: list[float] = field(default_factory=list)  # to the baseline of the same round
    error: str | None = None
    # What every variant was fed, by input name: validate's description of each input.
    inputs: dict[str, dict[str, object]] = field(default_factory=dict)
    # Fusion "auto": the plan its first process chose, and why (null for the other variants).
    plan: str | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.process_medians_ms) if self.process_medians_ms else None

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def ratio_quartiles(self) -> tuple[float, float] | None:
        """The first and third quartiles of the round ratios: how far the rounds agree."""
        if not self.ratios:
            return None
        if len(self.ratios) == 1:
            return self.ratios[0], self.ratios[0]
        first, _, third = statistics.quantiles(self.ratios, n=4, method="inclusive")
        return first, third

    def to_dict(self) -> dict[str, object]:
        found = asdict(self)
        found["median_ms"] = self.median_ms
        found["ratio_to_original"] = self.ratio
        quartiles = self.ratio_quartiles
        found["ratio_quartiles"] = None if quartiles is None else list(quartiles)
        return found


def variants(
    original: str, rewritten: str, backends: Sequence[str], fusions: Sequence[str]
) -> list[Variant]:
    found = [
        Variant(BASELINE, original),
        Variant("original ORT_DISABLE_ALL", original, level="ORT_DISABLE_ALL"),
    ]
    for backend in backends:
        for fusion in fusions:
            level = "ORT_ENABLE_ALL"
            found.append(
                Variant(f"rewritten {backend} fusion={fusion}", rewritten, level, backend, fusion)
            )
    return found


def bench_models(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    *,
    backends: Sequence[str] = ("native",),
    fusions: Sequence[str] = ("none", "onnxruntime"),
    rounds: int = 5,
    runs: int = 20,
    warmup: int = 3,
    threads: int = 0,
    inputs: dict[str, np.ndarray] | None = None,
    progress: Callable[[str, str], None] | None = None,
    fresh_processes: bool = False,
    processes: int = 3,
    turn_timeout: float = DEFAULT_TURN_TIMEOUT,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    memory_budget: int | None = MEMORY_BUDGET,
    search_timeout: float | None = SEARCH_TIMEOUT,
) -> list[Timing]:
    """Time every variant (see the module doc) on one sample: ``inputs``, checked against the
    original, or else generated as validate generates its first (``seed``, ``dims``,
    ``val_ranges``, ``memory_budget``, ``search_timeout``: the plan the original runs, found
    by :func:`quantgraph.validation.generate`). Every row's ``inputs`` says what they were.
    ``progress(stage, text)`` hears what is being done now, in stages ``start`` (the
    variants' processes) and ``rounds``."""
    if inputs is not None and (dims or val_ranges):
        raise ValueError("dims and val_ranges shape generated inputs only, not given inputs")
    if not 0 < turn_timeout <= MAX_TURN_TIMEOUT:  # also NaN
        raise ValueError(
            f"turn_timeout must be more than 0 and at most {MAX_TURN_TIMEOUT:g} seconds, "
            f"got {turn_timeout}"
        )
    for name, count in (("rounds", rounds), ("runs", runs), ("processes", processes)):
        if count < 1:
            raise ValueError(f"{name} must be at least 1, got {count}")

    _check_roles(original, rewritten)
    chosen = variants(str(original), str(rewritten), backends, fusions)
    feeds, described = _feeds(
        original, inputs, seed, dims, val_ranges, memory_budget, search_timeout
    )
    results = {v.label: Timing(v.label, inputs=described) for v in chosen}
    with tempfile.TemporaryDirectory(prefix="quantgraph-bench-") as scratch:
        feed_path = Path(scratch) / "inputs.npz"
        with open(feed_path, "wb") as stream:
            np.savez(stream, **feeds)  # type: ignore[arg-type]
        live: dict[str, list[_LiveProcess]] = {v.label: [] for v in chosen}
        try:
            if not fresh_processes:
                count = max(1, min(processes, rounds))  # a process per round at most
                for variant in chosen:
                    if progress is not None:
                        progress("start", f"starting {count} processes: {variant.label}")
                    command = _command(variant, feed_path, runs, warmup, threads, serve=True)
                    failed = _start(
                        command, count, Path(scratch), live[variant.label], turn_timeout
                    )
                    results[variant.label].error = failed
                    results[variant.label].plan = next(
                        (p.plan for p in live[variant.label] if p.plan), None
                    )
            for round_index in range(rounds):
                shift = round_index % len(chosen)
                order = chosen[shift:] + chosen[:shift]
                measured: dict[str, float] = {}
                for variant in order:
                    if results[variant.label].error is not None:
                        continue
                    if progress is not None:
                        progress("rounds", f"round {round_index + 1}/{rounds}: {variant.label}")
                    if fresh_processes:
                        outcome = _one_process(
                            variant, feed_path, runs, warmup, threads, turn_timeout
                        )
                    else:
                        mine = live[variant.label]
                        outcome = mine[round_index % len(mine)].time_calls()
                    if isinstance(outcome, str):
                        results[variant.label].error = outcome
                    else:
                        measured[variant.label] = outcome
                        results[variant.label].process_medians_ms.append(outcome)
                base = measured.get(BASELINE)
                if base:
                    for label, value in measured.items():
                        results[label].ratios.append(value / base)
        finally:
            _close_all([p for group in live.values() for p in group])
    return list(results.values())


def _check_roles(original: str | os.PathLike[str], rewritten: str | os.PathLike[str]) -> None:
    """An ORIGINAL holding quantgraph's ops cannot run as the baseline: validate's message
    (the arguments swapped, say so) before any process starts. (A quantized ORIGINAL timed
    against a float model is a timing like any other.)"""
    from ..ir.model_files import load_model
    from ..ir.walk import spec_nodes
    from ..validation.roles import check_roles

    first = load_model(original)
    if any(True for _ in spec_nodes(first)):
        check_roles(first, load_model(rewritten), str(original), str(rewritten), "bench --model")


def _feeds(
    original: str | os.PathLike[str],
    inputs: dict[str, np.ndarray] | None,
    seed: int,
    dims: Mapping[str, int] | None,
    val_ranges: Mapping[str, tuple[float, float]] | None,
    memory_budget: int | None,
    search_timeout: float | None,
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, object]]]:
    """The sample every variant is timed on, and what each input is (as validate's report
    describes inputs)."""
    from ..ir.model_files import load_model
    from ..validation import generate, input_samples
    from ..validation.inputs.feeds import described_given

    model = load_model(original)
    if inputs is not None:
        (given,) = input_samples(inputs, model)  # checked against the model's inputs
        return given, described_given(given)
    found = generate(
        model,
        seed=seed,
        dims=dims,
        val_ranges=val_ranges,
        memory_budget=memory_budget,
        search_timeout=search_timeout,
    )
    return found.samples[0], found.inputs


def _start(
    command: list[str], count: int, scratch: Path, into: list[_LiveProcess], timeout: float
) -> str | None:
    """``count`` processes of one variant, each ready (session built, warm) before the next
    starts: together they would only share the cores, and hold all their memory at once.
    Each goes into ``into`` as soon as it exists (the caller closes them whatever happens);
    the first one's failure is the variant's."""
    for _ in range(count):
        process = _LiveProcess(command, scratch, timeout)
        into.append(process)
        failed = process.wait_ready()
        if failed is not None:
            return failed
    return None


def _command(
    variant: Variant, feeds: Path, runs: int, warmup: int, threads: int, *, serve: bool
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "quantgraph.bench.models",
        json.dumps(asdict(variant)),
        str(feeds),
        str(runs),
        str(warmup),
        str(threads),
    ]
    return [*command, "serve"] if serve else command


# Where the platform has them (POSIX): a process between its turns is stopped.
_PAUSE: int | None = getattr(signal, "SIGSTOP", None)
_RESUME: int | None = getattr(signal, "SIGCONT", None)


class _LiveProcess:
    """A variant's process that builds its session once and then times ``runs`` calls each
    time it is asked (the worker's "serve" mode: one JSON line per answer)."""

    def __init__(self, command: list[str], scratch: Path, timeout: float) -> None:
        self._timeout = timeout
        # Its stdout and stderr go to a file (an unread pipe could fill and block the worker);
        # its replies come on a pipe of their own. Closed by reap(), which bench_models always
        # calls (_close_all).
        self._log = tempfile.TemporaryFile("w+", dir=scratch)  # noqa: SIM115
        read_end, write_end = os.pipe()
        try:
            self._process = subprocess.Popen(
                [*command, str(write_end)],
                stdin=subprocess.PIPE,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(write_end,),
                text=True,
            )
        except BaseException:
            os.close(read_end)
            self._log.close()
            raise
        finally:
            os.close(write_end)  # the worker's now: end of file here when it exits
        self._replies = read_end
        self._pending = b""  # bytes read past the last reply
        self.plan: str | None = None  # fusion auto's choice, as the ready answer says

    def _reply_line(self) -> bytes | None:
        """The next reply line (b"": the worker has exited), or None when ``self._timeout``
        seconds pass without one. Raw reads into a buffer of its own, so that neither a line
        that arrives in pieces nor two lines in one read can mislead the wait."""
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                return None
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                return b""
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _answer(self) -> dict[str, object]:
        line = self._reply_line()
        if line is None:
            self.kill()
            self._process.wait()
            return {"error": _silent(self._timeout)}
        if line:
            found: dict[str, object] = json.loads(line)  # the worker's own channel: JSON only
            return found
        code = self._process.wait()
        self._log.seek(0)
        lines = self._log.read().strip().splitlines()
        if lines:
            return {"error": lines[-1]}
        how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
        return {"error": f"its process {how}"}

    def wait_ready(self) -> str | None:
        """None once the session is built and warm, else why not."""
        answer = self._answer()
        self._signal(_PAUSE)
        self.plan = str(answer["plan"]) if answer.get("plan") else None
        return str(answer["error"]) if "error" in answer else None

    def time_calls(self) -> float | str:
        """The median ms per call of one turn, or the error. The process is stopped between
        its turns: onnxruntime's intra-op threads spin for tens of ms after a run (about 45 ms
        of CPU time here) and would take a core from the next process's turn (x[16,4096] @
        int4, 5 calls a turn: 9.6 ms a call instead of 4.0 ms)."""
        assert self._process.stdin is not None
        self._signal(_RESUME)
        try:
            self._process.stdin.write("time\n")
            self._process.stdin.flush()
        except OSError:
            pass  # it has exited: _answer reports how
        answer = self._answer()
        self._signal(_PAUSE)
        if "error" in answer:
            return str(answer["error"])
        return float(answer["median_ms"])  # type: ignore[arg-type]

    def _signal(self, number: int | None) -> None:
        if number is not None and self._process.poll() is None:
            os.kill(self._process.pid, number)

    def release(self) -> None:
        """Let it go on and end: resumed, its input closed (neither blocks)."""
        try:
            self._signal(_RESUME)
            if self._process.stdin is not None:
                self._process.stdin.close()
        except OSError:
            pass

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()

    def reap(self) -> None:
        """Wait for it to end (killed if it takes longer than 10 s)."""
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            os.close(self._replies)
            self._log.close()


def _close_all(processes: list[_LiveProcess]) -> None:
    """Every process released first, so that an interrupt while waiting for one leaves none
    stopped with its input open; then each waited for, killed if need be."""
    for process in processes:
        process.release()
    try:
        for process in processes:
            process.reap()
    finally:
        for process in processes:  # after an interrupt above: no process outlives the bench
            process.kill()


def _silent(timeout: float) -> str:
    return f"no answer within {timeout:g} s (--turn-timeout): its process was killed"


def _one_process(
    variant: Variant, feeds: Path, runs: int, warmup: int, threads: int, timeout: float
) -> float | str:
    """The variant's median time per call in ms, timed in a fresh process, or its error."""
    command = _command(variant, feeds, runs, warmup, threads, serve=False)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:  # run() has killed it
        return _silent(timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        text = (done.stderr.strip().splitlines() or ["it exited with " + str(done.returncode)])[-1]
        return text
    answer = json.loads(lines[-1])
    if "error" in answer:
        return str(answer["error"])
    return float(answer["median_ms"])


def _worker(argv: list[str]) -> int:
    """In the timed process: build the session, warm up, time ``runs`` calls; with a trailing
    "serve", say it is ready and time ``runs`` calls for each line read, until end of input."""
    import onnxruntime as ort

    from ..errors import one_line
    from ..testing import quiet_session_options

    spec, feeds_path, runs, warmup, threads, *mode = argv
    # Served, replies go on a pipe of their own (its descriptor follows "serve"): whatever else
    # writes to stdout (a library's verbose mode, a sitecustomize) cannot get between them.
    serve = bool(mode) and mode[0] == "serve"
    reply = os.fdopen(int(mode[1]), "w") if serve else sys.stdout
    variant = Variant(**json.loads(spec))
    with np.load(feeds_path, allow_pickle=False) as data:
        feeds = {name: data[name] for name in data.files}
    options = quiet_session_options(threads=int(threads), optimize=True)
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, variant.level)

    def say(answer: dict[str, object]) -> None:
        print(json.dumps(answer), file=reply, flush=True)

    def timed() -> list[float]:
        times = []
        for _ in range(int(runs)):
            start = time.perf_counter()
            call(None, feeds)
            times.append((time.perf_counter() - start) * 1e3)
        return times

    try:
        call: Callable[..., object]
        wrapped = None
        if variant.backend is None:
            from ..backends.ort_sessions import ort_session

            session = ort_session(variant.model, options)
            call = session.run
        else:
            from ..runtime.session import InferenceSession

            wrapped = InferenceSession(
                variant.model, variant.backend, options=options, fusion=variant.fusion
            )
            call = wrapped.run
        for _ in range(int(warmup)):
            call(None, feeds)
        if wrapped is not None:  # fusion auto decided at the first run: its run may be new
            call = wrapped.run
        if not serve:
            times = timed()
            say({"median_ms": statistics.median(times), "times_ms": times})
            return 0
        tuning = None if wrapped is None else wrapped.fusion_plan.tuning
        say({"ready": True, "plan": None if tuning is None else tuning.why})
        for _ in sys.stdin:
            # Each turn warms up again: between turns the other processes ran, and this one's
            # weights and pool threads went cold (without it, x[16,4096] @ int4 timed 5 calls a
            # turn at 3x the figure of 30-call turns).
            for _ in range(int(warmup)):
                call(None, feeds)
            say({"median_ms": statistics.median(timed())})
    except Exception as error:
        say({"error": one_line(error)})
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker(sys.argv[1:]))
