"""A float text detector shaped like PaddleOCR's DB model as Paddle2ONNX exports it, small: a
MobileNetV3 backbone (HardSigmoid-based hard-swish, squeeze-excite blocks whose Convs read
pooled, unquantized inputs beside the quantized ones), an FPN neck (nearest Resize, Add,
Concat) and a DB head (Conv, two ConvTranspose, Sigmoid). Weights and biases arrive through
Constant nodes, node names follow Paddle2ONNX (p2o.Conv.N)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, op: str) -> str:
        self.count += 1
        return f"p2o.{op}.{self.count}"

    def constant(self, shape: tuple[int, ...], scale: float) -> str:
        name = f"{self.name('Constant')}.w"
        array = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        tensor = numpy_helper.from_array(array, name)
        self.nodes.append(helper.make_node("Constant", [], [name], value=tensor, name=name))
        return name

    def op(self, kind: str, inputs: list[str], **attributes: Any) -> str:
        name = self.name(kind)
        self.nodes.append(helper.make_node(kind, inputs, [f"{name}.out"], name=name, **attributes))
        return f"{name}.out"

    def conv(self, x: str, cin: int, cout: int, k: int = 1, stride: int = 1, group: int = 1) -> str:
        fan_in = cin // group * k * k
        weight = self.constant((cout, cin // group, k, k), (2.0 / fan_in) ** 0.5)
        bias = self.constant((cout,), 0.1)
        return self.op(
            "Conv", [x, weight, bias], pads=[k // 2] * 4, strides=[stride] * 2, group=group
        )

    def hard_swish(self, x: str) -> str:  # Paddle2ONNX: HardSigmoid(1/6, 1/2) then Mul
        return self.op("Mul", [x, self.op("HardSigmoid", [x], alpha=1 / 6, beta=0.5)])

    def squeeze_excite(self, x: str, c: int) -> str:
        pooled = self.op("GlobalAveragePool", [x])
        squeezed = self.op("Relu", [self.conv(pooled, c, c // 4)])
        gate = self.op("HardSigmoid", [self.conv(squeezed, c // 4, c)], alpha=0.2, beta=0.5)
        return self.op("Mul", [x, gate])

    def block(self, x: str, cin: int, mid: int, cout: int, stride: int, hard: bool) -> str:
        act = self.hard_swish if hard else (lambda v: self.op("Relu", [v]))
        y = act(self.conv(x, cin, mid))
        y = act(self.conv(y, mid, mid, k=3, stride=stride, group=mid))
        y = self.squeeze_excite(y, mid)
        y = self.conv(y, mid, cout)
        return self.op("Add", [x, y]) if stride == 1 and cin == cout else y

    def up(self, x: str, factor: int) -> str:
        scales = f"scales_{factor}_{self.count}"
        values = np.array([1, 1, factor, factor], np.float32)
        self.initializers.append(numpy_helper.from_array(values, scales))
        return self.op("Resize", [x, "roi", scales], mode="nearest")

    def transpose_conv(self, x: str, cin: int, cout: int) -> str:
        weight = self.constant((cin, cout, 2, 2), 0.2)
        bias = self.constant((cout,), 0.1)
        return self.op("ConvTranspose", [x, weight, bias], strides=[2, 2])


def ocr_detector(size: int = 96, seed: int = 1) -> onnx.ModelProto:
    """x [1, 3, size, size] -> probability map [1, 1, size, size] (size a multiple of 16)."""
    b = _Builder(seed)
    b.initializers.append(numpy_helper.from_array(np.array([], np.float32), "roi"))
    x = b.hard_swish(b.conv("x", 3, 8, k=3, stride=2))  # 1/2
    c2 = b.block(x, 8, 16, 16, 2, hard=False)  # 1/4
    c2 = b.block(c2, 16, 32, 16, 1, hard=False)
    c3 = b.block(c2, 16, 48, 24, 2, hard=True)  # 1/8
    c4 = b.block(c3, 24, 64, 32, 2, hard=True)  # 1/16
    lateral = [b.conv(c, ch, 24) for c, ch in ((c2, 16), (c3, 24), (c4, 32))]
    p4 = lateral[2]
    p3 = b.op("Add", [lateral[1], b.up(p4, 2)])
    p2 = b.op("Add", [lateral[0], b.up(p3, 2)])
    outs = [b.conv(p, 24, 8, k=3) for p in (p4, p3, p2)]
    fused = b.op("Concat", [b.up(outs[0], 4), b.up(outs[1], 2), outs[2]], axis=1)
    head = b.op("Relu", [b.conv(fused, 24, 8, k=3)])
    head = b.op("Relu", [b.transpose_conv(head, 8, 8)])
    y = b.op("Sigmoid", [b.transpose_conv(head, 8, 1)])
    b.nodes.append(helper.make_node("Identity", [y], ["maps"], name="p2o.Identity.out"))
    graph = helper.make_graph(
        b.nodes,
        "ocr_det",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("maps", TensorProto.FLOAT, [1, 1, size, size])],
        b.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    return model
