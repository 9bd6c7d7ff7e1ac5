"""The onednn backend through the Python API is quiet on stderr (capfd captures the file
descriptor, where onnxruntime's C++ logger writes): a node oneDNN refuses and a kernel that
fails come back once, as the exception."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import quantgraph
from tests.builders import requires_onednn, spec_op_model

pytestmark = requires_onednn
F, U8 = TensorProto.FLOAT, TensorProto.UINT8


def test_a_node_onednn_refuses_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    model = spec_op_model(
        "DynamicDequantize",
        (U8, [1, 2, 2]),
        np.array([0.1, 0.2], np.float32),
        np.array([1, 2], np.uint8),
        dst_type=F,
        qtype="per_channel",
        axis=1,
        name="ddq_zps",
    )
    capfd.readouterr()
    with pytest.raises(Exception, match=r"ddq_zps.*oneDNN"):
        quantgraph.InferenceSession(model, "onednn")
    captured = capfd.readouterr()
    assert captured.err == "", captured.err


def test_a_failing_kernel_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    model = spec_op_model(
        "DynamicQuantize", (F, ["a", "b"]), (F, [1]), dst_type=U8, name="dq_scale"
    )
    session = quantgraph.InferenceSession(model, "onednn")
    src = np.ones((2, 3), np.float32)
    capfd.readouterr()
    with pytest.raises(Exception, match=r"dq_scale.*\[rule scale-value\]"):
        session.run(None, {"src": src, "scales": np.array([0.0], np.float32)})
    assert capfd.readouterr().err == ""
