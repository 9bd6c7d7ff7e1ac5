"""The Python API is quiet on stderr: a failing kernel or a refused node comes back once, as an
exception, never as onnxruntime's raw log lines ([E:onnxruntime:...]) or a backend's own line.
The stderr file descriptor itself is captured (capfd): onnxruntime writes to it from C++."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

import quantgraph
from tests.builders import BACKENDS, spec_op_model

HERE = Path(__file__).resolve().parent
F, U8 = TensorProto.FLOAT, TensorProto.UINT8
GOOD: dict[str, np.ndarray] = {
    "src": np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3),
    "scales": np.array([0.5, 0.25, 0.125], np.float32),
    "zps": np.array([1, 2, 3], np.uint8),
}


def _model() -> onnx.ModelProto:
    return spec_op_model(
        "DynamicQuantize",
        (F, ["a", "b"]),
        (F, ["c"]),
        (U8, ["d"]),
        dst_type=U8,
        qtype="per_channel",
        axis=1,
        name="quiet_node",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_kernel_is_one_exception_and_nothing_on_stderr(
    backend: str, capfd: pytest.CaptureFixture[str]
) -> None:
    session = quantgraph.InferenceSession(_model(), backend)
    capfd.readouterr()
    bad = {**GOOD, "scales": np.array([0.5, 0.0, 1.0], np.float32)}
    with pytest.raises(Exception, match=r"DynamicQuantize node .*\[rule scale-value\]"):
        session.run(None, bad)
    captured = capfd.readouterr()
    assert captured.err == "", captured.err
    assert captured.out == "", captured.out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_node_refused_at_session_creation_prints_nothing(
    backend: str, capfd: pytest.CaptureFixture[str]
) -> None:
    model = spec_op_model("Quantize", (F, [2, 3]), [0.0], dst_type=U8, name="zero_scale")
    capfd.readouterr()
    with pytest.raises(Exception, match=r"zero_scale.*\[rule scale-value\]"):
        quantgraph.InferenceSession(model, backend)
    assert capfd.readouterr().err == ""


def test_a_log_level_the_caller_chose_is_kept() -> None:
    options = ort.SessionOptions()
    options.log_severity_level = 1
    quantgraph.InferenceSession(_model(), "python", options=options)
    assert options.log_severity_level == 1


def test_the_python_backend_prints_no_line_of_its_own() -> None:
    """Outside pytest (whose log capture would hide it): Python's logging prints a library's
    unhandled ERROR records on stderr; the kernel error must only be the exception."""
    script = """
import numpy as np, quantgraph
from tests.test_quiet_api import GOOD, _model
session = quantgraph.InferenceSession(_model(), "python")
try:
    session.run(None, {**GOOD, "scales": np.array([0.5, 0.0, 1.0], np.float32)})
except quantgraph.errors.KernelError as error:
    print("raised:", error)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=HERE.parent,  # the repository: tests is a package there
        timeout=120,
        check=True,
    )
    assert done.stdout.startswith("raised: DynamicQuantize node 'quiet_node'"), done.stdout
    assert done.stderr == ""
