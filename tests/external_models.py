"""Models whose weights live in an external data file, as LLM exporters write them: a float
original and its quantized form (per-channel int8 Q/DQ MatMuls and 4-bit ``MatMulNBits``
alternating), the same names for the same tensors, so validate compares them tensor by tensor.

    x [batch, H] -> MatMul(W0) -> h0 -> MatMul(W1) -> h1 -> ... -> h{L-1} (the output)

Quantized, an even layer is a per-channel int8 weight through DequantizeLinear (the first layer
also quantizes its input: QuantizeLinear/DequantizeLinear, u8), an odd one a MatMulNBits (4 bits,
blocks of 32, zero point 8), as weight-only LLMs are: the rewritten model then agrees with the
original up to MatMulNBits' order of summation, never a quantization step apart. Weights are
drawn with variance 1/H, so every layer's output stays of unit scale and no quantization
saturates. The weights are written one layer at a time (a model of gigabytes
is made in the memory of one layer), each page-aligned in :data:`DATA`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK = 32
ACTIVATION_SCALE = np.float32(8 / 255)  # u8 around 128: [-4.3, 4.3]
DATA = "weights.data"
INLINE_BYTES = 1024  # smaller tensors stay in the model file
ALIGN = 4096

Layer = tuple[list[onnx.NodeProto], list[tuple[str, np.ndarray]]]


def write_model(path: Path, hidden: int, layers: int, *, quantized: bool, seed: int = 0) -> Path:
    """The float model, or its quantized form, at ``path`` with its weights in ``DATA``
    beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    if quantized:
        inits += [
            numpy_helper.from_array(np.array(ACTIVATION_SCALE), "act_scale"),
            numpy_helper.from_array(np.array(128, np.uint8), "act_zero"),
        ]
    with open(path.parent / DATA, "wb") as data:
        for made, tensors in _layers(hidden, layers, seed, quantized):
            nodes += made
            inits += [_stored(name, array, data) for name, array in tensors]
    opsets = [helper.make_opsetid("", 21)]
    if quantized:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(
        nodes,
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", hidden])],
        [helper.make_tensor_value_info(f"h{layers - 1}", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=10), str(path))
    return path


def _stored(name: str, array: np.ndarray, data: BinaryIO) -> onnx.TensorProto:
    """``array`` as an initializer: inline when small, else appended to ``data``."""
    if array.nbytes <= INLINE_BYTES:
        return numpy_helper.from_array(array, name)
    offset = -data.tell() % ALIGN + data.tell()
    data.seek(offset)
    data.write(np.ascontiguousarray(array).tobytes())
    tensor = onnx.TensorProto(
        name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype), dims=array.shape
    )
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", DATA), ("offset", offset), ("length", array.nbytes)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return tensor


def _layers(hidden: int, layers: int, seed: int, quantized: bool) -> Iterator[Layer]:
    rng = np.random.default_rng(seed)
    previous = "x"
    for i in range(layers):
        w = rng.standard_normal((hidden, hidden), dtype=np.float32) / np.float32(np.sqrt(hidden))
        out = f"h{i}"
        if not quantized:
            yield (
                [helper.make_node("MatMul", [previous, f"w{i}"], [out], name=f"mm{i}")],
                [(f"w{i}", w)],
            )
        elif i % 2 == 0:
            yield _qdq_layer(i, previous, out, w)
        else:
            packed, scales = nbits(w)
            node = helper.make_node(
                "MatMulNBits",
                [previous, f"w{i}_b", f"w{i}_scales"],
                [out],
                name=f"mm{i}",
                domain="com.microsoft",
                K=hidden,
                N=hidden,
                bits=4,
                block_size=BLOCK,
            )
            yield [node], [(f"w{i}_b", packed), (f"w{i}_scales", scales)]
        previous = out


def _qdq_layer(i: int, previous: str, out: str, w: np.ndarray) -> Layer:
    scale = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    act = ["act_scale", "act_zero"]
    nodes = []
    if i == 0:
        nodes += [
            helper.make_node("QuantizeLinear", [previous, *act], [f"a{i}_q"], name=f"q{i}"),
            helper.make_node("DequantizeLinear", [f"a{i}_q", *act], [f"a{i}"], name=f"dq{i}"),
        ]
        previous = f"a{i}"
    nodes += [
        helper.make_node(
            "DequantizeLinear",
            [f"w{i}_q", f"w{i}_scale", f"w{i}_zero"],
            [f"w{i}"],
            axis=1,
            name=f"dqw{i}",
        ),
        helper.make_node("MatMul", [previous, f"w{i}"], [out], name=f"mm{i}"),
    ]
    zero = np.zeros(w.shape[1], np.int8)
    return nodes, [(f"w{i}_q", q), (f"w{i}_scale", scale), (f"w{i}_zero", zero)]


def nbits(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``w`` [K, N] as MatMulNBits holds it: uint4 codes around 8 in blocks of 32 along K, two
    a byte low nibble first, [N, K / 32, 16]; scales [N, K / 32]."""
    k, n = w.shape
    blocks = w.T.reshape(n, k // BLOCK, BLOCK)
    scales = (np.abs(blocks).max(axis=2) / 7).astype(np.float32)
    codes = np.clip(np.rint(blocks / scales[..., None]) + 8, 0, 15).astype(np.uint8)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return np.ascontiguousarray(packed), scales
