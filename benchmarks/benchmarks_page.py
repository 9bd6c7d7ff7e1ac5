"""docs/benchmarks.md, measured anew by one command: the kernels against onnxruntime's own
QuantizeLinear/DequantizeLinear (``quantgraph bench``) and the whole-model set with every
fusion mode (benchmarks/run_model_set.py), each table headed by the CPU (model and ISA flags),
threads and library versions it was measured with. The page holds the current tables only; the
earlier runs and their analyses are in git's history of the page.

    python benchmarks/make_model_set.py /tmp/models
    python benchmarks/benchmarks_page.py /tmp/models --write docs/benchmarks.md

Run it on a quiet machine (nothing else running: two cores are shared by everything).
"""

from __future__ import annotations

import argparse
import datetime
import io
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import run_model_set

HEAD = """# Benchmarks

Measured by `python benchmarks/benchmarks_page.py MODELS --write docs/benchmarks.md` (after
`python benchmarks/make_model_set.py MODELS`) on {date}. Every figure is a ratio to a baseline
measured in the same run, or a median time beside its baseline's. Earlier runs, on other code
and other days, and what was learned from them: `git log -p docs/benchmarks.md`.

## The kernels: quantgraph's spec ops against onnxruntime's Q/DQ

`quantgraph bench`: one spec op per session against onnxruntime's QuantizeLinear /
DequantizeLinear on the same tensor, timed in paired, interleaved blocks (medians).
`ort/native` above 1: the native kernel is faster.

"""

MODELS = """
## Whole models: fusion onnxruntime, onednn and auto

`python benchmarks/run_model_set.py MODELS --rounds {rounds}`: one `quantgraph bench --model` per
row, every variant in its own processes taking turns round by round, the native backend; each
cell is the median of the round-by-round ratios to the original at ORT_ENABLE_ALL, with the
quartiles. Fusion "auto" measures its candidate plans in its first process (an empty cache)
and the other processes find its decision in the cache; "auto chose" is its reason. The models:
`benchmarks/make_model_set.py`'s docstring.

"""


def kernel_table() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", "bench"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip() + "\n"


def model_table(folder: Path, rounds: int) -> str:
    saved = sys.argv
    sys.argv = ["run_model_set.py", str(folder), "--rounds", str(rounds)]
    try:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            run_model_set.main()
    finally:
        sys.argv = saved
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", type=Path, help="the folder make_model_set.py wrote")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--write", type=Path, help="the page to write (default: print it)")
    args = parser.parse_args()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = (
        HEAD.format(date=date)
        + kernel_table()
        + MODELS.format(rounds=args.rounds)
        + model_table(args.models, args.rounds)
    )
    if args.write is None:
        print(page)
    else:
        args.write.write_text(page, encoding="utf-8")
        print(f"wrote {args.write} ({len(page.splitlines())} lines)")


if __name__ == "__main__":
    main()
