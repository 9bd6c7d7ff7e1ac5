"""`quantgraph convert` against a plain copy of the same model, side by side in one run.

    python benchmarks/convert_vs_copy.py MODEL.onnx --rounds 5

Each round runs both commands, each a whole process of its own, one after the other (the order
alternating round by round), and reads each one's wall time and peak resident memory from
``wait4``. The plain copy is what any tool does with the model: ``onnx.load`` (external data
included), ``onnx.checker.check_model(path, full_check=True)`` and ``onnx.save`` (external data
beside it when the model has any), in onnx alone. Ops of ONNX's domain that onnx does not define
(onnxruntime-genai's SimplifiedLayerNormalization) are set aside for its check, as convert does
(quantgraph.ir.checker). Outputs go to a scratch folder, emptied after every run.

``--floor`` adds what any tool built on onnx-ir pays before it changes a node:
``onnx_ir.load``, ``onnx_ir.to_proto``, the same full check and the write (models without
external data), Python's cyclic collector paused as convert pauses it; once on the model, once
on its conversion (made before the rounds; its spec ops checked against quantgraph's schemas,
as convert checks them): what reading, writing and checking the result costs, whatever made
it. Prints the medians of each, the median (and range) of the round-by-round ratios, and each
peak against the weights (the external data files). Time on a quiet machine: the 1-minute load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

# The plain copy: onnx only (no quantgraph, no onnx-ir import in its process).
COPY = r"""
import os, sys, tempfile
import onnx
from onnx import defs

source, target, location = sys.argv[1], sys.argv[2], sys.argv[3]
model = onnx.load(source)


def graphs(graph):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from graphs(attribute.g)
            for inner in attribute.graphs:
                yield from graphs(inner)


def unknown(node):
    if node.domain not in ("", "ai.onnx"):
        return False
    try:
        defs.get_schema(node.op_type, 10**4, "")
    except defs.SchemaError:
        return True
    return False


skeleton = onnx.load(source, load_external_data=False)
moved = [n for g in graphs(skeleton.graph) for n in g.node if unknown(n)]
if not moved:
    onnx.checker.check_model(source, full_check=True)
else:  # set aside as quantgraph.ir.checker does: a sibling file resolves the external data
    for node in moved:
        node.domain = "quantgraph.unchecked"
    skeleton.opset_import.add(domain="quantgraph.unchecked", version=1)
    handle, name = tempfile.mkstemp(suffix=".onnx", dir=os.path.dirname(os.path.abspath(source)))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(skeleton.SerializeToString())
        onnx.checker.check_model(name, full_check=True)
    finally:
        os.unlink(name)
del skeleton
if location:
    onnx.save(model, target, save_as_external_data=True, location=location)
else:
    onnx.save(model, target)
"""


# The onnx-ir floor: the model read into onnx-ir's objects and written back, checked in full,
# Python's cyclic collector paused as convert pauses it. With "schemas": quantgraph's spec-op
# schemas registered for the check (what the check of a converted model runs).
FLOOR = r"""
import gc
import sys
import onnx
import onnx_ir as ir

gc.disable()
source, target = sys.argv[1], sys.argv[2]
if sys.argv[3:] == ["schemas"]:
    from quantgraph.ir.onnx_schemas import register

    register()
data = ir.to_proto(ir.load(source)).SerializeToString()
onnx.checker.check_model(data, full_check=True)
with open(target, "wb") as stream:
    stream.write(data)
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_gib: float  # the process's peak resident set


def run(command: Sequence[str], scratch: Path) -> Run:
    """``command`` as a whole process: wall seconds and peak resident GiB (``wait4``)."""
    scratch.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.stderr:
        process.stderr.close()
    shutil.rmtree(scratch, ignore_errors=True)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {stderr[-600:]}")
    return Run(seconds, usage.ru_maxrss / 2**20)  # KiB -> GiB


