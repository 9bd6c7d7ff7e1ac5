"""Published weight-only formats, built as their producers build them (issue #34):
onnxruntime's MatMulNBitsQuantizer in its default QOperator format (MatMulNBits,
GatherBlockQuantized) and hand-built com.microsoft nodes for the rows it does not write
(float16 scales, bias, g_idx, float zero points)."""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from quantgraph.passes.contrib.nbits_layout import pack
from tests.producers import mlp

CONTRIB = "com.microsoft"


@cache
def quantizer_nbits(
    k: int,
    block: int,
    symmetric: bool,
    bits: int = 4,
    accuracy_level: int | None = None,
    gather: bool = False,
) -> onnx.ModelProto:
    """mlp(k) (or embedding(k) with ``gather``) through MatMulNBitsQuantizer's defaults
    (QOperator): MatMulNBits, and GatherBlockQuantized for a Gather of an embedding table."""
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=block,
        is_symmetric=symmetric,
        bits=bits,
        accuracy_level=accuracy_level,
        op_types_to_quantize=("MatMul", "Gather") if gather else ("MatMul",),
    )
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(embedding(k) if gather else mlp(k), algo_config=config)
    quantizer.process()
    result: onnx.ModelProto = quantizer.model.model
    return result


def embedding(d: int, vocab: int = 50) -> onnx.ModelProto:
    """ids [batch, seq] -> Gather(table [vocab, d]) -> MatMul [d, 24] -> y."""
    rng = np.random.default_rng(0)
    table = numpy_helper.from_array(
        (rng.standard_normal((vocab, d)) * 0.1).astype(np.float32), "emb"
    )
    w = numpy_helper.from_array((rng.standard_normal((d, 24)) * 0.1).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
            helper.make_node("MatMul", ["e", "w"], ["y"], name="proj"),
        ],
        "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 24])],
        [table, w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def matmul_nbits(
    k: int = 56,
    n: int = 24,
    block: int = 32,
    bits: int = 4,
    *,
    dtype: int = TensorProto.FLOAT,
    zero_points: str = "absent",
    g_idx: str = "",
    bias: bool = False,
    accuracy_level: int | None = None,
    flat_scales: bool = False,
    opset: int = 17,
) -> onnx.ModelProto:
    """One hand-built MatMulNBits: x [batch, seq, K] -> y [batch, seq, N]. ``zero_points``:
    absent, packed (uint8), typed (integral values of ``dtype``) or fractional; ``g_idx``:
    identity (k // block) or shuffled (act-order)."""
    rng = np.random.default_rng(k * 1000 + n + block + bits)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    blocks = -(-k // block)
    top = (1 << bits) - 1
    q = rng.integers(0, top + 1, (n, blocks * block), dtype=np.uint8)
    packed = pack(q, bits, blocks * block * bits // 8).reshape(n, blocks, block * bits // 8)
    scales = (rng.random((n, blocks)) * 0.02 + 0.001).astype(np_type)
    inits = [
        numpy_helper.from_array(packed, "B"),
        numpy_helper.from_array(scales.reshape(-1) if flat_scales else scales, "scales"),
    ]
    inputs = ["x", "B", "scales"]
    zps = rng.integers(0, top + 1, (n, blocks), dtype=np.uint8)
    if zero_points == "packed":
        inits.append(numpy_helper.from_array(pack(zps, bits, -(-blocks * bits // 8)), "zp"))
    elif zero_points == "typed":
        inits.append(numpy_helper.from_array(zps.astype(np_type), "zp"))
    elif zero_points == "fractional":
        inits.append(numpy_helper.from_array((zps + 0.5).astype(np_type), "zp"))
    inputs.append("zp" if zero_points != "absent" else "")
    if g_idx:
        order = np.arange(k) // block
        if g_idx == "shuffled":
            order = rng.permutation(order)
        inits.append(numpy_helper.from_array(order.astype(np.int32), "g_idx"))
    inputs.append("g_idx" if g_idx else "")
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np_type), "bias"))
    inputs.append("bias" if bias else "")
    while inputs[-1] == "":
        inputs.pop()
    attributes: dict[str, Any] = {"K": k, "N": n, "bits": bits, "block_size": block}
    if accuracy_level is not None:
        attributes["accuracy_level"] = accuracy_level
    node = helper.make_node("MatMulNBits", inputs, ["y"], name="mm", domain=CONTRIB, **attributes)
    graph = helper.make_graph(
        [node],
        "matmul_nbits",
        [helper.make_tensor_value_info("x", dtype, ["batch", "seq", k])],
        [helper.make_tensor_value_info("y", dtype, ["batch", "seq", n])],
        inits,
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(CONTRIB, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def gather_block_quantized(
    k: int = 64,
    block: int = 16,
    bits: int = 4,
    *,
    data: str = "uint8",
    zero_points: bool = False,
    vocab: int = 40,
    dtype: int = TensorProto.FLOAT,
    gather_axis: int = 0,
    quantize_axis: int = 1,
) -> onnx.ModelProto:
    """One hand-built GatherBlockQuantized: ids [batch, seq] -> y [batch, seq, K]. ``data``:
    uint8 (Olive's RTN: ``bits`` packed per byte, packed zero points, MatMulNBits' default zero
    point 2^(bits-1)), int4 or uint4 (typed zero points, default 0)."""
    rng = np.random.default_rng(k * 100 + block + bits + vocab)
    blocks = -(-(vocab, k)[quantize_axis] // block)
    signed = data == "int4"
    low, high = (-8, 8) if signed else (0, 1 << bits)
    q = rng.integers(low, high, (vocab, k))
    grouped = (blocks, k) if quantize_axis == 0 else (vocab, blocks)
    zps = rng.integers(low, high, grouped)
    scales = (rng.random(grouped) * 0.02 + 0.001).astype(helper.tensor_dtype_to_np_dtype(dtype))
    inits = [numpy_helper.from_array(scales, "scales")]
    if data == "uint8":
        inits.append(numpy_helper.from_array(pack(q.astype(np.uint8), bits, k * bits // 8), "q"))
        if zero_points:
            width = -(-blocks * bits // 8)
            inits.append(numpy_helper.from_array(pack(zps.astype(np.uint8), bits, width), "zp"))
    else:
        kind = TensorProto.INT4 if signed else TensorProto.UINT4
        for name, values in [("q", q), ("zp", zps)][: 2 if zero_points else 1]:
            raw = pack((values.reshape(1, -1) & 0xF).astype(np.uint8), 4, -(-values.size // 2))
            inits.append(helper.make_tensor(name, kind, list(values.shape), raw.tobytes(), True))
    attributes: dict[str, Any] = {"block_size": block, "gather_axis": gather_axis}
    attributes["quantize_axis"] = quantize_axis
    if data == "uint8":
        attributes["bits"] = bits
    node = helper.make_node(
        "GatherBlockQuantized",
        ["q", "ids", "scales", *(["zp"] if zero_points else [])],
        ["y"],
        name="embed",
        domain=CONTRIB,
        **attributes,
    )
    graph = helper.make_graph(
        [node],
        "gather_block_quantized",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [
            helper.make_tensor_value_info(
                "y", dtype, [vocab, "batch", "seq"] if gather_axis else ["batch", "seq", k]
            )
        ],
        inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(CONTRIB, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def assert_summed_in_another_order(
    got: np.ndarray, want: np.ndarray, x: np.ndarray, weight: np.ndarray
) -> None:
    """``got`` and ``want``: float32 ``x @ weight`` (+ a bias) summed in two orders, as
    onnxruntime's MatMulNBits kernel and DequantizeLinear + MatMul do, whose order depends on
    the CPU's kernels: apart by at most 2(K-1) * 2^-24 * sum |x * w| per element, plus one
    rounding of the result (the bound validation/compare/other_kernels.py states)."""
    k = x.shape[-1]
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(weight.astype(np.float64))
    bound = 2 * (k - 1) * 2.0**-24 * magnitude + np.spacing(np.abs(want).astype(np.float32))
    apart = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert (apart <= bound).all(), (float(apart.max()), float(bound.min()))
