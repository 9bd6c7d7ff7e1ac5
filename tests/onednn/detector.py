"""A small detector-like CNN as onnxruntime's quantize_static makes it: a strided stem, residual
blocks (Conv -> Relu -> Conv -> Add skip -> Relu), a strided 1x1 and a 1x1 head; QDQ, u8
activations, per-channel s8 weights (``reduce_range``: 7-bit weights, |w| <= 64, as
onnxruntime quantizes for CPUs without VNNI)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (1, 3, 32, 32)


def float_model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def conv(x: str, out: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"{out}_w"))
        b = rng.standard_normal(cout) * 0.1
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"{out}_b"))
        pad = k // 2
        nodes.append(
            helper.make_node(
                "Conv",
                [x, f"{out}_w", f"{out}_b"],
                [out],
                name=out,
                kernel_shape=[k, k],
                pads=[pad] * 4,
                strides=[stride, stride],
            )
        )
        return out

    def relu(x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [f"{x}_relu"], name=f"{x}_relu"))
        return f"{x}_relu"

    x = relu(conv("images", "stem", 3, 16, 3, 2))
    for block in range(2):
        y = relu(conv(x, f"b{block}_c1", 16, 16, 3))
        y = conv(y, f"b{block}_c2", 16, 16, 3)
        nodes.append(helper.make_node("Add", [x, y], [f"b{block}_add"], name=f"b{block}_add"))
        x = relu(f"b{block}_add")
    x = relu(conv(x, "down", 16, 32, 1, 2))
    conv(x, "head", 32, 9, 1)
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 9, 8, 8])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@cache
def quantized(reduce_range: bool = False) -> onnx.ModelProto:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self._samples: Iterator[dict[str, np.ndarray]] = iter(
                [{"images": rng.random(SHAPE, dtype=np.float32)} for _ in range(4)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._samples, None)

    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "float.onnx", Path(scratch) / "quantized.onnx"
        onnx.save(float_model(), source)
        quantize_static(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            reduce_range=reduce_range,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )
        return onnx.load(target)


def samples(count: int) -> list[dict[str, np.ndarray]]:
    """Image-like inputs in [0, 1), as the calibration saw."""
    rng = np.random.default_rng(11)
    return [{"images": rng.random(SHAPE, dtype=np.float32)} for _ in range(count)]
