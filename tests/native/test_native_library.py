"""The native library as a package part: where it is found, what it exports, which output
types its shape inference gives, threading, and how a missing library is reported."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from quantgraph import reference
from quantgraph.backends import native
from quantgraph.errors import BackendError
from quantgraph.spec import SpecError, dtypes
from tests.native.native_support import (
    SpecAttributes,
    StaticSpecAttributes,
    native_session,
    requires_native,
    run_native,
    run_session,
    spec_model,
)

pytestmark = requires_native

F32 = np.float32
ORT_TYPE_NAMES: dict[int, str] = {
    TensorProto.UINT8: "tensor(uint8)",
    TensorProto.INT8: "tensor(int8)",
    TensorProto.FLOAT: "tensor(float)",
    TensorProto.FLOAT8E4M3FN: "tensor(float8e4m3fn)",
    TensorProto.FLOAT8E5M2: "tensor(float8e5m2)",
    TensorProto.FLOAT16: "tensor(float16)",
    TensorProto.BFLOAT16: "tensor(bfloat16)",
}
X = np.linspace(-3, 3, 24, dtype=F32).reshape(2, 3, 4)


def test_library_is_in_the_package_and_loads() -> None:
    path = native.library_path()
    assert path.is_file() and path.parent.name == "_native"
    assert ctypes.CDLL(str(path)).RegisterCustomOps is not None


def test_only_the_entry_points_are_exported() -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not installed")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(native.library_path())],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert names == {"RegisterCustomOps", "QuantgraphNativeIsa"}


def test_env_override_and_missing_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(native.ENV_LIBRARY, str(native.library_path()))
    assert native.is_available()
    monkeypatch.setenv(native.ENV_LIBRARY, str(tmp_path / "nowhere.so"))
    assert not native.is_available()
    with pytest.raises(BackendError, match="pip install"):
        native.library_path()


def test_library_variables_follow_one_scheme(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """QUANTGRAPH_NATIVE_LIBRARY names the library; QUANTGRAPH_NATIVE_LIB, the earlier name,
    still works with a DeprecationWarning, and an error names the variable that was set."""
    built = native.library_path()
    monkeypatch.setenv("QUANTGRAPH_NATIVE_LIBRARY", str(tmp_path / "new.so"))
    with pytest.raises(BackendError, match=r"^QUANTGRAPH_NATIVE_LIBRARY='.*new\.so' is not a file"):
        native.library_path()
    monkeypatch.delenv("QUANTGRAPH_NATIVE_LIBRARY")
    monkeypatch.setenv("QUANTGRAPH_NATIVE_LIB", str(tmp_path / "old.so"))
    with (
        pytest.warns(DeprecationWarning, match="set QUANTGRAPH_NATIVE_LIBRARY instead"),
        pytest.raises(BackendError, match=r"^QUANTGRAPH_NATIVE_LIB='.*old\.so' is not a file"),
    ):
        native.library_path()
    monkeypatch.setenv("QUANTGRAPH_NATIVE_LIBRARY", str(built))  # the new name wins
    assert native.library_path() == built


def test_cli_names_a_library_variable_that_points_nowhere(tmp_path: Path) -> None:
    model = Path(__file__).resolve().parents[2] / "models" / "cnn_u8.onnx"
    missing = tmp_path / "libquantgraph_ops.so"
    done = subprocess.run(
        [sys.executable, "-m", "quantgraph", "run", str(model), "--backend", "native"],
        capture_output=True,
        text=True,
        env={**os.environ, "QUANTGRAPH_NATIVE_LIBRARY": str(missing)},
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"quantgraph: error: the native backend cannot run: QUANTGRAPH_NATIVE_LIBRARY='{missing}' "
        "is not a file"
    )


def test_isa_report_and_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    best = native.isa().split("(best ")[1].rstrip(")")
    assert best in ("scalar", "avx2", "avx512")
    monkeypatch.setenv(native.ENV_ISA, "scalar")
    assert native.isa().startswith("scalar ")


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "expected"),
    [
        ("Quantize", {}, {"scales": [0.5]}, TensorProto.UINT8),
        ("Quantize", {}, {"scales": [0.5], "output_dtype": TensorProto.INT8}, TensorProto.INT8),
        (
            "Quantize",
            {},
            {"scales": [0.5], "output_dtype": TensorProto.FLOAT8E4M3FN},
            TensorProto.FLOAT8E4M3FN,
        ),
        (
            "Quantize",
            {},
            {"scales": [0.5], "output_dtype": TensorProto.FLOAT8E5M2},
            TensorProto.FLOAT8E5M2,
        ),
        ("DynamicQuantize", {"zps": np.array([1], np.int8)}, {}, TensorProto.INT8),
        ("DynamicQuantize", {"zps": np.array([1], np.uint8)}, {}, TensorProto.UINT8),
        ("DynamicQuantize", {"zps": np.array([1], np.int32)}, {}, TensorProto.UINT8),
        ("DynamicQuantize", {}, {}, TensorProto.UINT8),
        (
            "DynamicQuantize",
            {"zps": np.array([1], np.uint8)},
            {"output_dtype": TensorProto.INT8},
            TensorProto.INT8,
        ),
        ("Dequantize", {}, {"scales": [0.5]}, TensorProto.FLOAT),
        ("DynamicDequantize", {}, {}, TensorProto.FLOAT),
    ],
)
def test_output_type_inference(
    op: str, inputs: dict[str, np.ndarray], attrs: StaticSpecAttributes, expected: int
) -> None:
    """An untyped dst gets the spec's type (output_dtype, else the zps type, else u8)."""
    src = X if "Quantize" in op and "Dequantize" not in op else X.astype(np.int8)
    dynamic = op.startswith("Dynamic")
    zps = inputs.get("zps")
    model = spec_model(
        op,
        TensorProto.FLOAT if src.dtype == F32 else TensorProto.INT8,
        3,
        scales_type=TensorProto.FLOAT if dynamic else None,
        zps_type=None if zps is None else helper.np_dtype_to_tensor_dtype(zps.dtype),
        **attrs,
    )
    session = native_session(model)
    assert session.get_outputs()[0].type == ORT_TYPE_NAMES[expected]
    feeds = {"src": src}
    if dynamic:
        feeds["scales"] = np.array([0.5], F32)
    if zps is not None:
        feeds["zps"] = zps
    out = run_session(session, feeds)
    assert out.shape == src.shape
    assert dtypes.from_numpy(out.dtype) == dtypes.from_onnx(expected)


