"""Models of the published quantized formats, built with onnx.helper the way their producers
write them (names, input order, initializer types as in tests/published.py and what
``quantize_dynamic`` / ``quantize_static(QOperator)`` / ``MatMulNBitsQuantizer`` emit), one
pattern per model, accepted by its pass or refused with a known skip code.

A :class:`Knobs` picks each structural choice (hypothesis draws them, see
:mod:`tools.fuzz.formats`); the values come from a seeded numpy generator. Each builder returns
a :class:`FormatModel`: the model, the op types the pass should convert (or the skip code it
should give), and what the checks need to know of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from quantgraph.passes.contrib.nbits_layout import pack

CONTRIB = "com.microsoft"
F32, F16, U8, S8 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.UINT8, TensorProto.INT8
T = TypeVar("T")
# A weight-only Cast that stays a float computation: no report entry, the chain is left alone.
LEFT = "left-alone"


class Knobs(Protocol):
    rng: np.random.Generator

    def pick(self, name: str, options: Sequence[T]) -> T: ...

    def int(self, name: str, low: int, high: int) -> int: ...


@dataclass
class FormatModel:
    """One drawn model: ``expect`` None means the pass converts ``ops`` (op type -> count);
    else the skip code its node gets (or :data:`LEFT`)."""

    pattern: str
    model: onnx.ModelProto
    ops: dict[str, int]
    expect: str | None
    choices: dict[str, Any] = field(default_factory=dict)
    # The original's arithmetic is not the spec form's (int32 sums, u8 x s8 pair saturation):
    # what validation at ORT_DISABLE_ALL is allowed to show (see tools.fuzz.formats).
    saturates: bool = False
    # Why the original's kernel computes otherwise than the converted form, at both levels
    # (measured in tests/test_published_formats.py), or None.
    inexact: str | None = None


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: list[onnx.TensorProto],
    opset: int,
    contrib: bool = False,
    ir_version: int = 8,
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, inits)
    opsets = [helper.make_opsetid("", opset)]
    if contrib:
        opsets.append(helper.make_opsetid(CONTRIB, 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def _vi(name: str, kind: int, shape: Sequence[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, kind, shape)


def _scalar(name: str, value: float | int, kind: int) -> onnx.TensorProto:
    np_type = helper.tensor_dtype_to_np_dtype(kind)
    return numpy_helper.from_array(np.array(value, np_type), name)


# -- MatMulNBits (MatMulNBitsQuantizer, onnxruntime-genai, Olive RTN) ----------------------------

NBITS_REFUSALS = (
    "act-order",
    "float-zero-point",
    "packed-layout",
    "runtime-weight",
    "quantized-type",
)


def matmul_nbits(k: Knobs) -> FormatModel:
    refusal = k.pick("refusal", (None, None, None, *NBITS_REFUSALS))
    bits = 2 if refusal == "quantized-type" else k.pick("bits", (4, 8))
    block = k.pick("block", (16, 32, 64, 128))
    kdim = k.int("K", 1, 300)
    n = k.int("N", 1, 48)
    dtype = k.pick("scales", (F32, F16))
    zero_points = k.pick("zero_points", ("absent", "packed", "typed"))
    if bits == 8 and zero_points == "typed":
        zero_points = "packed"  # onnxruntime's CPU kernel refuses the node (producers too)
    if refusal == "float-zero-point":
        zero_points = "fractional"
    bias = k.pick("bias", (False, True))
    accuracy = k.pick("accuracy_level", (None, 0, 1, 4))
    g_idx = "shuffled" if refusal == "act-order" else k.pick("g_idx", ("", "", "", "identity"))
    if bits == 8 and g_idx == "identity":
        g_idx = ""  # onnxruntime 1.32 cannot run 8-bit with g_idx (fails in ComputeBUnpacked)
    rank = k.pick("rank", (2, 3))
    rng = k.rng
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    blocks = -(-kdim // block)
    top = (1 << bits) - 1
    zps = rng.integers(0, top + 1, (n, blocks), dtype=np.uint8)
    if zero_points == "absent":
        zps[:] = 1 << (bits - 1)
    q = rng.integers(0, top + 1, (n, blocks * block), dtype=np.uint8)
    # the quantizer pads a short last block with float zeros: their zero point
    pad = np.repeat(zps, block, axis=1)
    q[:, kdim:] = pad[:, kdim:]
    packed = pack(q, bits, blocks * block * bits // 8).reshape(n, blocks, block * bits // 8)
    scales = (rng.random((n, blocks)) * 0.02 + 0.001).astype(np_type)
    inits = [
        numpy_helper.from_array(packed, "B"),
        numpy_helper.from_array(scales, "scales"),
    ]
    inputs = ["x", "B", "scales"]
    if zero_points == "packed":
        inits.append(numpy_helper.from_array(pack(zps, bits, -(-blocks * bits // 8)), "zp"))
    elif zero_points == "typed":
        inits.append(numpy_helper.from_array(zps.astype(np_type), "zp"))
    elif zero_points == "fractional":
        inits.append(numpy_helper.from_array((zps + 0.5).astype(np_type), "zp"))
    inputs.append("" if zero_points == "absent" else "zp")
    if g_idx:
        order = np.arange(kdim) // block
        if g_idx == "shuffled" and kdim > block:
            order = rng.permutation(order)
            while np.array_equal(order, np.arange(kdim) // block):
                order = rng.permutation(order)
        elif g_idx == "shuffled":
            order = (order + 1) % blocks if blocks > 1 else order + 1
        inits.append(numpy_helper.from_array(order.astype(np.int32), "g_idx"))
    inputs.append("g_idx" if g_idx else "")
    if bias:
        values = (rng.standard_normal(n) * 0.1).astype(np_type)
        inits.append(numpy_helper.from_array(values, "bias"))
    inputs.append("bias" if bias else "")
    while inputs[-1] == "":
        inputs.pop()
    attributes: dict[str, Any] = {"K": kdim, "N": n, "bits": bits, "block_size": block}
    if refusal == "packed-layout":
        attributes["N"] = n + 1
    if accuracy is not None:
        attributes["accuracy_level"] = accuracy
    node = helper.make_node(
        "MatMulNBits", inputs, ["y"], name="mm_Q4", domain=CONTRIB, **attributes
    )
    dims: list[int | str] = ["batch", "seq"] if rank == 3 else ["m"]
    graph_inputs = [_vi("x", dtype, [*dims, kdim])]
    if refusal == "runtime-weight":
        graph_inputs.append(_vi("B", U8, list(packed.shape)))
        inits = inits[1:]
    model = _model(
        [node], graph_inputs, [_vi("y", dtype, [*dims, attributes["N"]])], inits, 17, True
    )
    choices = {
        "bits": bits, "block": block, "K": kdim, "N": n, "scales": "f16" if dtype == F16 else
        "f32", "zero_points": zero_points, "bias": bias, "accuracy_level": accuracy,
        "g_idx": g_idx, "rank": rank,
    }  # fmt: skip
    inexact = None
    if accuracy:
        inexact = f"accuracy_level {accuracy}: another kernel path in onnxruntime"
    elif dtype == F16:
        inexact = "float16 products summed in another order"
    elif zero_points == "typed" or g_idx:
        inexact = "onnxruntime computes q*s - zp*s (typed zero points, g_idx)"
    elif bias:
        inexact = "the bias added inside onnxruntime's kernel, after the MatMul here"
    if refusal is None and g_idx and zero_points == "packed":
        refusal = "act-order"  # onnxruntime's g_idx kernel reads packed zero points otherwise
    found = FormatModel("matmul_nbits", model, {"MatMulNBits": 1}, refusal, choices)
    found.inexact = inexact
    return found


# -- quantize_dynamic: DynamicQuantizeLinear + MatMulInteger / ConvInteger + Cast -> Mul ---------

INTEGER_REFUSALS = ("scale-chain", "runtime-weight", "zero-point-shape")


def _weight_q(
    rng: np.random.Generator, shape: tuple[int, ...], signed: bool, reduce_range: bool
) -> tuple[np.ndarray, np.ndarray]:
    """quantize_dynamic's weight: s8 symmetric (zp 0) or u8 asymmetric, 7 bits with
    reduce_range; values and zero point."""
    if signed:
        top = 63 if reduce_range else 127
        return rng.integers(-top, top + 1, shape).astype(np.int8), np.zeros((), np.int8)
    top = 127 if reduce_range else 255
    zp = np.array(rng.integers(top // 4, 3 * top // 4 + 1), np.uint8)
    return rng.integers(0, top + 1, shape).astype(np.uint8), zp


def integer_ops(k: Knobs) -> FormatModel:
    op = k.pick("op", ("MatMulInteger", "MatMulInteger", "ConvInteger"))
    refusal = k.pick("refusal", (None, None, None, *INTEGER_REFUSALS))
    signed = k.pick("weight", ("s8", "u8")) == "s8"
    reduce_range = k.pick("reduce_range", (False, True))
    per_channel = op == "MatMulInteger" and k.pick("per_channel", (False, True))
    if refusal == "zero-point-shape":
        op = "ConvInteger"  # per-channel zero points: only MatMulInteger's columns are taken
        per_channel = False
    swap = k.pick("mul_order", (False, True))  # Mul(scale, Cast) as well as Mul(Cast, scale)
    bias = k.pick("bias", (False, True))
    rng = k.rng
    name = "mm" if op == "MatMulInteger" else "conv"
    w_name = "w" if op == "MatMulInteger" else "cw"
    attributes: dict[str, Any] = {}
    if op == "MatMulInteger":
        kdim, n = k.int("K", 1, 96), k.int("N", 1, 48)
        rank = k.pick("rank", (2, 3))
        x_dims: list[int | str] = ["batch", "seq", kdim] if rank == 3 else ["batch", kdim]
        y_dims: list[int | str] = [*x_dims[:-1], n]
        w_shape: tuple[int, ...] = (kdim, n)
        channels = n
    else:
        cin, cout = k.int("C", 1, 8), k.int("M", 2 if refusal == "zero-point-shape" else 1, 8)
        kernel = k.pick("kernel", (1, 3))
        size = k.int("HW", kernel, 10)
        group = k.pick("group", (1, 1, cin)) if cin == cout else 1
        stride = k.pick("stride", (1, 2))
        pads = [kernel // 2] * 4 if k.pick("pads", (False, True)) else [0] * 4
        attributes = {"group": group, "strides": [stride, stride], "pads": pads}
        attributes["kernel_shape"] = [kernel, kernel]
        attributes["dilations"] = [1, 1]
        x_dims = [1, cin, size, size]
        out = (size + 2 * pads[0] - kernel) // stride + 1
        y_dims = [1, cout, out, out]
        w_shape = (cout, cin // group, kernel, kernel)
        channels = cout
    w, zp = _weight_q(rng, w_shape, signed, reduce_range)
    w_scale = (rng.random(channels if per_channel else ()) * 0.02 + 0.002).astype(np.float32)
    if per_channel or refusal == "zero-point-shape":  # the latter: zero points only
        zp = (
            np.full(channels, zp, zp.dtype)
            if signed
            else rng.integers(64, 192, channels).astype(np.uint8)
        )
    inits = [
        numpy_helper.from_array(w_scale, f"{w_name}_scale"),
        numpy_helper.from_array(zp, f"{w_name}_zero_point"),
        numpy_helper.from_array(w, f"{w_name}_quantized"),
    ]
    x = "x" if op == "MatMulInteger" else "xi"
    q, s, z = f"{x}_quantized", f"{x}_scale", f"{x}_zero_point"
    nodes = []
    graph_inputs = [_vi(x, F32, x_dims)]
    if refusal == "runtime-weight":  # A fed as uint8: no DynamicQuantizeLinear to take
        graph_inputs = [_vi(q, U8, x_dims)]
        inits += [_scalar(s, 0.05, F32), _scalar(z, 128, U8)]
    else:
        nodes.append(
            helper.make_node("DynamicQuantizeLinear", [x], [q, s, z], name=f"{x}_QuantizeLinear")
        )
    scales = f"{name}_quant_scales_mul:0"
    nodes.append(
        helper.make_node("Mul", [s, f"{w_name}_scale"], [scales], name=f"{name}_quant_scales_mul")
    )
    integer = f"{'m' if op == 'MatMulInteger' else 'c'}_output_quantized"
    nodes.append(
        helper.make_node(
            op, [q, f"{w_name}_quantized", z, f"{w_name}_zero_point"], [integer],
            name=f"{name}_quant", **attributes,
        )
    )  # fmt: skip
    y = "y"
    out_type = F32
    if refusal == "scale-chain":  # the int32 result is the output
        nodes = [n for n in nodes if n.op_type != "Mul"]
        y, out_type = integer, TensorProto.INT32
    else:
        cast = f"{integer}_cast_output"
        nodes.append(helper.make_node("Cast", [integer], [cast], name=f"{integer}_cast", to=F32))
        scaled = "y" if not bias else f"{name}_quant_scaled_output"
        operands = [scales, cast] if swap else [cast, scales]
        nodes.append(
            helper.make_node("Mul", operands, [scaled], name=f"{name}_quant_output_scale_mul")
        )
        if bias:
            shape = (n,) if op == "MatMulInteger" else (channels, 1, 1)
            values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
            inits.append(numpy_helper.from_array(values, "bias"))
            nodes.append(helper.make_node("Add", [scaled, "bias"], ["y"], name=f"{name}_bias_add"))
    model = _model(nodes, graph_inputs, [_vi(y, out_type, y_dims)], inits, 13)
    weight_full_range_s8 = signed and not reduce_range
    choices = {
        "op": op, "weight": "s8" if signed else "u8", "reduce_range": reduce_range,
        "per_channel": per_channel, "mul_order": swap, "bias": bias, "shape": list(w_shape),
        **attributes,
    }  # fmt: skip
    ops = {op: 1} if refusal == "runtime-weight" else {op: 1, "DynamicQuantizeLinear": 1}
    return FormatModel("integer", model, ops, refusal, choices, saturates=weight_full_range_s8)


# -- quantize_static(QOperator): QLinear* ops between QuantizeLinear and DequantizeLinear -------

QOPERATOR_OPS = (
    "QLinearConv",
    "QLinearMatMul",
    "QGemm",
    "QLinearAdd",
    "QLinearMul",
    "QLinearConcat",
    "QLinearAveragePool",
    "QLinearGlobalAveragePool",
    "QLinearLeakyRelu",
    "QLinearSigmoid",
    "QLinearSoftmax",
)
QOPERATOR_REFUSALS = {
    "QLinearAveragePool": "channels-last",
    "QLinearGlobalAveragePool": "channels-last",
    "QGemm": "gemm-scaling",
    "QLinearConcat": "node-arity",
}


class _QBuilder:
    """The quantize_static(QOperator) frame: float input -> QuantizeLinear -> op -> ... ->
    DequantizeLinear -> float output, scalar scales and zero points as initializers."""

    def __init__(self, rng: np.random.Generator, activation: int) -> None:
        self.rng = rng
        self.activation = activation
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []

    def zero_point(self) -> int:
        if self.activation == S8:
            return int(self.rng.integers(-20, 21))
        return int(self.rng.integers(100, 156))

    def qparams(self, name: str, scale: float) -> tuple[str, str]:
        self.inits += [
            _scalar(f"{name}_scale", scale, F32),
            _scalar(f"{name}_zero_point", self.zero_point(), self.activation),
        ]
        return f"{name}_scale", f"{name}_zero_point"

    def quantized_input(self, name: str, shape: Sequence[int | str]) -> list[str]:
        self.inputs.append(_vi(name, F32, shape))
        scale, zp = self.qparams(name, float(self.rng.uniform(0.01, 0.05)))
        q = f"{name}_quantized"
        self.nodes.append(
            helper.make_node(
                "QuantizeLinear", [name, scale, zp], [q], name=f"{name}_QuantizeLinear"
            )
        )
        return [q, scale, zp]

    def output(self, q: str, scale: str, zp: str) -> None:
        self.nodes.append(
            helper.make_node("DequantizeLinear", [q, scale, zp], ["y"], name="y_DequantizeLinear")
        )

    def weight(
        self, name: str, shape: tuple[int, ...], channels: int | None, signed: bool
    ) -> list[str]:
        """s8 symmetric weights (zp 0), or u8 (zp 128); ``channels``: per-channel scales."""
        count = () if channels is None else (channels,)
        scale = (self.rng.random(count) * 0.02 + 0.002).astype(np.float32)
        if signed:
            values = self.rng.integers(-127, 128, shape).astype(np.int8)
            zp = np.zeros(count, np.int8)
        else:
            values = self.rng.integers(0, 256, shape).astype(np.uint8)
            zp = np.full(count, 128, np.uint8)
        self.inits += [
            numpy_helper.from_array(values, f"{name}_quantized"),
            numpy_helper.from_array(scale, f"{name}_scale"),
            numpy_helper.from_array(zp, f"{name}_zero_point"),
        ]
        return [f"{name}_quantized", f"{name}_scale", f"{name}_zero_point"]

    def bias(self, name: str, count: int) -> str:
        values = self.rng.integers(-2000, 2001, count).astype(np.int32)
        self.inits.append(numpy_helper.from_array(values, f"{name}_quantized"))
        return f"{name}_quantized"


def qoperator(k: Knobs) -> FormatModel:
    op = k.pick("op", QOPERATOR_OPS)
    refusal = QOPERATOR_REFUSALS.get(op) if k.int("refuse", 0, 5) == 0 else None
    activation = k.pick("activation", (U8, S8))
    # onnxruntime has no s8 x u8 kernels (QLinearConv: NOT_IMPLEMENTED)
    signed = activation == S8 or k.pick("weight", ("s8", "s8", "u8")) == "s8"
    rng = k.rng
    b = _QBuilder(rng, activation)
    attributes: dict[str, Any] = {}
    domain = "" if op in ("QLinearConv", "QLinearMatMul") else CONTRIB
    per_channel = False
    out_scale = float(rng.uniform(0.02, 0.2))
    if op == "QLinearConv":
        cin, cout = k.int("C", 1, 8), k.int("M", 1, 8)
        kernel = k.pick("kernel", (1, 3))
        size = k.int("HW", kernel, 10)
        group = k.pick("group", (1, 1, cin)) if cin == cout else 1
        stride = k.pick("stride", (1, 2))
        pads = [kernel // 2] * 4 if k.pick("pads", (False, True)) else [0] * 4
        per_channel = k.pick("per_channel", (False, True))
        x = b.quantized_input("x", [1, cin, size, size])
        w = b.weight(
            "w", (cout, cin // group, kernel, kernel), cout if per_channel else None, signed
        )
        inputs = [*x, *w]
        out = (size + 2 * pads[0] - kernel) // stride + 1
        out_shape: list[int | str] = [1, cout, out, out]
        attributes = {"group": group, "strides": [stride, stride], "pads": pads}
        attributes |= {"kernel_shape": [kernel, kernel], "dilations": [1, 1]}
        tail = [b.bias("b", cout)] if k.pick("bias", (False, True)) else []
        inputs += [*b.qparams("y", out_scale), *tail]
    elif op in ("QLinearMatMul", "QGemm"):
        kdim, n = k.int("K", 1, 64), k.int("N", 1, 32)
        per_channel = k.pick("per_channel", (False, True))
        trans_b = op == "QGemm" and k.pick("transB", (0, 1)) == 1
        rank = 2 if op == "QGemm" else k.pick("rank", (2, 3))
        dims: list[int | str] = ["batch", kdim] if rank == 2 else ["batch", "seq", kdim]
        x = b.quantized_input("x", dims)
        w_shape = (n, kdim) if trans_b else (kdim, n)
        w = b.weight("w", w_shape, n if per_channel else None, signed)
        out_shape = [*dims[:-1], n]
        if op == "QLinearMatMul":
            inputs = [*x, *w, *b.qparams("y", out_scale)]
        else:
            bias = b.bias("b", n) if k.pick("bias", (False, True)) else ""
            inputs = [*x, *w, bias, *b.qparams("y", out_scale)]
            if trans_b:
                attributes["transB"] = 1
            if refusal is not None:
                attributes["alpha"] = 2.0
    elif op in ("QLinearAdd", "QLinearMul", "QLinearConcat"):
        shape: list[int | str] = [1, k.int("C", 1, 6), k.int("H", 1, 6), k.int("W", 1, 6)]
        count = k.int("count", 2, 3) if op == "QLinearConcat" else 2
        axis = k.int("axis", 0, 3)
        other_shape = list(shape)
        if op == "QLinearConcat":
            other_shape[axis] = k.int("extent", 1, 5)
            attributes["axis"] = axis
        operands = [b.quantized_input("x", shape)]
        operands += [b.quantized_input(f"x{i}", other_shape) for i in range(1, count)]
        if op == "QLinearConcat":
            out_shape = list(shape)
            out_shape[axis] = int(shape[axis]) + (count - 1) * int(other_shape[axis])
            inputs = [*b.qparams("y", out_scale)] + [v for o in operands for v in o]
            if refusal is not None:
                inputs = inputs[:-1]  # a (x, scale) without its zero point
        else:
            out_shape = shape
            inputs = [*operands[0], *operands[1], *b.qparams("y", out_scale)]
    else:  # the unary ops: pools, LeakyRelu, Sigmoid, Softmax
        shape = [1, k.int("C", 1, 6), k.int("H", 2, 8), k.int("W", 2, 8)]
        x = b.quantized_input("x", shape)
        out_shape = list(shape)
        if op == "QLinearAveragePool":
            kernel = k.pick("kernel", (2, 3))
            kernel = min(kernel, int(shape[2]), int(shape[3]))
            stride = k.pick("stride", (1, 2))
            attributes = {"kernel_shape": [kernel, kernel], "strides": [stride, stride]}
            if k.pick("count_include_pad", (False, True)):
                attributes |= {"count_include_pad": 1, "pads": [1, 1, 1, 1]}
            pad = 1 if "pads" in attributes else 0
            out_shape[2:] = [(int(d) + 2 * pad - kernel) // stride + 1 for d in shape[2:]]
        elif op == "QLinearGlobalAveragePool":
            out_shape[2:] = [1, 1]
        elif op == "QLinearLeakyRelu":
            attributes["alpha"] = k.pick("alpha", (0.01, 0.1, 0.2))
        elif op == "QLinearSoftmax":
            attributes |= {"axis": k.pick("axis", (-1, 1, 3)), "opset": 13}
        if refusal is not None:
            attributes["channels_last"] = 1
        y_scale = 1.0 / 256 if op in ("QLinearSigmoid", "QLinearSoftmax") else out_scale
        inputs = [*x, *b.qparams("y", y_scale)]
    b.nodes.append(
        helper.make_node(
            op, inputs, ["y_quantized"], name=f"{op}_quant", domain=domain, **attributes
        )
    )
    b.output("y_quantized", "y_scale", "y_zero_point")
    model = _model(b.nodes, b.inputs, [_vi("y", F32, out_shape)], b.inits, 13, True)
    choices = {
        "op": op, "activation": "u8" if activation == U8 else "s8",
        "weight": "s8" if signed else "u8", "per_channel": per_channel, **attributes,
    }  # fmt: skip
    # u8 x s8 integer kernels without VNNI saturate int16 pair sums (validation.compare.qoperator)
    saturates = op in ("QLinearConv", "QLinearMatMul", "QGemm")
    return FormatModel("qoperator", model, {op: 1}, refusal, choices, saturates=saturates)


# -- weight-only Cast(int constant) [-> Sub(zero point)] -> Mul(scale) ----------------------------

CAST_SOURCES = {"s8": TensorProto.INT8, "u8": U8, "s4": TensorProto.INT4, "u4": TensorProto.UINT4}
CAST_RANGES = {"s8": (-128, 127), "u8": (0, 255), "s4": (-8, 7), "u4": (0, 15)}
CAST_REFUSALS = ("zero-point-range", "fractional-zero-point", "two-axes", "two-users")


def cast_scale(k: Knobs) -> FormatModel:
    source = k.pick("source", tuple(CAST_SOURCES))
    target = k.pick("to", (F32, F16))
    sub = k.pick("sub", (False, True))
    scale_shape = k.pick("scale_shape", ("scalar", "[1]", "[N]", "[1, N]", "[K, 1]"))
    swap = k.pick("mul_order", (False, True))
    refusal = k.pick("refusal", (None, None, None, *CAST_REFUSALS))
    if refusal in ("zero-point-range", "fractional-zero-point"):
        sub = True
    kdim, n = k.int("K", 1, 64), k.int("N", 1, 32)
    rng = k.rng
    low, high = CAST_RANGES[source]
    np_float = helper.tensor_dtype_to_np_dtype(target)
    values = rng.integers(low, high + 1, (kdim, n))
    weight = helper.make_tensor("w_q", CAST_SOURCES[source], [kdim, n], values.reshape(-1).tolist())
    shapes = {"scalar": (), "[1]": (1,), "[N]": (n,), "[1, N]": (1, n), "[K, 1]": (kdim, 1)}
    shape = shapes[scale_shape] if refusal != "two-axes" else (kdim, n)
    if (refusal == "two-axes" and kdim == 1) or (refusal == "two-axes" and n == 1):
        shape = (kdim, n, 1) if n == 1 else (1, kdim, n)  # broadcasting would change W's shape
    scale = (rng.random(shape) * 0.02 + 0.001).astype(np_float)
    inits = [weight, numpy_helper.from_array(scale, "w_scale")]
    nodes = [helper.make_node("Cast", ["w_q"], ["w_cast"], name="w_cast", to=target)]
    last = "w_cast"
    if sub:
        zp_shape = shape if shape != (kdim, n) and len(shape) <= 2 else ()
        zps = rng.integers(low, high + 1, zp_shape).astype(np.float64)
        if refusal == "zero-point-range":
            zps = np.full(zp_shape, high + 1 if target == F32 else high + 2, np.float64)
        elif refusal == "fractional-zero-point":
            zps = zps + 0.5
        inits.append(numpy_helper.from_array(zps.astype(np_float), "w_zero_point"))
        nodes.append(helper.make_node("Sub", [last, "w_zero_point"], ["w_centered"], name="w_sub"))
        last = "w_centered"
    operands = ["w_scale", last] if swap else [last, "w_scale"]
    nodes.append(helper.make_node("Mul", operands, ["w"], name="w_mul"))
    nodes.append(helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"))
    outputs = [_vi("y", target, ["batch", n])]
    if refusal == "two-users":  # the Cast's result is also an output: it must stay
        outputs.append(_vi("w_cast", target, [kdim, n]))
    model = _model(nodes, [_vi("x", target, ["batch", kdim])], outputs, inits, 21, ir_version=10)
    choices = {
        "source": source, "to": "f16" if target == F16 else "f32", "sub": sub,
        "scale_shape": list(shape), "mul_order": swap, "K": kdim, "N": n,
    }  # fmt: skip
    expect = None if refusal is None else LEFT
    return FormatModel("cast_scale", model, {"Cast": 1}, expect, choices | {"refusal": refusal})


BUILDERS: dict[str, Callable[[Knobs], FormatModel]] = {
    "matmul_nbits": matmul_nbits,
    "integer": integer_ops,
    "qoperator": qoperator,
    "cast_scale": cast_scale,
}
