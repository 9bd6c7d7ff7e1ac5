"""Float models and their quantize_static QDQ forms where the fallback's answer is known."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Samples = list[dict[str, np.ndarray]]


def samples(count: int = 8, seed: int = 0, scale: float = 1.0) -> Samples:
    rng = np.random.default_rng(seed)
    return [{"x": (scale * rng.standard_normal((1, 16))).astype(np.float32)} for _ in range(count)]


def aliased_mlp() -> onnx.ModelProto:
    """x -> MatMul -> Add -> Reshape -> Transpose -> Reshape -> MatMul -> y: the Add's output
    reaches the second MatMul through ops that only move values (one chain once quantized)."""
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array((rng.standard_normal((16, 32)) / 4).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 8)) / 6).astype(np.float32), "w2")
    shape_a = numpy_helper.from_array(np.array([1, 4, 8], np.int64), "shape_a")
    shape_b = numpy_helper.from_array(np.array([1, 32], np.int64), "shape_b")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Reshape", ["hb", "shape_a"], ["r1"], name="reshape1"),
        helper.make_node("Transpose", ["r1"], ["t1"], name="transpose1", perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t1", "shape_b"], ["r2"], name="reshape2"),
        helper.make_node("MatMul", ["r2", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "aliased",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [w1, b1, w2, shape_a, shape_b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


class _Reader:
    def __init__(self, data: Samples) -> None:
        self._data: Iterator[dict[str, np.ndarray]] = iter(data)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._data, None)


def qdq(model: onnx.ModelProto, calibration: Samples, per_channel: bool = False) -> onnx.ModelProto:
    """``model`` through onnxruntime's quantize_static (QDQ, s8 weights)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(_Reader, CalibrationDataReader):  # type: ignore[misc]
        pass

    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "float.onnx", Path(scratch) / "qdq.onnx"
        onnx.save(model, source)
        quantize_static(
            source,
            target,
            Reader(calibration),
            quant_format=QuantFormat.QDQ,
            per_channel=per_channel,
            weight_type=QuantType.QInt8,
        )
        return onnx.load(target)
