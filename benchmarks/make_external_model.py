"""A QDQ model with 3 GiB of int8 MatMul weights in external data (12 x [16384, 16384]).

    python benchmarks/make_external_model.py /tmp/big3   # writes big3g.onnx and w.data there

The weights are streamed to disk one block at a time, so making it needs little memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

K = N = 16384
LAYERS = 12  # 12 x 256 MiB = 3 GiB


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    block = np.random.default_rng(0).integers(-127, 128, (K, N), dtype=np.int8).tobytes()
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    previous = "x"
    with open(folder / "w.data", "wb") as data:
        for i in range(LAYERS):
            weight = onnx.TensorProto(name=f"w{i}", data_type=TensorProto.INT8, dims=[K, N])
            weight.data_location = TensorProto.EXTERNAL
            for key, value in (
                ("location", "w.data"),
                ("offset", str(i * K * N)),
                ("length", str(K * N)),
            ):
                entry = weight.external_data.add()
                entry.key, entry.value = key, value
            data.write(block)
            initializers += [
                weight,
                helper.make_tensor(f"ws{i}", TensorProto.FLOAT, [N], np.full(N, 0.01, np.float32)),
                helper.make_tensor(f"wz{i}", TensorProto.INT8, [N], np.zeros(N, np.int8)),
            ]
            nodes += [
                helper.make_node(
                    "DequantizeLinear",
                    [f"w{i}", f"ws{i}", f"wz{i}"],
                    [f"wf{i}"],
                    axis=1,
                    name=f"dq_w{i}",
                ),
                helper.make_node("QuantizeLinear", [previous, "s", "z"], [f"q{i}"], name=f"q{i}"),
                helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"dq{i}"),
                helper.make_node("MatMul", [f"d{i}", f"wf{i}"], [f"y{i}"], name=f"mm{i}"),
            ]
            previous = f"y{i}"
    initializers += [
        helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
        helper.make_tensor("z", TensorProto.UINT8, [], [128]),
    ]
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1, N])],
        initializer=initializers,
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), folder / "big3g.onnx"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
