"""Compare builds of the native kernel library on one layout, each against its own per-tensor time.

    python benchmarks/compare_libraries.py A.so B.so --size 1048576 --layout per_channel_inner

Each process times, interleaved on shared buffers, every library's per-tensor call and its call
in the layout (plus onnxruntime's per-tensor QuantizeLinear / DequantizeLinear), then prints one
line a library: median layout/per-tensor ratio and onnxruntime/per-tensor ratio. With
``--op dequantize_4bit`` the layout is one of the bench's 4-bit weight layouts
(``u4_block32_axis0``, ...) of ``[size // 4096, 4096]``, and each library's DynamicDequantize is
timed against onnxruntime's DequantizeLinear of the same weights: the line gives
library/onnxruntime. Each line also gives the library's time over the first library's, paired
by round and process (the direct old/new comparison of two builds). Processes are
repeated with the library order rotated, because this VM times the same kernel 30-40% apart
from one process to the next; the medians over all processes are the result. Build variants
with `cmake --build` into separate files first (the library's path is all a session needs).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence

import numpy as np
import onnxruntime as ort

from quantgraph.bench import kernels as bench
from quantgraph.bench import timing
from quantgraph.bench import weights as bench_weights

WEIGHT_COLUMNS = 4096


def _layout(layout: str, n: int) -> tuple[tuple[int, ...], int | None]:
    """The bench's layouts, or ``inner:C`` for [n / C, C] quantized along axis 1."""
    if layout.startswith("inner:"):
        columns = int(layout.split(":", 1)[1])
        return (n // columns, columns), 1
    return bench._layout(layout, n)


def _session(
    library: str, op: str, shape: tuple[int, ...], axis: int | None
) -> ort.InferenceSession:
    options = timing.timed_options()
    options.register_custom_ops_library(library)
    model = bench._spec_model(op, shape, axis).SerializeToString()
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _weight_calls(libraries: Sequence[str], n: int, layout: str) -> dict[str, Callable[[], None]]:
    """4-bit weights: each library's DynamicDequantize (L0, L1, ...) and onnxruntime's
    DequantizeLinear ("ort") of the same [n // 4096, 4096] weights, bound to shared buffers."""
    shape = (n // WEIGHT_COLUMNS, WEIGHT_COLUMNS)
    notes: dict[str, str] = {}
    calls = {
        "ort": bench_weights._weight_runners(layout, shape, ["onnxruntime"], notes)["onnxruntime"]
    }
    spec, _ = bench_weights._weight_models(layout, shape)
    x = ort.OrtValue.ortvalue_from_shape_and_type(
        list(shape), bench_weights.WEIGHT_LAYOUTS[layout][0]
    )
    y = ort.OrtValue.ortvalue_from_numpy(np.empty(shape, np.float32))
    for i, library in enumerate(libraries):
        options = timing.timed_options()
        options.register_custom_ops_library(library)
        session = ort.InferenceSession(
            spec.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        calls[f"L{i}"] = functools.partial(session.run_with_iobinding, binding)
    return calls


def _samples(calls: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    """Each call's time in each of `rounds` interleaved measurements."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, seconds in timing.measure(calls, 20).items():
            samples[name].append(seconds)
    return samples


def measure_once(
    libraries: Sequence[str], op: str, n: int, layout: str, rounds: int
) -> dict[str, dict[str, list[float]]]:
    """One process's ratios: {library: {"layout/pt": [...], "ort/pt": [...]}}, or for 4-bit
    weights {library: {"layout/ort": [...]}}."""
    if op == bench_weights.WEIGHT_OP:
        samples = _samples(_weight_calls(libraries, n, layout), rounds)
        return {
            library: {
                "layout/ort": [
                    a / b for a, b in zip(samples[f"L{i}"], samples["ort"], strict=True)
                ],
                "layout": samples[f"L{i}"],
            }
            for i, library in enumerate(libraries)
        }
    shape, axis = _layout(layout, n)
    flat, no_axis = bench._layout("per_tensor", n)
    buffers = bench._Buffers.make(op, n)
    calls = {}
    for i, library in enumerate(libraries):
        calls[f"pt{i}"] = bench._bound_runner(_session(library, op, flat, no_axis), buffers, flat)
        calls[f"L{i}"] = bench._bound_runner(_session(library, op, shape, axis), buffers, shape)
    calls["ort"] = bench._runner("onnxruntime", op, flat, no_axis, buffers)
    samples = _samples(calls, rounds)
    result = {}
    for i, library in enumerate(libraries):
        per_tensor = samples[f"pt{i}"]
        result[library] = {
            "layout/pt": [a / b for a, b in zip(samples[f"L{i}"], per_tensor, strict=True)],
            "ort/pt": [a / b for a, b in zip(samples["ort"], per_tensor, strict=True)],
            "layout": samples[f"L{i}"],
            "pt": per_tensor,
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="+", help="builds of libquantgraph_ops.so")
    parser.add_argument(
        "--op", choices=["quantize", "dequantize", bench_weights.WEIGHT_OP], default="quantize"
    )
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--layout", default="per_channel_inner", help="a bench layout or inner:C")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (0: default)")
    parser.add_argument("--processes", type=int, default=2, help="rotations of the library order")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    timing.SETTINGS.threads = args.threads
    if args.worker:
        results = measure_once(args.libraries, args.op, args.size, args.layout, args.rounds)
        print(json.dumps(results))
        return 0
    merged: dict[str, dict[str, list[float]]] = {lib: {} for lib in args.libraries}
    libraries = list(args.libraries)
    for _ in range(args.processes):
        for shift in range(len(libraries)):
            order = libraries[shift:] + libraries[:shift]
            command = [sys.executable, __file__, *order, "--worker"]
            command += ["--op", args.op, "--size", str(args.size), "--layout", args.layout]
            command += ["--threads", str(args.threads), "--rounds", str(args.rounds)]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results = json.loads(output)
            reference = {key: list(results[libraries[0]].get(key, [])) for key in ("layout", "pt")}
            for library, ratios in results.items():
                # Paired with the first library's call of the same round and process.
                for key in ("layout", "pt"):
                    if key in ratios:
                        ratios[f"{key}/first"] = [
                            a / b for a, b in zip(ratios.pop(key), reference[key], strict=True)
                        ]
                for key, values in ratios.items():
                    merged[library].setdefault(key, []).extend(values)
    for library, ratios in merged.items():
        if "layout/ort" in ratios:
            to_ort = ratios["layout/ort"]
            print(
                f"{library}: {args.layout}/onnxruntime median {statistics.median(to_ort):.2f} "
                f"(min {min(to_ort):.2f}, max {max(to_ort):.2f}, n={len(to_ort)}); "
                f"time / first library's median {statistics.median(ratios['layout/first']):.3f}"
            )
            continue
        layout_pt, ort_pt = ratios["layout/pt"], ratios["ort/pt"]
        print(
            f"{library}: {args.layout}/per-tensor median {statistics.median(layout_pt):.2f} "
            f"(min {min(layout_pt):.2f}, max {max(layout_pt):.2f}, n={len(layout_pt)}); "
            f"onnxruntime/per-tensor median {statistics.median(ort_pt):.2f}; time / first "
            f"library's median: per-tensor {statistics.median(ratios['pt/first']):.3f}, "
            f"{args.layout} {statistics.median(ratios['layout/first']):.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