@pytest.mark.parametrize(
    ("src", "scales", "expected"),
    [
        (TensorProto.INT8, TensorProto.FLOAT, "tensor(float)"),
        (TensorProto.UINT8, TensorProto.FLOAT16, "tensor(float16)"),
        (TensorProto.INT4, TensorProto.BFLOAT16, "tensor(bfloat16)"),
        (TensorProto.UINT4, TensorProto.FLOAT16, "tensor(float16)"),
        (TensorProto.INT4, TensorProto.FLOAT, "tensor(float)"),
        # Not a dst type: the default registration (f32), whose kernel reports scales-type.
        (TensorProto.INT8, TensorProto.DOUBLE, "tensor(float)"),
    ],
)
def test_dequantize_dst_is_the_scales_type(src: int, scales: int, expected: str) -> None:
    """DynamicDequantize's untyped dst gets the scales' type (f32, f16, bf16), 2 bytes an
    element for the 16-bit ones."""
    model = spec_model("DynamicDequantize", src, 3, scales_type=scales)
    if scales == TensorProto.DOUBLE:
        with pytest.raises(Exception, match=r"\[rule scales-type\]"):
            native_session(model)
        return
    session = native_session(model)
    assert session.get_outputs()[0].type == expected
    q = dtypes.from_onnx(src)
    s = dtypes.from_onnx(scales)
    assert q is not None and s is not None
    values = np.arange(24).reshape(2, 3, 4) % 8
    out = run_session(session, {"src": values.astype(q.numpy), "scales": np.array([0.5], s.numpy)})
    assert out.dtype == s.numpy and out.shape == (2, 3, 4)
    assert out.astype(np.float32).tolist() == (values * 0.5).tolist()


def test_declared_unsupported_output_type_is_the_dst_type_rule() -> None:
    model = spec_model(
        "Quantize",
        TensorProto.FLOAT,
        3,
        out_type=TensorProto.INT16,
        out_shape=["d0", "d1", "d2"],
        scales=[0.5],
        output_dtype=TensorProto.INT16,
    )
    with pytest.raises(SpecError) as expected:
        reference.quantize(X, scales=[0.5], output_dtype=TensorProto.INT16, node="node")
    with pytest.raises(Exception) as raised:
        native_session(model)
    assert str(raised.value).endswith(str(expected.value))


def test_declared_output_types_and_shapes_as_the_converter_writes_them() -> None:
    model = spec_model(
        "DynamicQuantize",
        TensorProto.FLOAT,
        3,
        scales_type=TensorProto.FLOAT,
        zps_type=TensorProto.INT8,
        out_type=TensorProto.INT8,
        out_shape=[2, 3, 4],
    )
    out = run_session(
        native_session(model),
        {"src": X, "scales": np.array([0.5], F32), "zps": np.array([-3], np.int8)},
    )
    want = reference.dynamic_quantize(X, np.array([0.5], F32), np.array([-3], np.int8))
    assert np.array_equal(out, want)


def test_unknown_src_shape() -> None:
    """A src without shape information still runs (onnxruntime shows it as rank 0)."""
    model = spec_model("Quantize", TensorProto.FLOAT, 0, scales=[0.25], output_dtype=3)
    del model.graph.input[0].type.tensor_type.shape.dim[:]
    model.graph.input[0].type.tensor_type.ClearField("shape")
    out = run_session(native_session(model), {"src": X})
    assert np.array_equal(out, reference.quantize(X, scales=[0.25], output_dtype=3))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_agree(threads: int) -> None:
    rng = np.random.default_rng(threads)
    src = rng.standard_normal((513, 1031)).astype(F32) * 50
    scales = (rng.random(1031) + 0.1).astype(F32)
    zps = rng.integers(-20, 20, 1031).astype(np.int8)
    attrs: SpecAttributes = {"qtype": "per_channel", "axis": -1}
    got = run_native("DynamicQuantize", src, scales, zps, threads=threads, **attrs)
    want = reference.dynamic_quantize(src, scales, zps, **attrs)
    assert np.array_equal(got, want)


def test_many_sessions_and_concurrent_runs() -> None:
    """Sessions share the library's ops; one session runs from several threads."""
    import concurrent.futures

    model = spec_model("Dequantize", TensorProto.UINT8, 1, scales=[0.1], zps=[128])
    sessions = [native_session(model) for _ in range(4)]
    src = np.arange(256, dtype=np.uint8).repeat(1000)
    want = reference.dequantize(src, scales=[0.1], zps=[128])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: run_session(sessions[i % 4], {"src": src}), range(32)))
    assert all(np.array_equal(r.view(np.uint32), want.view(np.uint32)) for r in results)
