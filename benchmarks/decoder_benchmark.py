"""An int4 decoder LLM end to end: convert against a plain copy, validation, and tokens per
second of a prefill and a decode step for the original, fusion onnxruntime and fusion auto.
Prints one Markdown table headed by the CPU.

    python -m tools.decoders /tmp/llm/tinyllama.onnx --preset tinyllama-1.1b
    python benchmarks/decoder_benchmark.py /tmp/llm/tinyllama.onnx --rounds 5

Every figure is a whole process (time and peak resident memory read by the parent from
``wait4``), each kind taking turns round by round with its baseline: the plain copy is
``onnx.load`` + ``onnx.checker.check_model(path)`` + ``onnx.save`` with external data. Speed is
``quantgraph bench --model`` (each variant in its own processes, medians): a prefill of
``--prompt`` tokens with an empty cache and a decode step of one token after ``--prompt``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from quantgraph.cpu import cpu
from quantgraph.validation.inputs.decoder import DecoderSignature, decoder_signature

# onnx.checker refuses the builder's SimplifiedLayerNormalization (ONNX domain, onnxruntime's op):
# the copy sets it aside as convert does (quantgraph.ir.checker), and checks the rest in full.
COPY = """
import sys, onnx
from pathlib import Path
from quantgraph.ir.checker import check_file
source, target = sys.argv[1], sys.argv[2]
model = onnx.load(source)
check_file(Path(source), frozenset({("", "SimplifiedLayerNormalization")}))
onnx.save(model, target, save_as_external_data=True, location=Path(target).name + ".data")
"""


def timed(command: Sequence[str]) -> tuple[float, float]:
    """Seconds and peak resident GiB of ``command`` as a whole process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {stderr.strip()[-300:]}")
    return seconds, usage.ru_maxrss / 2**20  # KiB -> GiB


def paired(
    a: Sequence[str], b: Sequence[str], rounds: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Medians of (seconds, GiB) for ``a`` and ``b``, taking turns."""
    runs_a, runs_b = [], []
    for index in range(rounds):
        first, second = (a, b) if index % 2 == 0 else (b, a)
        one, two = timed(first), timed(second)
        runs_a.append(one if first is a else two)
        runs_b.append(two if first is a else one)
    return _median(runs_a), _median(runs_b)


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def feeds(signature: DecoderSignature, past: int, new: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    found = {signature.input_ids: rng.integers(0, signature.vocab or 100, (1, new))}
    if signature.attention_mask:
        found[signature.attention_mask] = np.ones((1, past + new), np.int64)
    if signature.position_ids:
        found[signature.position_ids] = np.arange(past, past + new, dtype=np.int64)[None]
    for pair in signature.cache:
        shape = (1, pair.kv_heads or 1, past, pair.head_size or 1)
        found[pair.past] = rng.standard_normal(shape).astype(pair.dtype.numpy())
    return found


def speed(original: Path, converted: Path, sample: Path, rounds: int) -> dict[str, float]:
    command = [
        sys.executable, "-m", "quantgraph", "bench", "--model", str(original), str(converted),
        "--fusions", "onnxruntime,auto", "--rounds", str(rounds), "--repeat", "3",
        "--processes", "2", "--inputs", str(sample), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr.strip()[-300:]}")
    rows = {str(row["label"]): row for row in json.loads(done.stdout)}
    return {
        "original": rows["original ORT_ENABLE_ALL"]["median_ms"],
        "onnxruntime": rows["rewritten native fusion=onnxruntime"]["median_ms"],
        "auto": rows["rewritten native fusion=auto"]["median_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a decoder made by tools.decoders")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--skip-convert", action="store_true", help="reuse MODEL_qg.onnx")
    args = parser.parse_args()
    model = args.model.resolve()
    converted = model.with_name(model.stem + "_qg.onnx")
    weights = (model.parent / (model.name + ".data")).stat().st_size / 2**30
    graph = ir.load(model)
    signature = decoder_signature(graph)
    if signature is None:
        raise SystemExit(f"{model}: not a decoder")
    print(f"CPU: {cpu().describe()}; onnxruntime {ort.__version__}; threads: its default")
    print(f"{model.name}: {len(graph.graph)} nodes, {weights:.2f} GiB of external data")
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        rows = []
        if not args.skip_convert:
            quantgraph = [sys.executable, "-m", "quantgraph"]
            convert = [*quantgraph, "convert", str(model), str(converted), "--force"]
            copy = [sys.executable, "-c", COPY, str(model), str(scratch / "copy.onnx")]
            (c_s, c_g), (p_s, p_g) = paired(convert, copy, args.rounds)
            rows.append(
                f"| convert | {c_s:.1f} s, {c_g:.2f} GiB | plain copy {p_s:.1f} s, {p_g:.2f} GiB "
                f"| {c_s / p_s:.2f}x time, {c_g / p_g:.2f}x peak |"
            )
        validate = [
            sys.executable, "-m", "quantgraph", "validate", str(model), str(converted),
            "--generate", "8",
        ]  # fmt: skip
        v_s, v_g = _median([timed(validate) for _ in range(max(1, args.rounds // 2))])
        rows.append(f"| validate | {v_s:.1f} s, {v_g:.2f} GiB | weights {weights:.2f} GiB "
                    f"| {v_g / weights:.2f}x the weights |")  # fmt: skip
        print()
        print("| step | quantgraph | baseline | ratio |")
        print("|---|---|---|---|")
        print("\n".join(rows))
        print()
        print("| run | tokens | original tokens/s | fusion onnxruntime | fusion auto |")
        print("|---|---|---|---|---|")
        for label, past, new in (("prefill", 0, args.prompt), ("decode", args.prompt, 1)):
            sample = scratch / f"{label}.npz"
            np.savez(sample, **feeds(signature, past, new))  # type: ignore[arg-type]
            ms = speed(model, converted, sample, args.rounds)
            cells = [
                f"{new * 1000 / ms[k]:.1f} ({ms[k] / ms['original']:.2f}x time)"
                for k in ("onnxruntime", "auto")
            ]
            print(f"| {label} | {new} after {past} | {new * 1000 / ms['original']:.1f} | "
                  + " | ".join(cells) + " |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
