"""Fuzzing a profile: :func:`run` (every op, hypothesis seeded so a run can be repeated) and
:func:`main`, the command line ``python -m tools.fuzz``."""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

try:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
except ImportError as _missing:  # pragma: no cover - hypothesis is a dev dependency
    raise ImportError(
        "quantgraph.fuzz needs hypothesis: pip install hypothesis (or quantgraph[dev])"
    ) from _missing

from quantgraph.backends import native_available
from quantgraph.spec import DYNAMIC_DEQUANTIZE

from .case import OP_NAMES, PROFILES, Case
from .formats import PATTERNS, run_formats
from .fuzzer import Fuzzer
from .report import FuzzReport, OpStats
from .strategies import Pair, cases, dequantize_pairs


@contextmanager
def _quiet() -> Iterator[None]:
    """The Python backend logs each rejected call; thousands are expected here."""
    logger = logging.getLogger("quantgraph.backends.python")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _peak_rss_mib() -> float:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB; bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def run(
    profile: str = "ci",
    max_examples: int | None = None,
    seed: int | None = None,
    ops: Sequence[str] = OP_NAMES,
) -> FuzzReport:
    """Fuzz every op of ``ops``; ``max_examples`` (per op) overrides the profile's count.

    ``seed`` None picks one (reported, so the run can be repeated).
    """
    chosen = PROFILES[profile]
    per_op = chosen.examples_per_op if max_examples is None else max_examples
    seed = secrets.randbelow(2**31) if seed is None else seed
    report = FuzzReport(chosen.name, seed, per_op, native_available())
    fuzzer = Fuzzer(chosen, report)
    start = time.perf_counter()
    with _quiet():
        for index, op in enumerate(ops):
            if op not in OP_NAMES:
                raise ValueError(f"unknown op {op!r}; choose from {', '.join(OP_NAMES)}")
            stats = report.ops.setdefault(op, OpStats())
            before = fuzzer.sessions_created()
            op_start = time.perf_counter()
            for forced, count, job_seed in _jobs(op, per_op, seed + index):
                _fuzz(fuzzer, cases(op, chosen, forced), count, job_seed)
            stats.sessions += fuzzer.sessions_created() - before
            stats.seconds = time.perf_counter() - op_start
    report.seconds = time.perf_counter() - start
    report.peak_rss_mib = _peak_rss_mib()
    return report


def _jobs(op: str, per_op: int, seed: int) -> list[tuple[Pair | None, int, int]]:
    """(forced pair, examples, seed) of each hypothesis run of one op. hypothesis mixes
    constants of the loaded modules into its draws, so one seed draws differently under pytest
    and from the command line; DynamicDequantize's 40 (row, zps) pairs are each given one
    example of their own first (within the op's count), so every run covers them all."""
    if op != DYNAMIC_DEQUANTIZE.name or per_op < 2 * len(dequantize_pairs()):
        return [(None, per_op, seed)]
    pairs = dequantize_pairs()
    jobs: list[tuple[Pair | None, int, int]] = [(None, per_op - len(pairs), seed)]
    jobs += [(pair, 1, seed + 7919 * (k + 1)) for k, pair in enumerate(pairs)]
    return jobs


def _fuzz(fuzzer: Fuzzer, strategy: st.SearchStrategy[Case], count: int, seed: int) -> None:
    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=strategy)
    def fuzz_one(case: Case) -> None:
        fuzzer.check(case)

    fuzz_one()


def _formats(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    chosen = PATTERNS if args.formats == "all" else tuple(args.formats.split(","))
    unknown = [p for p in chosen if p not in PATTERNS]
    if unknown:
        parser.error(f"unknown pattern(s) {', '.join(unknown)}; choose from {', '.join(PATTERNS)}")
    seed = secrets.randbelow(2**31) if args.seed is None else args.seed
    with _quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FusionWarning: a one-node model often forms no unit
        report = run_formats(chosen, args.examples or 50, seed)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.summary())
    return 1 if report.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.fuzz",
        description="Differential fuzzing: native == python backend == reference == "
        "onnxruntime QuantizeLinear/DequantizeLinear. Exit 1 on any mismatch.",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    parser.add_argument(
        "--examples", type=int, default=None, help="examples per op (default: the profile's)"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, reported")
    parser.add_argument("--ops", default=",".join(OP_NAMES), help="comma-separated subset")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--formats",
        default=None,
        help="fuzz the published formats instead (comma-separated, or 'all': "
        f"{', '.join(PATTERNS)}): draw models, convert, validate, lower; --examples per pattern "
        "(default 50)",
    )
    args = parser.parse_args(argv)
    if args.formats is not None:
        return _formats(parser, args)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in ops if op not in OP_NAMES]
    if unknown:
        parser.error(f"unknown op(s) {', '.join(unknown)}; choose from {', '.join(OP_NAMES)}")
    if args.examples is not None and args.examples < 1:
        parser.error("--examples must be at least 1")
    report = run(args.profile, args.examples, args.seed, ops)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.summary())
    return 1 if report.mismatches else 0
