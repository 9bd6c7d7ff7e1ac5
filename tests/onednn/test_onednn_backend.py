"""The onednn backend: loading oneDNN, reporting it, the one-line errors without it, and oneDNN's
own hand-checkable cases from its unit tests (shape {1,2,2})."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

import quantgraph
from quantgraph.backends import onednn
from quantgraph.errors import BackendError
from tests.builders import requires_onednn, run_quantgraph, spec_op_model

F, S8, U8 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8
ROOT = Path(__file__).resolve().parents[2]


def test_ci_has_the_onednn_backend() -> None:
    """`make test` installs oneDNN and builds the kernels: under CI nothing here may skip."""
    if not os.environ.get("CI"):
        pytest.skip("only under CI")
    assert onednn.unavailable_reason() is None


def test_without_onednn_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(onednn.ENV_LIBRARY, raising=False)
    monkeypatch.setattr(onednn, "DISTRIBUTIONS", ())
    with pytest.raises(BackendError, match=r"pip install 'quantgraph\[onednn\]'"):
        quantgraph.InferenceSession(spec_op_model("Dequantize", (U8, [4]), [0.1]), "onednn")


def test_a_bad_library_path_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(onednn.ENV_LIBRARY, str(tmp_path / "libdnnl.so.3"))
    with pytest.raises(BackendError, match=r"QUANTGRAPH_ONEDNN_LIBRARY=.* is not a file"):
        onednn.dnnl_path()


@requires_onednn
def test_kernel_library_variables_follow_one_scheme(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """QUANTGRAPH_ONEDNN_KERNELS_LIBRARY names libquantgraph_onednn.so (beside
    QUANTGRAPH_ONEDNN_LIBRARY for libdnnl); QUANTGRAPH_ONEDNN_LIB, its earlier name, still works
    with a DeprecationWarning."""
    monkeypatch.delenv("QUANTGRAPH_ONEDNN_KERNELS_LIBRARY", raising=False)
    monkeypatch.delenv("QUANTGRAPH_ONEDNN_LIB", raising=False)
    built = onednn.kernels_path()
    monkeypatch.setenv("QUANTGRAPH_ONEDNN_KERNELS_LIBRARY", str(tmp_path / "new.so"))
    with pytest.raises(BackendError, match=r"^QUANTGRAPH_ONEDNN_KERNELS_LIBRARY='.*new\.so'"):
        onednn.kernels_path()
    monkeypatch.delenv("QUANTGRAPH_ONEDNN_KERNELS_LIBRARY")
    monkeypatch.setenv("QUANTGRAPH_ONEDNN_LIB", str(tmp_path / "old.so"))
    with (
        pytest.warns(DeprecationWarning, match="set QUANTGRAPH_ONEDNN_KERNELS_LIBRARY instead"),
        pytest.raises(BackendError, match=r"^QUANTGRAPH_ONEDNN_LIB='.*old\.so' is not a file"),
    ):
        onednn.kernels_path()
    monkeypatch.setenv("QUANTGRAPH_ONEDNN_KERNELS_LIBRARY", str(built))  # the new name wins
    assert onednn.kernels_path() == built


def test_cli_without_onednn_is_one_line(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(spec_op_model("Dequantize", (U8, [4]), [0.1]).SerializeToString())
    env = {**os.environ, onednn.ENV_LIBRARY: str(tmp_path / "missing.so")}
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", "run", str(model), "--backend", "onednn"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "QUANTGRAPH_ONEDNN_LIBRARY" in lines[0], done.stderr


def test_another_onednn_in_the_process_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    if onednn.unavailable_reason() is not None:
        pytest.skip(str(onednn.unavailable_reason()))
    onednn.load.cache_clear()
    try:
        monkeypatch.setattr(onednn, "_loaded_dnnl", lambda: Path("/elsewhere/libdnnl.so.3"))
        with pytest.raises(BackendError, match=r"two libdnnl\.so\.3 cannot live in one process"):
            onednn.load()
    finally:
        onednn.load.cache_clear()


@requires_onednn
def test_the_session_reports_which_onednn_runs() -> None:
    session = quantgraph.InferenceSession(spec_op_model("Dequantize", (U8, [4]), [0.1]), "onednn")
    assert session.onednn_version is not None
    assert session.onednn_version.startswith("oneDNN v3.")
    assert session.arithmetic == "onednn"
    major, minor, _ = onednn.version_tuple()
    assert major == 3 and minor >= 2


@requires_onednn
def test_onnx_arithmetic_is_not_what_onednn_computes() -> None:
    with pytest.raises(BackendError, match="oneDNN's own arithmetic"):
        quantgraph.InferenceSession(
            spec_op_model("Dequantize", (U8, [4]), [0.1]), "onednn", arithmetic="onnx"
        )


X = np.array([-1, 0, 1, 2], np.float32).reshape(1, 2, 2)


@requires_onednn
@pytest.mark.parametrize(
    ("model", "src", "expected", "dtype"),
    [
        pytest.param(
            spec_op_model("Dequantize", (U8, [1, 2, 2]), [0.1], [10], dst_type=F),
            np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2),
            [-1, 0, 1, 2],
            np.float32,
            id="Dequantize-u8-zp10",
        ),
        pytest.param(
            spec_op_model(
                "Quantize", (F, [1, 2, 2]), [0.1, 0.2], dst_type=S8, qtype="per_channel", axis=1
            ),
            X,
            [-10, 0, 5, 10],
            np.int8,
            id="Quantize-per_channel-s8",
        ),
        pytest.param(
            spec_op_model(
                "DynamicQuantize",
                (F, [1, 2, 2]),
                np.array([0.1], np.float32),
                np.array([10], np.uint8),
                dst_type=U8,
            ),
            X,
            [0, 10, 20, 30],
            np.uint8,
            id="DynamicQuantize-u8-zp10",
        ),
        pytest.param(
            spec_op_model(
                "DynamicDequantize", (U8, [1, 2, 2]), np.array([0.1], np.float32), dst_type=F
            ),
            np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2),
            [0, 1, 2, 3],
            np.float32,
            id="DynamicDequantize-u8",
        ),
    ],
)
def test_onednn_unit_test_cases(
    model: object, src: np.ndarray, expected: list[float], dtype: type
) -> None:
    (result,) = run_quantgraph(model, "onednn", {"src": src})  # type: ignore[arg-type]
    assert result.dtype == dtype
    np.testing.assert_allclose(result.ravel(), np.asarray(expected, dtype), rtol=1e-6)
