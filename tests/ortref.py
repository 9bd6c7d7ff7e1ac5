"""Test helpers: one-node ONNX models run in onnxruntime's own kernels (the independent oracle)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tests.builders import dequantize_linear_model, graph_input, quantize_linear_model, run_ort


def ort_quantize_linear(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 1, opset: int = 21
) -> np.ndarray:
    """onnxruntime's QuantizeLinear on ``x`` (scale/zero point as initializers)."""
    model = quantize_linear_model(
        graph_input(x),
        np.asarray(scale),
        None if zero_point is None else np.asarray(zero_point),
        y_type=None if zero_point is not None else TensorProto.UINT8,
        opset=opset,
        check=False,
        axis=axis,
    )
    return run_ort(model, {"x": x})[0]


def ort_dequantize_linear(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 1, opset: int = 21
) -> np.ndarray:
    """onnxruntime's DequantizeLinear on ``x`` (scale/zero point as initializers)."""
    model = dequantize_linear_model(
        graph_input(x),
        np.asarray(scale),
        None if zero_point is None else np.asarray(zero_point),
        opset=opset,
        check=False,
        axis=axis,
    )
    return run_ort(model, {"x": x})[0]
