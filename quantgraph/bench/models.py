"""Whole-model timing: the original QDQ model at ORT_ENABLE_ALL and ORT_DISABLE_ALL against the
rewritten model per backend and fusion mode (``quantgraph bench --model ORIGINAL REWRITTEN``).

Each variant runs in its own process, one process per variant per round, the variants in a
rotated order each round: onnxruntime sessions in one process spin-wait against each other
(measured: 60 ms beside three sessions, 23 ms alone), and a machine's speed drifts. A process
warms up, times ``runs`` calls and reports their median; a variant's figure is the median of its
processes' medians, and its ratio is taken round by round against the original at
ORT_ENABLE_ALL measured in the same round, then the median of those ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

BASELINE = "original ORT_ENABLE_ALL"


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
    process_medians_ms: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # to the baseline of the same round
    error: str | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.process_medians_ms) if self.process_medians_ms else None

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    def to_dict(self) -> dict[str, object]:
        found = asdict(self)
        found["median_ms"] = self.median_ms
        found["ratio_to_original"] = self.ratio
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
    progress: Callable[[str], None] | None = None,
) -> list[Timing]:
    """Time every variant (see the module doc); ``inputs`` default to validation's."""
    from ..validation import make_inputs

    chosen = variants(str(original), str(rewritten), backends, fusions)
    feeds = inputs if inputs is not None else make_inputs(original)
    results = {v.label: Timing(v.label) for v in chosen}
    with tempfile.TemporaryDirectory(prefix="quantgraph-bench-") as scratch:
        feed_path = Path(scratch) / "inputs.npz"
        with open(feed_path, "wb") as stream:
            np.savez(stream, **feeds)  # type: ignore[arg-type]
        for round_index in range(rounds):
            shift = round_index % len(chosen)
            order = chosen[shift:] + chosen[:shift]
            measured: dict[str, float] = {}
            for variant in order:
                if results[variant.label].error is not None:
                    continue
                if progress is not None:
                    progress(f"round {round_index + 1}/{rounds}: {variant.label}")
                outcome = _one_process(variant, feed_path, runs, warmup, threads)
                if isinstance(outcome, str):
                    results[variant.label].error = outcome
                else:
                    measured[variant.label] = outcome
                    results[variant.label].process_medians_ms.append(outcome)
            base = measured.get(BASELINE)
            if base:
                for label, value in measured.items():
                    results[label].ratios.append(value / base)
    return list(results.values())


def _one_process(
    variant: Variant, feeds: Path, runs: int, warmup: int, threads: int
) -> float | str:
    """The variant's median time per call in ms, timed in a fresh process, or its error."""
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
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        text = (done.stderr.strip().splitlines() or ["it exited with " + str(done.returncode)])[-1]
        return text
    answer = json.loads(lines[-1])
    if "error" in answer:
        return str(answer["error"])
    return float(answer["median_ms"])


def _worker(argv: list[str]) -> int:
    """In the timed process: build the session, warm up, time ``runs`` calls."""
    import onnxruntime as ort

    from ..errors import one_line
    from ..testing import quiet_session_options

    spec, feeds_path, runs, warmup, threads = argv
    variant = Variant(**json.loads(spec))
    with np.load(feeds_path, allow_pickle=False) as data:
        feeds = {name: data[name] for name in data.files}
    options = quiet_session_options(threads=int(threads), optimize=True)
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, variant.level)
    try:
        if variant.backend is None:
            session = ort.InferenceSession(variant.model, options, ["CPUExecutionProvider"])
            call = session.run
        else:
            from ..runtime.session import InferenceSession

            wrapped = InferenceSession(
                variant.model, variant.backend, options=options, fusion=variant.fusion
            )
            call = wrapped.run
        for _ in range(int(warmup)):
            call(None, feeds)
        times = []
        for _ in range(int(runs)):
            start = time.perf_counter()
            call(None, feeds)
            times.append((time.perf_counter() - start) * 1e3)
    except Exception as error:
        print(json.dumps({"error": one_line(error)}))
        return 0
    print(json.dumps({"median_ms": statistics.median(times), "times_ms": times}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker(sys.argv[1:]))
