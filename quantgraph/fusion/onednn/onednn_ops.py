"""ONNX compute ops as oneDNN Graph ops: one small function per ONNX op type, in TABLE.

A function returns False when the node is outside what the oneDNN op expresses (an attribute
value, an input that is not constant, an unknown rank): the node is then a Wildcard, never an
approximation. Layouts are ONNX's: data_format NCX, weights_format OIX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import onnx_ir as ir

from ...ir.values import constant_array, optional_input
from .onednn_description import Dims, Op, boolean, floats, ints, string

AUTO_PAD = {
    "NOTSET": "None",
    "VALID": "VALID",
    "SAME_UPPER": "SAME_UPPER",
    "SAME_LOWER": "SAME_LOWER",
}
# ONNX op type -> oneDNN op kind of the same element-wise arithmetic.
ELEMENTWISE = {
    "Relu": "ReLU",
    "Sigmoid": "Sigmoid",
    "Tanh": "Tanh",
    "HardSwish": "HardSwish",
    "Abs": "Abs",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Add": "Add",
    "Mul": "Multiply",
    "Sub": "Subtract",
    "Div": "Divide",
}
BINARY = {"Add", "Mul", "Sub", "Div"}

Attrs = dict[str, tuple[str, tuple[object, ...]]]


class Translator(Protocol):
    """What a handler needs of the translation it adds to (onednn_translate.Translator)."""

    def tensor(self, value: ir.Value | None) -> int | None: ...

    def dims(self, tensor: int) -> Dims: ...

    def add_op(
        self,
        node: ir.Node | None,
        kind: str,
        inputs: list[int],
        outputs: list[int],
        attrs: Attrs | None = None,
        role: str = ...,
    ) -> Op: ...


def _get(node: ir.Node, name: str, default: object = None) -> object:
    attr = node.attributes.get(name)
    return default if attr is None else attr.value


def _rank(t: Translator, value: ir.Value | None) -> int | None:
    found = t.tensor(value)
    if found is None:
        return None
    dims = t.dims(found)
    return None if dims is None else len(dims)


def _simple(t: Translator, node: ir.Node, kind: str, attrs: Attrs | None = None) -> bool:
    """``node`` as ``kind`` with all its inputs and outputs (none may be missing)."""
    inputs = [t.tensor(v) for v in node.inputs]
    outputs = [t.tensor(v) for v in node.outputs]
    if not inputs or None in inputs or None in outputs:
        return False
    t.add_op(node, kind, inputs, outputs, attrs)  # type: ignore[arg-type]
    return True


def _elementwise(t: Translator, node: ir.Node) -> bool:
    if node.op_type in BINARY and len(node.inputs) != 2:
        return False
    attrs: Attrs = {"auto_broadcast": string("numpy")} if node.op_type in BINARY else {}
    return _simple(t, node, ELEMENTWISE[node.op_type], attrs)


def _window(node: ir.Node, spatial: int) -> Attrs | None:
    """strides, pads_begin/pads_end, dilations and auto_pad of a Conv or pooling node."""
    strides = list(_get(node, "strides", [1] * spatial))  # type: ignore[call-overload]
    pads = list(_get(node, "pads", [0] * 2 * spatial))  # type: ignore[call-overload]
    dilations = list(_get(node, "dilations", [1] * spatial))  # type: ignore[call-overload]
    auto_pad = AUTO_PAD.get(str(_get(node, "auto_pad", "NOTSET")))
    if auto_pad is None or len(strides) != spatial or len(pads) != 2 * spatial:
        return None
    if len(dilations) != spatial:
        return None
    return {
        "strides": ints(strides),
        "pads_begin": ints(pads[:spatial]),
        "pads_end": ints(pads[spatial:]),
        "dilations": ints(dilations),
        "auto_pad": string(auto_pad),
        "data_format": string("NCX"),
    }


def _conv(t: Translator, node: ir.Node) -> bool:
    weight = node.inputs[1] if len(node.inputs) > 1 else None
    rank = _rank(t, weight)
    kernel = _get(node, "kernel_shape")
    spatial = rank - 2 if rank is not None else (len(kernel) if kernel is not None else None)  # type: ignore[arg-type]
    if spatial is None or spatial < 1:
        return False
    attrs = _window(node, spatial)
    if attrs is None:
        return False
    attrs["groups"] = ints([int(_get(node, "group", 1))])  # type: ignore[call-overload]
    attrs["weights_format"] = string("OIX")
    bias = optional_input(node, 2)
    if bias is not None and _rank(t, bias) != 1:
        return False
    return _simple(t, node, "Convolution", attrs)


def _matmul(t: Translator, node: ir.Node) -> bool:
    ranks = [_rank(t, v) for v in node.inputs]
    if len(ranks) != 2 or any(r is None or r < 2 for r in ranks):
        return False  # ONNX's 1-D promotion is not oneDNN's
    attrs = {"transpose_a": boolean(False), "transpose_b": boolean(False)}
    return _simple(t, node, "MatMul", attrs)


def _gemm(t: Translator, node: ir.Node) -> bool:
    alpha, beta = float(_get(node, "alpha", 1.0)), float(_get(node, "beta", 1.0))  # type: ignore[arg-type]
    if alpha != 1.0 or int(_get(node, "transA", 0)) != 0:  # type: ignore[call-overload]
        return False
    bias = optional_input(node, 2)
    if bias is not None and (beta != 1.0 or _rank(t, bias) != 1):
        return False
    if any(_rank(t, v) != 2 for v in node.inputs[:2]):
        return False
    attrs = {"transpose_a": boolean(False), "transpose_b": boolean(bool(_get(node, "transB", 0)))}
    return _simple(t, node, "MatMul", attrs)


def _clip(t: Translator, node: ir.Node) -> bool:
    if "min" in node.attributes or "max" in node.attributes:  # opset < 11
        low, high = _get(node, "min", -np.inf), _get(node, "max", np.inf)
    else:
        bounds = []
        for index, default in ((1, -np.inf), (2, np.inf)):
            value = optional_input(node, index)
            array = constant_array(value) if value is not None else np.float32(default)
            if array is None or array.size != 1:
                return False
            bounds.append(float(array.reshape(-1)[0]))
        low, high = bounds
    src, dst = t.tensor(node.inputs[0]), t.tensor(node.outputs[0])
    if src is None or dst is None:
        return False
    attrs = {"min": floats([low]), "max": floats([high])}  # type: ignore[list-item]
    t.add_op(node, "Clamp", [src], [dst], attrs)
    return True


def _pool(t: Translator, node: ir.Node) -> bool:
    kernel = list(_get(node, "kernel_shape", []))  # type: ignore[call-overload]
    if not kernel or len(node.outputs) != 1 or int(_get(node, "storage_order", 0)) != 0:  # type: ignore[call-overload]
        return False
    attrs = _window(node, len(kernel))
    if attrs is None:
        return False
    attrs["kernel"] = ints(kernel)
    attrs["rounding_type"] = string("ceil" if int(_get(node, "ceil_mode", 0)) else "floor")  # type: ignore[call-overload]
    if node.op_type == "AveragePool":
        if any(d != 1 for d in attrs.pop("dilations")[1]):
            return False
        attrs["exclude_pad"] = boolean(not int(_get(node, "count_include_pad", 0)))  # type: ignore[call-overload]
        return _simple(t, node, "AvgPool", attrs)
    return _simple(t, node, "MaxPool", attrs)


def _global_pool(t: Translator, node: ir.Node) -> bool:
    rank = _rank(t, node.inputs[0])
    if rank is None or rank < 3:
        return False
    kind = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    return _simple(t, node, kind, {"axes": ints(range(2, rank)), "keep_dims": boolean(True)})


def _concat(t: Translator, node: ir.Node) -> bool:
    return _simple(t, node, "Concat", {"axis": ints([int(_get(node, "axis", 0))])})  # type: ignore[call-overload]


def _reshape(t: Translator, node: ir.Node, shape: list[int], special_zero: bool) -> bool:
    src, dst = t.tensor(node.inputs[0]), t.tensor(node.outputs[0])
    if src is None or dst is None or not shape:
        return False
    attrs = {"shape": ints(shape), "special_zero": boolean(special_zero)}
    t.add_op(node, "StaticReshape", [src], [dst], attrs)
    return True


def _reshape_op(t: Translator, node: ir.Node) -> bool:
    shape = constant_array(optional_input(node, 1))
    if shape is None or shape.ndim != 1:
        return False
    return _reshape(t, node, shape.tolist(), not int(_get(node, "allowzero", 0)))  # type: ignore[call-overload]


def _flatten(t: Translator, node: ir.Node) -> bool:
    axis = int(_get(node, "axis", 1))  # type: ignore[call-overload]
    if axis == 0:
        return _reshape(t, node, [1, -1], False)
    if axis == 1:
        return _reshape(t, node, [0, -1], True)
    return False


def _transpose(t: Translator, node: ir.Node) -> bool:
    perm = _get(node, "perm")
    if perm is None:
        rank = _rank(t, node.inputs[0])
        if rank is None:
            return False
        perm = list(reversed(range(rank)))
    return _simple(t, node, "StaticTranspose", {"order": ints(perm)})  # type: ignore[arg-type]


def _gelu(t: Translator, node: ir.Node) -> bool:
    return _get(node, "approximate", "none") == "none" and _simple(t, node, "GELU")


def _leaky(t: Translator, node: ir.Node) -> bool:
    alpha = float(_get(node, "alpha", 0.01))  # type: ignore[arg-type]
    return _simple(t, node, "LeakyReLU", {"alpha": floats([alpha])})


def _elu(t: Translator, node: ir.Node) -> bool:
    return _simple(t, node, "Elu", {"alpha": floats([float(_get(node, "alpha", 1.0))])})  # type: ignore[arg-type]


TABLE: dict[str, Callable[[Translator, ir.Node], bool]] = {
    **{name: _elementwise for name in ELEMENTWISE},
    "Conv": _conv,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Clip": _clip,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
    "Concat": _concat,
    "Reshape": _reshape_op,
    "Flatten": _flatten,
    "Transpose": _transpose,
    # No Softmax: oneDNN v3.2 runs SoftMax -> Quantize as its reference kernel ("ref:any",
    # 23 ms of a 106 ms nudenet run by ONEDNN_VERBOSE); as a Wildcard it stays onnxruntime's.
    "Gelu": _gelu,
    "LeakyRelu": _leaky,
    "Elu": _elu,
}


def translate(t: Translator, node: ir.Node) -> bool:
    """Add ``node`` to ``t`` as a oneDNN op; False when the table has no faithful op for it."""
    function = TABLE.get(node.op_type)
    return function is not None and function(t, node)
