"""Models the QdqToSpecPass and convert tests share: every Q/DQ variant (:class:`Case`), one
Q or DQ node of a type, Q/DQ inside If branches and model-local functions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.builders import (
    dequantize_linear_model,
    make_model,
    quantize_linear_model,
    tensor_info,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; the project supports 3.10

OPSETS = (10, 13, 19, 21, 23, 25)


SHAPE = (2, 3, 4)


QUANT = {"u8": (TensorProto.UINT8, np.uint8), "s8": (TensorProto.INT8, np.int8)}


CHANNEL_SCALES = np.array([0.5, 0.1, 0.0625, 3.0], np.float32)


CHANNEL_ZPS = {"u8": [128, 3, 250, 0], "s8": [-3, 0, 100, -128]}


TENSOR_SCALE = np.float32(0.5)


TENSOR_ZP = {"u8": 3, "s8": -3}


QDQ = ("QuantizeLinear", "DequantizeLinear")


class QdqAttributes(TypedDict, total=False):
    """The QuantizeLinear/DequantizeLinear attributes these builders set."""

    axis: int
    block_size: int
    output_dtype: int


@dataclass(frozen=True)
class Case:
    """One QuantizeLinear -> DequantizeLinear pair: x -> Q -> q -> DQ -> y (q and y outputs)."""

    opset: int
    quant: str  # "u8" | "s8"
    scale: str  # "scalar" | "one" (1-D, one element) | "axis" | "runtime" (scalar graph input)
    axis: int | None = None
    zero_point: bool = True
    output_dtype: bool = False  # QuantizeLinear-21 output_dtype instead of a zero point

    @property
    def id(self) -> str:
        parts = [f"opset{self.opset}", self.quant, self.scale]
        if self.axis is not None:
            parts.append(f"axis{self.axis}")
        if not self.zero_point:
            parts.append("nozp")
        if self.output_dtype:
            parts.append("output_dtype")
        return "-".join(parts)

    @property
    def elem(self) -> int:
        return QUANT[self.quant][0]

    @property
    def np_type(self) -> type[np.integer]:
        return QUANT[self.quant][1]

    @property
    def count(self) -> int:
        return SHAPE[self.axis] if self.scale == "axis" and self.axis is not None else 1

    @property
    def per_channel(self) -> bool:
        return self.scale == "axis"

    def scales(self) -> np.ndarray:
        if self.per_channel:
            return CHANNEL_SCALES[: self.count].copy()
        if self.scale == "one":
            return np.array([TENSOR_SCALE], np.float32)
        return np.array(TENSOR_SCALE, np.float32)

    def zps(self) -> np.ndarray:
        if self.per_channel:
            return np.array(CHANNEL_ZPS[self.quant][: self.count], self.np_type)
        if self.scale == "one":
            return np.array([TENSOR_ZP[self.quant]], self.np_type)
        return np.array(TENSOR_ZP[self.quant], self.np_type)

    def model(self) -> onnx.ModelProto:
        names = ["x", "s"] + (["z"] if self.zero_point else [])
        attrs: QdqAttributes = {} if self.axis is None else {"axis": self.axis}
        q_attrs = attrs.copy()
        if self.output_dtype:
            q_attrs["output_dtype"] = self.elem
        nodes = [
            helper.make_node("QuantizeLinear", names, ["q"], name="q0", **q_attrs),
            helper.make_node("DequantizeLinear", ["q", *names[1:]], ["y"], name="dq0", **attrs),
        ]
        inputs = [tensor_info("x", TensorProto.FLOAT, SHAPE)]
        initializers = []
        if self.scale == "runtime":
            inputs.append(tensor_info("s", TensorProto.FLOAT, []))
            if self.zero_point:
                inputs.append(tensor_info("z", self.elem, []))
        else:
            initializers.append(numpy_helper.from_array(self.scales(), "s"))
            if self.zero_point:
                initializers.append(numpy_helper.from_array(self.zps(), "z"))
        outputs = [tensor_info("q", self.elem, SHAPE), tensor_info("y", TensorProto.FLOAT, SHAPE)]
        return make_model(nodes, inputs, outputs, initializers, opset=self.opset)

    def feeds(self, seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """Inputs with exact .5 ties, saturation, specials, and plain random values."""
        rng = np.random.default_rng(seed)
        runtime = [(TENSOR_SCALE, TENSOR_ZP[self.quant]), (np.float32(0.1), 7)]
        for scale, zp in runtime if self.scale == "runtime" else [(None, None)]:
            if scale is None:
                scales, zps = self.scales(), self.zps()
            else:
                scales, zps = np.array(scale, np.float32), np.array(zp, self.np_type)
            shape = [1] * len(SHAPE)
            if self.per_channel:
                assert self.axis is not None
                shape[self.axis] = -1
            s_b = scales.reshape(shape).astype(np.float32)
            z_b = zps.reshape(shape).astype(np.int64) if self.zero_point else np.int64(0)
            info = np.iinfo(self.np_type)
            ties = (rng.integers(-300, 300, SHAPE) + 0.5).astype(np.float32) * s_b
            edges = np.stack(
                [
                    (info.max - z_b + 0.5) * s_b,  # tie right at the top of the range
                    (info.min - z_b - 0.5) * s_b,
                    (info.max - z_b) * s_b,
                    (info.min - z_b) * s_b,
                ]
            )
            edge = np.take_along_axis(
                np.broadcast_to(edges, (4, *SHAPE)), rng.integers(0, 4, (1, *SHAPE)), 0
            )[0].astype(np.float32)
            specials = np.resize(
                np.array(
                    [np.inf, -np.inf, np.nan, 1e30, -1e30, 0.0, -0.0, 1e-30, 3e38, -3e38],
                    np.float32,
                ),
                SHAPE,
            )
            plain = (rng.standard_normal(SHAPE) * 40).astype(np.float32)
            for x in (ties, edge, specials, plain):
                feed = {"x": np.ascontiguousarray(x, np.float32)}
                if self.scale == "runtime":
                    feed["s"] = np.array(scales, np.float32)
                    if self.zero_point:
                        feed["z"] = np.array(zps, self.np_type)
                yield feed


def dq_only(
    elem: int,
    *,
    opset: int = 21,
    scale: np.ndarray | None = None,
    zero_point: bool = True,
    domain: str = "",
    out_type: int = TensorProto.FLOAT,
    **attrs: Unpack[QdqAttributes],
) -> onnx.ModelProto:
    """A constant of ``elem`` (the type under test) dequantized."""
    scale = np.array(0.5, np.float32) if scale is None else scale
    zp = helper.make_tensor("z", elem, list(scale.shape), [0] * scale.size) if zero_point else None
    return dequantize_linear_model(
        helper.make_tensor("w", elem, [4, 6], [1] * 24),
        scale,
        zp,
        y_type=out_type,
        domain=domain,
        opset=opset,
        **attrs,
    )


def q_only(elem: int, *, opset: int = 21, **attrs: Unpack[QdqAttributes]) -> onnx.ModelProto:
    """x quantized to ``elem`` (the type under test)."""
    return quantize_linear_model(
        (TensorProto.FLOAT, [4, 6]),
        np.array(0.5, np.float32),
        helper.make_tensor("z", elem, [], [0]),
        opset=opset,
        **attrs,
    )


FLOAT8 = {
    "e4m3fn": TensorProto.FLOAT8E4M3FN,
    "e5m2": TensorProto.FLOAT8E5M2,
}


def f8_dq_model(elem: int, opset: int, zero_point: bool, *, typed: bool = True) -> onnx.ModelProto:
    """xf -> Cast(f8) -> x8 -> DequantizeLinear -> y (onnxruntime's Python API has no f8 feeds)."""
    names = ["x8", "s"] + (["z"] if zero_point else [])
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    if zero_point:
        inits.append(helper.make_tensor("z", elem, [], [0.0]))
    model = make_model(
        [
            helper.make_node("Cast", ["xf"], ["x8"], name="to_f8", to=elem),
            helper.make_node("DequantizeLinear", names, ["y"], name="dq0"),
        ],
        [tensor_info("xf", TensorProto.FLOAT, [4, 8])],
        [tensor_info("y", TensorProto.FLOAT, [4, 8])],
        inits,
        opset=opset,
    )
    if typed:
        model.graph.value_info.append(tensor_info("x8", elem, [4, 8]))
    return model


def qdq_nodes(
    prefix: str, source: str, scale: str, zp: str, out: str, **attrs: Unpack[QdqAttributes]
) -> list[onnx.NodeProto]:
    return [
        helper.make_node(
            "QuantizeLinear", [source, scale, zp], [f"{prefix}_q"], name=f"{prefix}_Q", **attrs
        ),
        helper.make_node(
            "DequantizeLinear", [f"{prefix}_q", scale, zp], [out], name=f"{prefix}_DQ", **attrs
        ),
    ]


def if_model() -> onnx.ModelProto:
    """If(cond): then = Q/DQ with branch-local scalars and a nested If; else = per-axis Q/DQ
    whose scale and zero point live in the outer graph."""
    inner_then = helper.make_graph(
        [
            helper.make_node(
                "Constant",
                [],
                ["in_s"],
                name="c_in_s",
                value=numpy_helper.from_array(np.array(0.25, np.float32)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["in_z"],
                name="c_in_z",
                value=numpy_helper.from_array(np.array(-5, np.int8)),
            ),
            *qdq_nodes("inner", "x", "in_s", "in_z", "inner_out"),
        ],
        "inner_then",
        [],
        [tensor_info("inner_out", TensorProto.FLOAT, SHAPE)],
    )
    inner_else = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["inner_else_out"], name="inner_id")],
        "inner_else",
        [],
        [tensor_info("inner_else_out", TensorProto.FLOAT, SHAPE)],
    )
    then_branch = helper.make_graph(
        [
            *qdq_nodes("then", "x", "then_s", "then_z", "then_mid"),
            helper.make_node(
                "If",
                ["cond2"],
                ["then_inner"],
                name="inner_if",
                then_branch=inner_then,
                else_branch=inner_else,
            ),
            helper.make_node("Add", ["then_mid", "then_inner"], ["then_out"], name="then_add"),
        ],
        "then",
        [],
        [tensor_info("then_out", TensorProto.FLOAT, SHAPE)],
        initializer=[
            numpy_helper.from_array(np.array(0.125, np.float32), "then_s"),
            numpy_helper.from_array(np.array(100, np.uint8), "then_z"),
        ],
    )
    else_branch = helper.make_graph(
        qdq_nodes("else", "x", "outer_s", "outer_z", "else_out", axis=1),
        "else",
        [],
        [tensor_info("else_out", TensorProto.FLOAT, SHAPE)],
    )
    return make_model(
        [
            helper.make_node(
                "If",
                ["cond"],
                ["y"],
                name="branch",
                then_branch=then_branch,
                else_branch=else_branch,
            )
        ],
        [
            tensor_info("x", TensorProto.FLOAT, SHAPE),
            tensor_info("cond", TensorProto.BOOL, []),
            tensor_info("cond2", TensorProto.BOOL, []),
        ],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        [
            numpy_helper.from_array(np.array([0.5, 0.1, 2.0], np.float32), "outer_s"),
            numpy_helper.from_array(np.array([0, 7, -128], np.int8), "outer_z"),
        ],
        opset=21,
    )