def weights_bytes(model: Path) -> int:
    """The external data files the model's tensors point into."""
    proto = onnx.load(str(model), load_external_data=False)
    locations = {
        entry.value
        for tensor in _tensors(proto.graph)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return sum((model.parent / location).stat().st_size for location in locations)


def _tensors(graph: onnx.GraphProto) -> list[onnx.TensorProto]:
    found = list(graph.initializer)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                found.append(attribute.t)
            if attribute.HasField("g"):
                found += _tensors(attribute.g)
            for inner in attribute.graphs:
                found += _tensors(inner)
    return found


def _cell(values: list[float], unit: str, digits: int = 2) -> str:
    middle = statistics.median(values)
    return f"{middle:.{digits}f}{unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def paired_runs(
    model: Path,
    rounds: int,
    warmup: int = 1,
    convert_args: Sequence[str] = (),
    scratch: Path | None = None,
    log: bool = True,
    floor: bool = False,
) -> dict[str, list[Run]]:
    """``rounds`` counted rounds (after ``warmup``) of the plain copy and ``quantgraph convert``
    of ``model`` (and the onnx-ir ``floor``), each a whole process, the order alternating:
    {"copy": [...], "convert": [...], "floor": [...]}."""
    weights = weights_bytes(model)
    root = Path(tempfile.mkdtemp(prefix="convert-vs-copy-", dir=scratch))
    out_copy, out_convert, out_floor = root / "copy", root / "convert", root / "floor"
    copy = [
        sys.executable,
        "-c",
        COPY,
        str(model),
        str(out_copy / "model.onnx"),
        "model.onnx.data" if weights else "",
    ]
    convert = [
        sys.executable, "-m", "quantgraph", "convert", str(model), str(out_convert / "model.onnx"),
        *convert_args,
    ]  # fmt: skip
    order_of_round = [("copy", copy, out_copy), ("convert", convert, out_convert)]
    if floor:
        command = [sys.executable, "-c", FLOOR, str(model), str(out_floor / "model.onnx")]
        order_of_round.append(("floor", command, out_floor))
        converted = root / "converted.onnx"  # the result, made once (outside every run's folder)
        run([*convert[:4], str(model), str(converted), *convert_args], root / "made")
        again = [sys.executable, "-c", FLOOR, str(converted), str(out_floor / "r.onnx"), "schemas"]
        order_of_round.append(("result floor", again, out_floor))
    runs: dict[str, list[Run]] = {name: [] for name, _, _ in order_of_round}
    try:
        for index in range(warmup + rounds):
            order = list(order_of_round)
            if index % 2:
                order.reverse()
            done = {name: run(command, out) for name, command, out in order}
            if index >= warmup:
                for name, result in done.items():
                    runs[name].append(result)
                if log:
                    each = ", ".join(
                        f"{name} {r.seconds:.2f} s {r.peak_gib:.3f} GiB" for name, r in done.items()
                    )
                    print(f"round {index - warmup + 1}: {each}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return runs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the model to convert (external data beside it)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds counted (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds not counted (default 1)")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=None,
        help="folder for the outputs (default: a temporary one; emptied after every run)",
    )
    parser.add_argument(
        "--convert-args", default="", help="more arguments for quantgraph convert, one string"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time onnx-ir's read and write of the model with the full check (no external "
        "data)",
    )
    args = parser.parse_args(argv)
    model = args.model.resolve()
    weights = weights_bytes(model)
    if args.floor and weights:
        parser.error("--floor takes a model without external data")
    nodes = len(onnx.load(str(model), load_external_data=False).graph.node)
    print(f"{model}: {nodes} nodes in the main graph, {weights / 2**30:.3f} GiB of external data")
    print(f"python {sys.version.split()[0]}, onnx {onnx.__version__}, {os.cpu_count()} CPUs")
    print(f"load average before: {os.getloadavg()[0]:.2f} (time on a quiet machine)")
    runs = paired_runs(
        model, args.rounds, args.warmup, args.convert_args.split(), args.scratch, floor=args.floor
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print()
    print(f"{args.rounds} rounds, medians (min-max)")
    print()
    header = "| command | time | peak resident | peak / weights |"
    print(header)
    print("|---|---|---|---|")
    labels = {
        "copy": "plain copy (onnx load, full check, save)",
        "convert": "quantgraph convert",
        "floor": "onnx-ir floor (onnx_ir.load, to_proto, full check, write)",
        "result floor": "onnx-ir floor of the converted model (the same, spec ops checked)",
    }
    for name in runs:
        label = labels[name]
        peaks = [r.peak_gib for r in runs[name]]
        over = f"{statistics.median(peaks) * 2**30 / weights:.2f}x" if weights else "-"
        print(
            f"| {label} | {_cell([r.seconds for r in runs[name]], ' s')} "
            f"| {_cell(peaks, ' GiB', 3)} | {over} |"
        )
    time_ratios = [
        c.seconds / p.seconds for c, p in zip(runs["convert"], runs["copy"], strict=True)
    ]
    peak_ratios = [
        c.peak_gib / p.peak_gib for c, p in zip(runs["convert"], runs["copy"], strict=True)
    ]
    print()
    print(
        f"convert / copy, round by round: time {_cell(time_ratios, 'x')}, "
        f"peak {_cell(peak_ratios, 'x')}"
    )
    for name in ("floor", "result floor"):
        if name in runs:
            ratios = [f.seconds / p.seconds for f, p in zip(runs[name], runs["copy"], strict=True)]
            print(
                f"{labels[name].split(' (')[0]} / copy, round by round: time {_cell(ratios, 'x')}"
            )


if __name__ == "__main__":
    main()
