"""QOperator models as onnxruntime's quantize_static writes them (quant_format=QOperator), from a
small float model holding every op it has a QOperator form of: Conv (with and without bias),
LeakyRelu, AveragePool, Sigmoid, Mul, Add, Concat, GlobalAveragePool, MatMul, Gemm, Softmax."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.producers import _Calibration, _through_files

# op type -> count in the quantized model
QOPERATOR_OPS = {
    "QLinearConv": 2,
    "QLinearLeakyRelu": 1,
    "QLinearAveragePool": 1,
    "QLinearSigmoid": 1,
    "QLinearMul": 1,
    "QLinearAdd": 1,
    "QLinearConcat": 1,
    "QLinearGlobalAveragePool": 1,
    "QLinearMatMul": 1,
    "QGemm": 1,
    "QLinearSoftmax": 1,
}
FLOAT_OPS = {
    "QLinearConv": "Conv",
    "QLinearLeakyRelu": "LeakyRelu",
    "QLinearAveragePool": "AveragePool",
    "QLinearSigmoid": "Sigmoid",
    "QLinearMul": "Mul",
    "QLinearAdd": "Add",
    "QLinearConcat": "Concat",
    "QLinearGlobalAveragePool": "GlobalAveragePool",
    "QLinearMatMul": "MatMul",
    "QGemm": "Gemm",
    "QLinearSoftmax": "Softmax",
}


def every_op() -> onnx.ModelProto:
    """x [1, 3, 8, 8] -> y [1, 10] (... Gemm -> Softmax) and z [1, 8] (GlobalAveragePool)."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: list[int], scale: float) -> onnx.TensorProto:
        values = (rng.standard_normal(shape) * scale).astype(np.float32)
        return numpy_helper.from_array(values, name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["c"], ["lr"], name="leaky", alpha=0.1),
        node("AveragePool", ["lr"], ["ap"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        node("Sigmoid", ["ap"], ["sg"], name="sigmoid"),
        node("Mul", ["ap", "sg"], ["mu"], name="mul"),
        node("Conv", ["mu", "cw2"], ["c2"], name="conv2"),  # no bias
        node("Add", ["c2", "mu"], ["ad"], name="add"),
        node("Concat", ["ad", "mu"], ["cc"], name="concat", axis=1),
        node("GlobalAveragePool", ["cc"], ["gp"], name="gap"),
        node("Flatten", ["cc"], ["f"], name="flat"),
        node("MatMul", ["f", "mw"], ["m"], name="mm"),
        node("Gemm", ["m", "gw", "gb"], ["g"], name="gemm", transB=1),
        node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
        node("Flatten", ["gp"], ["z"], name="flat2"),
    ]
    graph = helper.make_graph(
        nodes,
        "every_qoperator_op",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8]),
        ],
        [
            weight("cw", [4, 3, 3, 3], 0.2),
            weight("cb", [4], 0.1),
            weight("cw2", [4, 4, 1, 1], 0.3),
            weight("mw", [128, 16], 0.1),
            weight("gw", [10, 16], 0.2),
            weight("gb", [10], 0.1),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    return model


@cache
def qoperator(activation: str = "u8", per_channel: bool = True) -> onnx.ModelProto:
    """every_op() through quantize_static(QOperator), s8 weights, u8 or s8 activations."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(_Calibration, CalibrationDataReader):  # type: ignore[misc]
        pass

    def run(source: Path, target: Path) -> None:
        quantize_static(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QOperator,
            per_channel=per_channel,
            activation_type=QuantType.QUInt8 if activation == "u8" else QuantType.QInt8,
            weight_type=QuantType.QInt8,
        )

    return _through_files(every_op(), run)
