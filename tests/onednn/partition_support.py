"""Helpers of the partition tests: descriptions (docs/onednn.md, "Partition descriptions") of the
QDQ units, and the plan-time C ABI of libquantgraph_onednn called through ctypes."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from quantgraph.backends import native, onednn

Dims = Sequence[int | None] | None


def floats(values: Sequence[float] | np.ndarray) -> str:
    """f32 values as the description writes them (exact: float.hex)."""
    return ",".join(float(np.float32(v)).hex() for v in np.asarray(values).ravel())


def ints(values: Sequence[int] | np.ndarray) -> str:
    return ",".join(str(int(v)) for v in np.asarray(values).ravel())


@dataclass
class Description:
    """A description under construction: ids are handed out in order."""

    lines: list[str] = field(default_factory=lambda: ["qgpart 1"])
    next_tensor: int = 0
    next_op: int = 0

    def tensor(self, dtype: str, dims: Dims, *, const: bool = False) -> int:
        tid = self.next_tensor
        self.next_tensor += 1
        text = "-" if dims is None else ",".join("?" if d is None else str(d) for d in dims)
        self.lines.append(f"tensor {tid} {dtype} {'const' if const else 'var'} {text}")
        return tid

    def op(self, kind: str, ins: Sequence[int], outs: Sequence[int], **attrs: str) -> int:
        oid = self.next_op
        self.next_op += 1
        parts = [f"op {oid} {kind} in={ints(ins)} out={ints(outs)}"]
        parts += [f"{name}={value}" for name, value in attrs.items()]
        self.lines.append(" ".join(parts))
        return oid

    def io(self, inputs: Sequence[int], outputs: Sequence[int]) -> Description:
        self.lines.append("inputs " + " ".join(map(str, inputs)))
        self.lines.append("outputs " + " ".join(map(str, outputs)))
        return self

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def quantize_attrs(scale: float, zp: int) -> dict[str, str]:
    return {
        "qtype": "s:per_tensor",
        "scales": f"f:{floats([scale])}",
        "zps": f"i:{zp}",
        "axis": "i:1",
    }


def conv_unit(
    *,
    src: Sequence[int],
    out_channels: int,
    x_scale: float,
    x_zp: int,
    w_scales: np.ndarray,
    y_scale: float,
    y_zp: int,
    relu: bool = True,
    wildcard: bool = False,
) -> tuple[Description, list[int]]:
    """DQ(u8 src) + DQ(s8 const weights, per-channel) -> Convolution(+f32 bias) [-> ReLU] ->
    Q(u8), NCX / OIX, 3x3 pads 1. A Wildcard between the convolution and the ReLU splits it.
    Returns the description and its op ids."""
    d = Description()
    x = d.tensor("u8", src)
    w = d.tensor("s8", [out_channels, src[1], 3, 3], const=True)
    b = d.tensor("f32", [out_channels], const=True)
    xf, wf, conv = d.tensor("f32", None), d.tensor("f32", None), d.tensor("f32", None)
    ops = [
        d.op("Dequantize", [x], [xf], **quantize_attrs(x_scale, x_zp)),
        d.op(
            "Dequantize",
            [w],
            [wf],
            qtype="s:per_channel",
            scales=f"f:{floats(w_scales)}",
            zps=f"i:{ints(np.zeros(out_channels, int))}",
            axis="i:0",
        ),
        d.op(
            "Convolution",
            [xf, wf, b],
            [conv],
            strides="i:1,1",
            pads_begin="i:1,1",
            pads_end="i:1,1",
            dilations="i:1,1",
            groups="i:1",
            data_format="s:NCX",
            weights_format="s:OIX",
        ),
    ]
    last = conv
    if wildcard:
        mid = d.tensor("f32", None)
        ops.append(d.op("Wildcard", [last], [mid]))
        last = mid
    if relu:
        act = d.tensor("f32", None)
        ops.append(d.op("ReLU", [last], [act]))
        last = act
    y = d.tensor("u8", None)
    ops.append(d.op("Quantize", [last], [y], **quantize_attrs(y_scale, y_zp)))
    return d.io([x, w, b], [y]), ops


def matmul_unit(
    *, m: int, k: int, n: int, x_scale: float, x_zp: int, w_scales: np.ndarray, y_scale: float
) -> Description:
    """DQ(u8 [m, k]) + DQ(s8 const [k, n], per-channel axis 1) -> MatMul(+f32 bias) -> Q(u8)."""
    d = Description()
    x = d.tensor("u8", [m, k])
    w = d.tensor("s8", [k, n], const=True)
    b = d.tensor("f32", [n], const=True)
    xf, wf, mm = d.tensor("f32", None), d.tensor("f32", None), d.tensor("f32", None)
    y = d.tensor("u8", None)
    d.op("Dequantize", [x], [xf], **quantize_attrs(x_scale, x_zp))
    d.op(
        "Dequantize",
        [w],
        [wf],
        qtype="s:per_channel",
        scales=f"f:{floats(w_scales)}",
        zps=f"i:{ints(np.zeros(n, int))}",
        axis="i:1",
    )
    d.op("MatMul", [xf, wf, b], [mm])
    d.op("Quantize", [mm], [y], **quantize_attrs(y_scale, 0))
    return d.io([x, w, b], [y])


def library() -> ctypes.CDLL:
    """libquantgraph_onednn with oneDNN loaded first, as quantgraph.backends.onednn does."""
    onednn.load()
    lib = ctypes.CDLL(str(onednn.kernels_path()))
    for name in ("QuantgraphOnednnPartitions", "QuantgraphOnednnCompile"):
        function = getattr(lib, name)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return lib


def int8_saturates() -> bool:
    """Whether oneDNN's int8 kernels on this CPU saturate for weights beyond +-64 (no VNNI)."""
    function = library().QuantgraphOnednnInt8Saturates
    function.restype = ctypes.c_int
    function.argtypes = []
    return bool(function())


def call(name: str, description: str, size: int = 1 << 16) -> tuple[int, str]:
    """(return code, text written) of one plan-time entry point."""
    buffer = ctypes.create_string_buffer(size)
    code = getattr(library(), name)(description.encode(), buffer, size)
    return int(code), buffer.value.decode()


# -- models with OneDnnPartition nodes ----------------------------------------------------------

DOMAIN = "com.quantgraph.onednn"


def partition_node(
    description: Description, inputs: Sequence[str], outputs: Sequence[str], name: str
) -> onnx.NodeProto:
    return helper.make_node(
        "OneDnnPartition",
        list(inputs),
        list(outputs),
        name=name,
        domain=DOMAIN,
        description=description.text(),
    )


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto],
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(initializers))
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def session(
    built: onnx.ModelProto, *, spec_ops: str = "onednn", threads: int = 1
) -> ort.InferenceSession:
    """A session running OneDnnPartition nodes; ``spec_ops`` "native" registers the native
    library for com.quantgraph and libquantgraph_onednn for the partition domain only."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    if spec_ops == "native":
        native.register(options)
        options.add_session_config_entry("quantgraph.onednn.ops", "partition")
    onednn.load()
    options.register_custom_ops_library(str(onednn.kernels_path()))
    return ort.InferenceSession(
        built.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def reference_session(built: onnx.ModelProto) -> ort.InferenceSession:
    """onnxruntime on plain ONNX ops, no graph optimization: QDQ ops computed as written."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        built.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
