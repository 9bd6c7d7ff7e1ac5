"""A small transformer encoder named as PyTorch's dynamo exporter names things (``val_N``
values, ``node_Op_N`` nodes), two layers reading the same scalar constants (the attention scale,
LayerNorm's epsilon-free affine ones), quantized by onnxruntime's quantize_static (QDQ; s8 or
u8 activations). quantize_static then names each DequantizeLinear after the tensor it reads
(``val_3_DequantizeLinear``): a constant shared by several nodes has one such node feeding all
of them. Cached: each producer run takes a second or so."""

from __future__ import annotations

import itertools
import logging
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

logging.getLogger("onnxruntime.quantization").setLevel(logging.ERROR)

SEQUENCE, WIDTH, HEADS, LAYERS = 8, 32, 2, 2


def float_model() -> onnx.ModelProto:
    """x [1, 8, 32] -> two encoder layers (attention, residual, LayerNorm, Gelu MLP) -> y."""
    rng = np.random.default_rng(5)
    counter = itertools.count()
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def value() -> str:
        return f"val_{next(counter)}"

    def constant(array: np.ndarray) -> str:
        name = value()
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = value()
        nodes.append(helper.make_node(op, inputs, [out], name=f"node_{op}_{len(nodes)}", **attrs))
        return out

    def shape(values: list[int]) -> str:
        name = value()
        inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    head = WIDTH // HEADS
    scale = constant(np.array(1.0 / np.sqrt(head)))  # shared by every layer's attention
    half = constant(np.array(0.5))  # Gelu as 0.5 x (1 + erf(x / sqrt 2)), shared
    one = constant(np.array(1.0))
    root2 = constant(np.array(np.sqrt(2.0)))
    heads = shape([1, SEQUENCE, HEADS, head])
    merged = shape([1, SEQUENCE, WIDTH])
    x = "x"
    for _ in range(LAYERS):

        def linear(source: str, width_in: int, width_out: int) -> str:
            w = constant(rng.standard_normal((width_in, width_out)) / np.sqrt(width_in))
            b = constant(rng.standard_normal(width_out) * 0.1)
            return node("Add", [node("MatMul", [source, w]), b])

        q, k, v = (linear(x, WIDTH, WIDTH) for _ in range(3))
        q = node("Transpose", [node("Reshape", [q, heads])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, heads])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, heads])], perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k]), scale])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), merged])
        gamma, beta = constant(np.ones(WIDTH)), constant(np.zeros(WIDTH))
        x = node(
            "LayerNormalization", [node("Add", [x, linear(context, WIDTH, WIDTH)]), gamma, beta]
        )
        hidden = linear(x, WIDTH, 2 * WIDTH)
        erf = node("Erf", [node("Div", [hidden, root2])])
        gelu = node("Mul", [node("Mul", [hidden, node("Add", [erf, one])]), half])
        x = node("Add", [x, linear(gelu, 2 * WIDTH, WIDTH)])
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQUENCE, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SEQUENCE, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _through_files(quantize: object) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "float.onnx", Path(scratch) / "quantized.onnx"
        onnx.save(float_model(), source)
        quantize(source, target)  # type: ignore[operator]
        return onnx.load(target)


@cache
def dynamic_quantized() -> onnx.ModelProto:
    """float_model() through quantize_dynamic (DynamicQuantizeLinear -> MatMulInteger, its
    default: u8 activations, s8 weights)."""
    from onnxruntime.quantization import quantize_dynamic

    return _through_files(lambda source, target: quantize_dynamic(source, target))


@cache
def weight_only(block: int = 16) -> onnx.ModelProto:
    """float_model()'s MatMul weights as MatMulNBits (4-bit, symmetric, ``block``)."""
    from .producers import matmul_nbits

    return matmul_nbits(float_model(), block, symmetric=True, qoperator=True)


@cache
def quantized(activations: str = "s8") -> onnx.ModelProto:
    """float_model() through quantize_static: QDQ, per-channel s8 weights, ``activations``
    "s8" or "u8", every op type quantized (Mul, Add, Softmax... read their constants through
    a DequantizeLinear too), calibrated on four seeded samples."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            shape = (1, SEQUENCE, WIDTH)
            self.samples = iter(
                [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)]
            )

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.samples, None)

    def run(source: Path, target: Path) -> None:
        quantize_static(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8 if activations == "s8" else QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )

    return _through_files(run)
