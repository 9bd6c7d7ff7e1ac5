"""The original and the converted model's fused session, run by run, in pairs of whole processes.

    python benchmarks/session_pairs.py MODEL.onnx MODEL_qg.onnx --prefill 128 --pairs 7
    python benchmarks/session_pairs.py MODEL.onnx MODEL_qg.onnx --inputs feeds.npz

Each pair starts one process for the original (a plain ``onnxruntime.InferenceSession``, as a
user makes it) and one for the converted model (``quantgraph.InferenceSession`` with
``--fusion``, onnxruntime by default), the order alternating; each process runs the inputs
``--warmup`` times, then ``--runs`` times, and reports its median. A decoder's feeds can be
made here: ``--prefill N`` (N tokens, an empty cache) or ``--decode P`` (one token after P), as
decoder_benchmark.py feeds them. Session creation is not
timed (``quantgraph bench --model`` times the same; this one shows the spread of a VM whose
speed is bimodal: every process's median is printed).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx_ir as ir
from decoder_benchmark import feeds  # this folder's: a decoder's feeds

from quantgraph.validation.inputs.decoder import decoder_signature

# One process: the session, the runs, the median in ms on stdout.
CHILD = r"""
import sys, time
import numpy as np
import onnxruntime as ort
import quantgraph

model, inputs, fusion, warmup, runs = sys.argv[1:6]
feeds = dict(np.load(inputs))
if fusion == "original":
    session = ort.InferenceSession(model)
else:
    session = quantgraph.InferenceSession(model, fusion=fusion, tune_inputs=feeds)
for _ in range(int(warmup)):
    session.run(None, feeds)
times = []
for _ in range(int(runs)):
    start = time.perf_counter()
    session.run(None, feeds)
    times.append(time.perf_counter() - start)
print(1000 * float(np.median(times)))
"""


def median_ms(model: Path, inputs: Path, fusion: str, warmup: int, runs: int) -> float:
    command = [sys.executable, "-c", CHILD, str(model), str(inputs), fusion, str(warmup), str(runs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{fusion} failed: {done.stderr.strip()[-400:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("original", type=Path)
    parser.add_argument("converted", type=Path)
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--inputs", type=Path, help="an .npz of the feeds")
    given.add_argument("--prefill", type=int, metavar="N", help="a decoder's N-token prefill")
    given.add_argument("--decode", type=int, metavar="P", help="a decoder's step after P")
    parser.add_argument("--fusion", default="onnxruntime")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.inputs is None:
            signature = decoder_signature(ir.load(args.original))
            if signature is None:
                raise SystemExit(f"{args.original}: not a decoder: give --inputs")
            past, new = (0, args.prefill) if args.prefill else (args.decode, 1)
            args.inputs = Path(scratch) / "feeds.npz"
            np.savez(args.inputs, **feeds(signature, past, new))  # type: ignore[arg-type]
        pairs(args)


def pairs(args: argparse.Namespace) -> None:
    originals: list[float] = []
    converted: list[float] = []
    for index in range(args.pairs):
        order = [("original", args.original), (args.fusion, args.converted)]
        if index % 2:
            order.reverse()
        for fusion, model in order:
            found = median_ms(model, args.inputs, fusion, args.warmup, args.runs)
            (originals if fusion == "original" else converted).append(found)
        print(f"pair {index + 1}: original {originals[-1]:.1f} ms, "
              f"fusion {args.fusion} {converted[-1]:.1f} ms", flush=True)  # fmt: skip
    ratios = [c / o for o, c in zip(originals, converted, strict=True)]
    print(
        f"medians: original {statistics.median(originals):.1f} ms "
        f"({min(originals):.1f}-{max(originals):.1f}), fusion {args.fusion} "
        f"{statistics.median(converted):.1f} ms ({min(converted):.1f}-{max(converted):.1f}); "
        f"pair by pair {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
