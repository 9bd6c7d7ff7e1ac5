"""An int4 decoder LLM end to end: convert against a plain copy, validation, and tokens per
second of a prefill and a decode step for the original, fusion onnxruntime and fusion auto.
Prints one Markdown table headed by the CPU.

    python -m tools.decoders /tmp/llm/tinyllama.onnx --preset tinyllama-1.1b
    python benchmarks/decoder_benchmark.py /tmp/llm/tinyllama.onnx --rounds 5

Every figure is a whole process (time and peak resident memory read by the parent from
``wait4``); convert takes turns round by round with the plain copy of convert_vs_copy.py
(``onnx.load`` + ``onnx.checker.check_model(path, full_check=True)`` + ``onnx.save``). Speed is
``quantgraph bench --model`` (each variant in its own processes, medians): a prefill of
``--prompt`` tokens with an empty cache and a decode step of one token after ``--prompt``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
from convert_vs_copy import paired_runs, run  # this folder's: the plain copy and its timing

from quantgraph.cpu import cpu
from quantgraph.validation.inputs.decoder import DecoderSignature, decoder_signature


def timed(command: Sequence[str]) -> tuple[float, float]:
    """Seconds and peak resident GiB of ``command`` as a whole process."""
    with tempfile.TemporaryDirectory() as folder:
        done = run(command, Path(folder) / "out")
    return done.seconds, done.peak_gib


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
        "--processes", "1", "--inputs", str(sample), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr.strip()[-300:]}")
    rows = {str(row["label"]): row for row in json.loads(done.stdout)}
    failed = [f"{k}: {r.get('error')}" for k, r in rows.items() if r.get("median_ms") is None]
    if failed:  # every variant's process is alive at once: one per variant (--processes 1)
        raise SystemExit(f"bench: a variant failed: {'; '.join(failed)[-600:]}")
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
            runs = paired_runs(model, args.rounds, log=False)
            c_s, c_g = _median([(r.seconds, r.peak_gib) for r in runs["convert"]])
            p_s, p_g = _median([(r.seconds, r.peak_gib) for r in runs["copy"]])
            timed([sys.executable, "-m", "quantgraph", "convert", str(model), str(converted),
                   "--force"])  # fmt: skip
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
