"""Fusion "auto"'s decisions on disk, so a model is measured once per machine and shapes.

One JSON file per model and machine: the key (the model's digest, the CPU's model and ISA
flags, threads, optimization level, backend and arithmetic, library versions) and, per input
shapes, the decision measured there, with its spread and when it was measured (a decision
past its age limit is measured again: :mod:`.auto_tuning`). The folder is
``$QUANTGRAPH_CACHE_DIR/tuning``, else ``$XDG_CACHE_HOME/quantgraph/tuning``, else
``~/.cache/quantgraph/tuning``: files a user may read and delete (``quantgraph tune --json``
names the file). A file that cannot be read is ignored and rewritten; a cache that cannot be
written costs a measurement next time, never an error.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...cpu import cpu
from ..plan import ONNXRUNTIME
from .tuner import Choice, Decision

# 3: the original's own form a candidate, spreads, re-measurements and the measuring time; 2:
# candidates timed in worker processes (1: in one process)
FORMAT = 3


def folder() -> Path:
    base = os.environ.get("QUANTGRAPH_CACHE_DIR")
    if base:
        return Path(base) / "tuning"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "quantgraph" / "tuning"


def model_key(
    model: bytes,
    *,
    threads: int,
    level: int,
    backend: str,
    arithmetic: str,
    versions: Mapping[str, str],
) -> dict[str, Any]:
    """What a decision depends on besides the input shapes."""
    found = cpu()
    return {
        "format": FORMAT,
        "model_sha256": hashlib.sha256(model).hexdigest(),
        "cpu": found.model,
        "cpu_flags": sorted(found.flags),
        "threads": threads,
        "level": level,
        "backend": backend,
        "arithmetic": arithmetic,
        "versions": dict(versions),
    }


def shapes_key(shapes: Mapping[str, list[int]]) -> str:
    return json.dumps(dict(sorted(shapes.items())))


def path_of(key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return folder() / f"{digest}.json"


def load(key: Mapping[str, Any], shapes: Mapping[str, list[int]]) -> Decision | None:
    """The decision stored for ``key`` at ``shapes`` (None: none; a decision measured at
    other shapes is no answer for these)."""
    path = path_of(key)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("key") != dict(key):
            return None
        entry = stored["decisions"].get(shapes_key(shapes))
        if entry is None:
            return None
        decision = _decision(entry)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    decision.source = "cache"
    decision.cache_file = str(path)
    return decision


def store(key: Mapping[str, Any], decision: Decision) -> Path | None:
    """Add ``decision`` (measured at ``decision.shapes``) to ``key``'s file, atomically; None
    when the cache cannot be written."""
    path = path_of(key)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("key") != dict(key):
            stored = None
    except (OSError, ValueError):
        stored = None
    if not isinstance(stored, dict) or not isinstance(stored.get("decisions"), dict):
        stored = {"key": dict(key), "decisions": {}}
    entry = _entry(decision)
    stored["decisions"][shapes_key(decision.shapes)] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tuning-", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(stored, file, indent=1)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        return None
    decision.cache_file = str(path)
    return path


def _entry(decision: Decision) -> dict[str, Any]:
    measured_at = decision.measured_at if decision.measured_at is not None else time.time()
    return {
        "chosen": decision.choice.name,
        "candidates": [
            {"name": c.name, "engines": [list(e) for e in c.engines], "rest": c.rest}
            for c in decision.candidates
        ],
        "times_ms": decision.times_ms,
        "ratios": decision.ratios,
        "spread_ms": decision.spread_ms,
        "ratio_spread": decision.ratio_spread,
        "rounds": decision.rounds,
        "measurements": decision.measurements,
        "runner_up": decision.runner_up,
        "settled": decision.settled,
        "isolation": decision.isolation,
        "dropped": decision.dropped,
        "shapes": decision.shapes,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(measured_at)),
    }


def _decision(entry: Mapping[str, Any]) -> Decision:
    candidates = [
        Choice(
            str(c["name"]),
            tuple((str(a), str(b)) for a, b in c["engines"]),
            str(c.get("rest", ONNXRUNTIME)),
        )
        for c in entry["candidates"]
    ]
    (choice,) = [c for c in candidates if c.name == entry["chosen"]]
    settled = entry["settled"]
    runner_up = entry["runner_up"]
    return Decision(
        choice,
        "cache",
        candidates,
        {str(k): float(v) for k, v in entry["times_ms"].items()},
        {str(k): float(v) for k, v in entry["ratios"].items()},
        int(entry["rounds"]),
        {str(k): [int(d) for d in v] for k, v in entry["shapes"].items()},
        isolation=str(entry.get("isolation", "")),
        spread_ms={str(k): [float(q) for q in v] for k, v in entry["spread_ms"].items()},
        ratio_spread={str(k): [float(q) for q in v] for k, v in entry["ratio_spread"].items()},
        measurements=int(entry["measurements"]),
        runner_up=None if runner_up is None else str(runner_up),
        settled=None if settled is None else bool(settled),
        dropped={str(k): str(v) for k, v in entry.get("dropped", {}).items()},
        measured_at=float(
            calendar.timegm(time.strptime(str(entry["measured_at"]), "%Y-%m-%dT%H:%M:%SZ"))
        ),
    )


__all__ = ["folder", "load", "model_key", "path_of", "shapes_key", "store"]