def function_model(*, typed: bool) -> onnx.ModelProto:
    function = helper.make_function(
        "local",
        "QDQ",
        ["fx"],
        ["fy"],
        [
            helper.make_node(
                "Constant",
                [],
                ["fs"],
                name="c_fs",
                value=numpy_helper.from_array(np.array(0.25, np.float32)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["fz"],
                name="c_fz",
                value=numpy_helper.from_array(np.array([3, 200, 0], np.uint8)),
            ),
            helper.make_node(
                "Constant",
                [],
                ["fs3"],
                name="c_fs3",
                value=numpy_helper.from_array(np.array([0.25, 0.5, 0.1], np.float32)),
            ),
            helper.make_node("QuantizeLinear", ["fx", "fs3", "fz"], ["fq"], name="f_Q", axis=1),
            helper.make_node("DequantizeLinear", ["fq", "fs3", "fz"], ["fd"], name="f_DQ", axis=1),
            helper.make_node("QuantizeLinear", ["fd", "fs"], ["fq2"], name="f_Q2"),
            helper.make_node("DequantizeLinear", ["fq2", "fs"], ["fy"], name="f_DQ2"),
        ],
        opset_imports=[helper.make_opsetid("", 21)],
    )
    if typed:
        function.value_info.extend(
            [
                tensor_info("fs", TensorProto.FLOAT, []),
                tensor_info("fs3", TensorProto.FLOAT, [3]),
                tensor_info("fz", TensorProto.UINT8, [3]),
            ]
        )
    return make_model(
        [helper.make_node("QDQ", ["x"], ["y"], domain="local", name="call")],
        [tensor_info("x", TensorProto.FLOAT, SHAPE)],
        [tensor_info("y", TensorProto.FLOAT, SHAPE)],
        opset=21,
        domains={"local": 1},
        functions=[function],
    )
