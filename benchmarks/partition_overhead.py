"""Per-call cost of one OneDnnPartition node against onnxruntime's fused kernel of the same QDQ
unit (issue #24: the per-execute overhead at small shapes).

    python benchmarks/partition_overhead.py --threads 1 --repeat 2000
    python benchmarks/partition_overhead.py --threads 2 --case matmul_1x768x768

Cases: int8 MatMul 1x768x768 and 128x768x768 (DQ u8 + DQ s8 per-channel const -> MatMul + f32
bias -> Q u8) and one int8 3x3 convolution (32 -> 64 channels at 40x40, pads 1, + ReLU).
Variants, each timed in its own process (the first oneDNN or onnxruntime loaded in a process
keeps its threads and caches): ``partition`` (the unit as one OneDnnPartition node,
libquantgraph_onednn) and ``ort`` (the same unit in QDQ form at ORT_ENABLE_ALL, which fuses it
into QLinearMatMul / QLinearConv or MatMulIntegerToFloat). Both get ``--threads`` intra-op
threads; the partition's process also gets OMP_NUM_THREADS = --threads (oneDNN's OpenMP pool).
Weights are within +-64, which oneDNN computes exactly also on CPUs without VNNI. Prints one
line per case: the medians over ``--processes`` processes of each process's median per call,
and partition / ort.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

CASES = {
    "matmul_1x768x768": ("matmul", (1, 768, 768)),
    "matmul_128x768x768": ("matmul", (128, 768, 768)),
    "conv3x3_32x64_40x40": ("conv", (1, 32, 40, 40, 64)),
    # channels-last (NXC) partition data, as fusion "onednn" chains convolutions; onnxruntime
    # gets the same NCHW QDQ model (its layout transformer makes it NHWC)
    "conv3x3_32x64_40x40_nxc": ("conv_nxc", (1, 32, 40, 40, 64)),
    "conv3x3_32x64_80x80_nxc": ("conv_nxc", (1, 32, 80, 80, 64)),
}
VARIANTS = ("partition", "ort")
DOMAIN = "com.quantgraph.onednn"
X_SCALE, X_ZP, Y_SCALE = 0.05, 128, 0.5


def _hex(values: np.ndarray) -> str:
    return ",".join(float(v).hex() for v in np.asarray(values, np.float32).ravel())


def _description(
    kind: str, x_dims: Sequence[int], w_dims: Sequence[int], w_scales: np.ndarray
) -> str:
    """The unit as a partition description (docs/onednn.md): tensors 0-2 are x, w, bias."""
    channels = w_scales.size
    q = f"qtype=s:per_tensor axis=i:1 zps=i:{X_ZP} scales=f:{_hex(np.array([X_SCALE]))}"
    out_q = f"qtype=s:per_tensor axis=i:1 zps=i:0 scales=f:{_hex(np.array([Y_SCALE]))}"
    w_q = (
        f"qtype=s:per_channel axis=i:{0 if kind != 'matmul' else 1} zps=i:"
        + ",".join(["0"] * channels)
        + f" scales=f:{_hex(w_scales)}"
    )
    lines = [
        "qgpart 1",
        f"tensor 0 u8 var {','.join(map(str, x_dims))}",
        f"tensor 1 s8 const {','.join(map(str, w_dims))}",
        f"tensor 2 f32 const {channels}",
        "tensor 3 f32 var -",
        "tensor 4 f32 var -",
        "tensor 5 f32 var -",
        "tensor 6 u8 var -",
        f"op 0 Dequantize in=0 out=3 {q}",
        f"op 1 Dequantize in=1 out=4 {w_q}",
    ]
    if kind in ("conv", "conv_nxc"):
        layout = "NXC" if kind == "conv_nxc" else "NCX"
        conv = (
            "strides=i:1,1 pads_begin=i:1,1 pads_end=i:1,1 dilations=i:1,1 groups=i:1 "
            f"data_format=s:{layout} weights_format=s:OIX"
        )
        lines += [
            f"op 2 Convolution in=3,4,2 out=5 {conv}",
            "tensor 7 f32 var -",
            "op 3 ReLU in=5 out=7",
            f"op 4 Quantize in=7 out=6 {out_q}",
        ]
    else:
        lines += ["op 2 MatMul in=3,4,2 out=5", f"op 3 Quantize in=5 out=6 {out_q}"]
    lines += ["inputs 0 1 2", "outputs 6"]
    return "\n".join(lines) + "\n"


def build(case: str, variant: str) -> tuple[onnx.ModelProto, np.ndarray]:
    """The case's model in the variant's form, and an input."""
    kind, dims = CASES[case]
    rng = np.random.default_rng(24)
    if kind in ("conv", "conv_nxc"):
        n, c, h, w, oc = dims
        x_dims, w_dims = [n, c, h, w], [oc, c, 3, 3]
    else:
        m, k, oc = dims
        x_dims, w_dims = [m, k], [k, oc]
    weights = rng.integers(-64, 65, w_dims).astype(np.int8)
    bias = rng.normal(0, 1, oc).astype(np.float32)
    w_scales = rng.uniform(0.001, 0.004, oc).astype(np.float32)
    x = rng.integers(0, 256, x_dims).astype(np.uint8)
    inits = [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(bias, "b")]
    if variant == "partition" and kind == "conv_nxc":
        x_dims = [x_dims[0], x_dims[2], x_dims[3], x_dims[1]]
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    if variant == "partition":
        text = _description(kind, x_dims, w_dims, w_scales)
        nodes = [
            helper.make_node(
                "OneDnnPartition", ["x", "w", "b"], ["y"], domain=DOMAIN, description=text
            )
        ]
    else:
        inits += [
            numpy_helper.from_array(np.array(X_SCALE, np.float32), "xs"),
            numpy_helper.from_array(np.array(X_ZP, np.uint8), "xzp"),
            numpy_helper.from_array(w_scales, "ws"),
            numpy_helper.from_array(np.zeros(oc, np.int8), "wzp"),
            numpy_helper.from_array(np.array(Y_SCALE, np.float32), "ys"),
            numpy_helper.from_array(np.array(0, np.uint8), "yzp"),
        ]
        nodes = [
            helper.make_node("DequantizeLinear", ["x", "xs", "xzp"], ["xf"]),
            helper.make_node(
                "DequantizeLinear", ["w", "ws", "wzp"], ["wf"], axis=1 if kind == "matmul" else 0
            ),
        ]
        if kind != "matmul":
            nodes += [
                helper.make_node("Conv", ["xf", "wf", "b"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["r"]),
            ]
        else:
            nodes += [
                helper.make_node("MatMul", ["xf", "wf"], ["m"]),
                helper.make_node("Add", ["m", "b"], ["r"]),
            ]
        nodes.append(helper.make_node("QuantizeLinear", ["r", "ys", "yzp"], ["y"]))
    graph = helper.make_graph(
        nodes,
        case,
        [helper.make_tensor_value_info("x", TensorProto.UINT8, x_dims)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10), x


def child(case: str, variant: str, threads: int, repeat: int, warmup: int) -> float:
    """One process's median time per call, in microseconds."""
    model, x = build(case, variant)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if variant == "partition":
        from quantgraph.backends import onednn

        onednn.load()
        options.add_session_config_entry("quantgraph.onednn.ops", "partition")
        options.register_custom_ops_library(str(onednn.kernels_path()))
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {"x": x}
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        session.run(None, feeds)
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="default: all")
    parser.add_argument("--threads", type=int, choices=(1, 2), default=1)
    parser.add_argument("--repeat", type=int, default=2000, help="timed calls per process")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--processes", type=int, default=3, help="processes per variant")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        median = child(args.child[0], args.child[1], args.threads, args.repeat, args.warmup)
        print(json.dumps({"us": median}))
        return 0
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print(f"threads {args.threads}, {args.repeat} calls x {args.processes} processes per variant")
    for case in args.case or list(CASES):
        medians: dict[str, float] = {}
        for variant in VARIANTS:
            runs = []
            for _ in range(args.processes):
                command = [
                    sys.executable,
                    __file__,
                    "--child",
                    case,
                    variant,
                    "--threads",
                    str(args.threads),
                ]
                command += ["--repeat", str(args.repeat), "--warmup", str(args.warmup)]
                out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    tail = (out.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{case} {variant}: failed: {tail}")
                    break
                runs.append(json.loads(out.stdout.strip().splitlines()[-1])["us"])
            if runs:
                medians[variant] = statistics.median(runs)
        if len(medians) == len(VARIANTS):
            ratio = medians["partition"] / medians["ort"]
            print(
                f"{case:22} partition {medians['partition']:9.1f} us   ort {medians['ort']:9.1f} us"
                f"   partition/ort {ratio:5.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
