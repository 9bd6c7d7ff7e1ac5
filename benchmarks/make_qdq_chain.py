"""A QDQ chain of N nodes (Q -> DQ repeated), for timing the converter on huge graphs.

python benchmarks/make_qdq_chain.py 100000 /tmp/chain.onnx
"""

from __future__ import annotations

import sys

import onnx
from onnx import TensorProto, helper


def main(count: int, path: str) -> None:
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.05])
    zero = helper.make_tensor("z", TensorProto.UINT8, [], [3])
    nodes, previous = [], "x"
    for i in range(count // 2):
        nodes.append(
            helper.make_node("QuantizeLinear", [previous, "s", "z"], [f"q{i}"], name=f"q{i}")
        )
        nodes.append(
            helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"d{i}"], name=f"d{i}")
        )
        previous = f"d{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [4])],
        initializer=[scale, zero],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
