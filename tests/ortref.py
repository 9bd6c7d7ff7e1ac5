"""Test helpers: one-node ONNX models run in onnxruntime's own kernels (the independent oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import quantgraph
from quantgraph.spec import DOMAIN, OPSET_VERSION


def _session(
    model: onnx.ModelProto, options: ort.SessionOptions | None = None
) -> ort.InferenceSession:
    options = options or ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _tensor(name: str, array: np.ndarray) -> TensorProto:
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def ort_quantize_linear(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 1, opset: int = 21
) -> np.ndarray:
    """onnxruntime's QuantizeLinear on ``x`` (scale/zero point as initializers)."""
    inputs = ["x", "scale"] + (["zp"] if zero_point is not None else [])
    out_type = (
        helper.np_dtype_to_tensor_dtype(zero_point.dtype)
        if zero_point is not None
        else TensorProto.UINT8
    )
    inits = [_tensor("scale", scale)] + (
        [_tensor("zp", zero_point)] if zero_point is not None else []
    )
    node = helper.make_node("QuantizeLinear", inputs, ["y"], axis=axis)
    graph = helper.make_graph(
        [node],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", out_type, list(x.shape))],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return np.asarray(_session(model).run(None, {"x": x})[0])


def ort_dequantize_linear(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 1, opset: int = 21
) -> np.ndarray:
    """onnxruntime's DequantizeLinear on ``x`` (scale/zero point as initializers)."""
    inputs = ["x", "scale"] + (["zp"] if zero_point is not None else [])
    inits = [_tensor("scale", scale)] + (
        [_tensor("zp", zero_point)] if zero_point is not None else []
    )
    node = helper.make_node("DequantizeLinear", inputs, ["y"], axis=axis)
    graph = helper.make_graph(
        [node],
        "dq",
        [
            helper.make_tensor_value_info(
                "x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape)
            )
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return np.asarray(_session(model).run(None, {"x": x})[0])


def spec_op_model(
    op_type: str,
    src: np.ndarray,
    inputs: dict[str, np.ndarray],
    out_type: int,
    **attributes: object,
) -> onnx.ModelProto:
    """A one-node model of a quantgraph op; ``inputs`` (scales, zps) become graph inputs."""
    names = ["src", *inputs]
    node = helper.make_node(
        op_type, names, ["dst"], domain=DOMAIN, name=f"{op_type}_node", **attributes
    )
    graph_inputs = [
        helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)
        )
        for name, array in {"src": src, **inputs}.items()
    ]
    graph = helper.make_graph(
        [node],
        "spec",
        graph_inputs,
        [helper.make_tensor_value_info("dst", out_type, list(src.shape))],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )


def run_spec_op(
    backend: str,
    op_type: str,
    src: np.ndarray,
    inputs: dict[str, np.ndarray],
    out_type: int,
    **attributes: object,
) -> np.ndarray:
    """Run one quantgraph op on a backend through quantgraph.InferenceSession."""
    model = spec_op_model(op_type, src, inputs, out_type, **attributes)
    session = quantgraph.InferenceSession(model, backend)
    return np.asarray(session.run(None, {"src": src, **inputs})[0])
