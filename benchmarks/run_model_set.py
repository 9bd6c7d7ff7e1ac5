"""Time the whole-model set (benchmarks/make_model_set.py) with every fusion mode and print one
Markdown table of ratios to the original at ORT_ENABLE_ALL, headed by the CPU (model and ISA
flags), threads and library versions it was measured with.

    python benchmarks/make_model_set.py /tmp/models
    python benchmarks/run_model_set.py /tmp/models --rounds 21 > table.md

Each model is one ``quantgraph bench --model`` run (each variant in its own processes, taking
turns round by round); fusion "auto" measures its candidates in its first process (the others
find the decision in the cache), before the timed rounds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnxruntime as ort

from quantgraph.backends import onednn
from quantgraph.cpu import cpu

# (model, inputs file or None, extra bench arguments)
MODELS: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("nudenet_s8", None, ()),
    ("nudenet_u8", None, ()),
    ("encoder_s8", "encoder_inputs.npz", ()),
    ("encoder_u8", "encoder_inputs.npz", ()),
    ("twin_s8", None, ("--dim", "M=1")),
    ("twin_u8", None, ("--dim", "M=1")),
    ("smart_turn", None, ()),
    ("ppocr_cls_u8", "ppocr_cls_inputs.npz", ()),
    ("silero_vad_u8", "silero_vad_inputs.npz", ()),
    ("int4_matmul", "int4_matmul_m1.npz", ()),
    ("int4_matmul", "int4_matmul_m128.npz", ()),
)
FUSIONS = ("onnxruntime", "onednn", "auto")


def bench(
    folder: Path, name: str, inputs: str | None, extra: tuple[str, ...], rounds: int
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "quantgraph", "bench",
        "--model", str(folder / f"{name}.onnx"), str(folder / f"{name}_qg.onnx"),
        "--fusions", ",".join(FUSIONS), "--rounds", str(rounds), "--json", *extra,
    ]  # fmt: skip
    if inputs is not None:
        command += ["--inputs", str(folder / inputs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    rows = json.loads(done.stdout)
    return {str(row["label"]): row for row in rows}


def cell(row: object) -> str:
    if not isinstance(row, dict):
        return "-"
    if row.get("error"):
        return "failed"
    ratio, quartiles = row.get("ratio_to_original"), row.get("ratio_quartiles")
    spread = f" ({quartiles[0]:.2f}-{quartiles[1]:.2f})" if quartiles else ""
    return f"{ratio:.2f}x{spread}"


def _onednn() -> str:
    """Which oneDNN, by the package that installed it (a page names no local path)."""
    if not onednn.is_available():
        return "no oneDNN"
    major, minor, patch = onednn.version_tuple()
    library = Path(onednn.dnnl_path()).resolve()
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.name == library.name and Path(str(dist.locate_file(file))).resolve() == library:
                return f"oneDNN v{major}.{minor}.{patch} (the {dist.metadata['Name']} wheel)"
    return f"oneDNN v{major}.{minor}.{patch} ({library.name}, not from a wheel)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    versions = f"onnxruntime {ort.__version__}; {_onednn()}"
    print(f"CPU: {cpu().describe()}; threads: onnxruntime's default; {versions}")
    print(f"{args.rounds} rounds; ratios to the original at ORT_ENABLE_ALL (quartiles)")
    print()
    columns = " | ".join(f"fusion {f}" for f in FUSIONS)
    print(f"| model | inputs | original | {columns} | auto chose |")
    print("|---|---|---|" + "---|" * len(FUSIONS) + "---|")
    for name, inputs, extra in MODELS:
        if wanted is not None and name not in wanted:
            continue
        rows = bench(args.folder, name, inputs, extra, args.rounds)
        if "error" in rows:
            shown = inputs or " ".join(extra) or "generated"
            print(f"| {name} | {shown} | failed: {rows['error']} |")
            continue
        original = rows.get("original ORT_ENABLE_ALL", {})
        median = original.get("median_ms") if isinstance(original, dict) else None
        cells = [cell(rows.get(f"rewritten native fusion={f}")) for f in FUSIONS]
        auto = rows.get("rewritten native fusion=auto")
        chosen = auto.get("plan") or "?" if isinstance(auto, dict) else "-"
        shown = inputs or " ".join(extra) or "generated"
        base = f"{median:.3f} ms" if isinstance(median, float) else "-"
        print(f"| {name} | {shown} | {base} | " + " | ".join(cells) + f" | {chosen} |", flush=True)


if __name__ == "__main__":
    main()
