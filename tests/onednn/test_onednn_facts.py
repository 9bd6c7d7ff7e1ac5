"""The measured facts about oneDNN (docs/onednn.md, the facts file), asserted so that a oneDNN
that changes them is noticed: its quantize arithmetic on ties, its dequantize, the rows it
refuses, and the per-channel zero points it would collapse (refused by quantgraph)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import quantgraph
from quantgraph import reference
from quantgraph.backends import onednn
from quantgraph.reference.compare import compare
from tests.builders import requires_onednn, run_quantgraph, spec_op_model

pytestmark = requires_onednn

F, S8, U8 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8
SCALE = np.float32(0.0123)


def _ties() -> np.ndarray:
    """4,096 values x = (k + 0.5) * s in float32, k in [-128, 128): ties of x / s, near enough."""
    k = np.arange(-2048, 2048) % 256 - 128
    return ((k + 0.5) * SCALE).astype(np.float32)


def _dynamic_quantize(src: np.ndarray, zp: int) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    model = spec_op_model(
        "DynamicQuantize",
        (F, list(src.shape)),
        np.array([SCALE]),
        np.array([zp], np.uint8),
        dst_type=U8,
    )
    return model, [src, np.array([SCALE]), np.array([zp], np.uint8)]


def test_quantize_ties_follow_onednns_arithmetic_not_onnxs() -> None:
    src = _ties()
    model, inputs = _dynamic_quantize(src, 128)
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    onnx_result = reference.run("DynamicQuantize", inputs)
    onednn_model = reference.run("DynamicQuantize", inputs, arithmetic="onednn")
    differ = compare("dst", onnx_result, got).mismatches
    assert differ > 0, "oneDNN now rounds ties as ONNX does: update docs/onednn.md"
    assert compare("dst", onednn_model, got).mismatches == 0
    assert int(np.max(np.abs(onnx_result.astype(int) - got.astype(int)))) == 1


def test_native_onednn_arithmetic_equals_onednn_on_ties() -> None:
    src = _ties()
    model, _ = _dynamic_quantize(src, 128)
    (expected,) = run_quantgraph(model, "onednn", {"src": src})
    session = quantgraph.InferenceSession(model, "native", arithmetic="onednn")
    (got,) = session.run(None, {"src": src})
    np.testing.assert_array_equal(got, expected)


def test_random_normal_data_quantizes_identically() -> None:
    src = np.random.default_rng(0).standard_normal(65536).astype(np.float32)
    model, inputs = _dynamic_quantize(src, 128)
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    assert compare("dst", reference.run("DynamicQuantize", inputs), got).mismatches == 0


@pytest.mark.parametrize("src_type", [S8, U8])
@pytest.mark.parametrize(
    ("per_channel", "with_zps"), [(False, False), (False, True), (True, False)]
)
def test_dequantize_is_onnxs_arithmetic(src_type: int, per_channel: bool, with_zps: bool) -> None:
    rng = np.random.default_rng(1)
    dtype = np.int8 if src_type == S8 else np.uint8
    info = np.iinfo(dtype)
    src = rng.integers(info.min, info.max + 1, size=(8, 16, 32)).astype(dtype)
    count = 16 if per_channel else 1
    scales = rng.uniform(0.001, 1.0, count).astype(np.float32)
    zps = rng.integers(info.min, info.max + 1, count).astype(dtype) if with_zps else None
    attrs: dict[str, Any] = {"qtype": "per_channel", "axis": 1} if per_channel else {}
    model = spec_op_model(
        "DynamicDequantize", (src_type, [8, 16, 32]), scales, zps, dst_type=F, **attrs
    )
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    want = reference.run("DynamicDequantize", [src, scales, zps], attrs)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _error(model: object) -> str:
    with pytest.raises(Exception) as caught:
        session = quantgraph.InferenceSession(model, "onednn")  # type: ignore[arg-type]
        session.run(None, {"src": np.ones((1, 2, 2), np.float32)})
    return str(caught.value)


def test_static_per_channel_zps_that_onednn_would_collapse_are_refused() -> None:
    """oneDNN v3.2 uses zps[0] for every channel (Dequantize u8 [10,20,30,40], axis 1, scales
    [1,1], zps [5,10] gives [5,15,25,35] instead of [5,15,20,30]): refused at session creation."""
    model = spec_op_model(
        "Dequantize",
        (U8, [1, 2, 2]),
        [1.0, 1.0],
        [5, 10],
        dst_type=F,
        qtype="per_channel",
        axis=1,
        name="dq_pc",
    )
    with pytest.raises(Exception, match=r"dq_pc.*zps") as caught:
        quantgraph.InferenceSession(model, "onednn")
    assert "zps[0]" in str(caught.value) or "collapse" in str(caught.value)


def test_per_channel_dynamic_quantize_with_zps_is_refused_by_onednn() -> None:
    model = spec_op_model(
        "DynamicQuantize",
        (F, [1, 2, 2]),
        np.array([0.1, 0.2], np.float32),
        np.array([1, 2], np.uint8),
        dst_type=U8,
        qtype="per_channel",
        axis=1,
        name="dq_zps",
    )
    message = _error(model)
    assert "dq_zps" in message and "oneDNN" in message, message
    assert "\n" not in message.strip() or "Traceback" not in message


def test_per_channel_dynamic_dequantize_with_zps_is_refused_at_session_creation() -> None:
    """v3.2 fails it when executing ("could not execute a primitive"), v3.13 when compiling
    (dnnl_unimplemented): either way the session is refused, naming the node."""
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
    with pytest.raises(Exception, match=r"ddq_zps.*oneDNN"):
        quantgraph.InferenceSession(model, "onednn")


def test_per_channel_dynamic_quantize_on_the_last_axis_runs() -> None:
    """The facts file said oneDNN refuses it; measured on v3.2 and v3.13: it runs, and computes
    oneDNN's arithmetic."""
    src = _ties().reshape(64, 64)
    scales = np.random.default_rng(2).uniform(0.001, 0.1, 64).astype(np.float32)
    model = spec_op_model(
        "DynamicQuantize", (F, [64, 64]), scales, dst_type=U8, qtype="per_channel", axis=1
    )
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    attrs = {"qtype": "per_channel", "axis": 1}
    want = reference.run("DynamicQuantize", [src, scales, None], attrs, arithmetic="onednn")
    np.testing.assert_array_equal(got, want)


def test_float8_quantize_does_not_saturate_or_is_refused() -> None:
    """v3.13: 1000 / 0.5 becomes NaN (ONNX saturates to 448); v3.2 has no f8 in its Graph API."""
    model = spec_op_model(
        "Quantize",
        (F, [4]),
        [0.5],
        dst_type=TensorProto.FLOAT8E4M3FN,
        float_output=True,
        name="q_f8",
    )
    src = np.array([1000.0, -1000.0, 1.0, 0.0], np.float32)
    if onednn.version_tuple() < (3, 5, 0):
        with pytest.raises(Exception, match="q_f8"):
            quantgraph.InferenceSession(model, "onednn").run(None, {"src": src})
        return
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    assert np.isnan(got[0]) and np.isnan(got[1])
    assert got[2] == 2.0 and got[3] == 0.0


def test_the_page_of_this_onednn_is_current() -> None:
    """docs/onednn.md's section for the loaded oneDNN equals a fresh run (the row-by-row
    evidence stays true as kernels and models change)."""
    from tools.onednn_conformance import DOC_PATH, main

    page = Path(__file__).resolve().parents[2] / DOC_PATH
    assert main(["--check", str(page)]) == 0


# Zero points that are all 0 mean what absent ones mean; oneDNN refuses per_channel zps even
# then, and every symmetric QDQ weight has them: they reach oneDNN as absent.
PC: dict[str, Any] = {"qtype": "per_channel", "axis": 1}
SCALES2 = np.array([0.1, 0.2], np.float32)
Q_SRC = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)


def test_constant_zero_zps_run_as_absent() -> None:
    model = spec_op_model(
        "DynamicDequantize", (U8, [1, 2, 2]), SCALES2, np.zeros(2, np.uint8), dst_type=F, **PC
    )
    (got,) = run_quantgraph(model, "onednn", {"src": Q_SRC})
    want = reference.run("DynamicDequantize", [Q_SRC, SCALES2, np.zeros(2, np.uint8)], PC)
    np.testing.assert_array_equal(got, want)


def test_zps_fed_at_run_time_are_looked_at_per_call() -> None:
    model = spec_op_model(
        "DynamicDequantize", (U8, [1, 2, 2]), SCALES2, (U8, [2]), dst_type=F, name="fed", **PC
    )
    session = quantgraph.InferenceSession(model, "onednn")  # nothing refused yet
    zero = np.zeros(2, np.uint8)
    (got,) = session.run(None, {"src": Q_SRC, "zps": zero})
    np.testing.assert_array_equal(
        got, reference.run("DynamicDequantize", [Q_SRC, SCALES2, zero], PC)
    )
    with pytest.raises(Exception, match=r"fed.*oneDNN.*with u8 zps"):
        session.run(None, {"src": Q_SRC, "zps": np.array([1, 2], np.uint8)})


def test_static_zero_zps_run_as_absent() -> None:
    model = spec_op_model("Dequantize", (U8, [1, 2, 2]), [0.1, 0.2], [0, 0], dst_type=F, **PC)
    (got,) = run_quantgraph(model, "onednn", {"src": Q_SRC})
    np.testing.assert_array_equal(
        got, reference.run("Dequantize", [Q_SRC], {**PC, "scales": [0.1, 0.2], "zps": [0, 0]})
    )


def test_s8_zero_zps_still_decide_an_s8_dst() -> None:
    model = spec_op_model(
        "DynamicQuantize", (F, [1, 2, 2]), SCALES2, np.zeros(2, np.int8), dst_type=S8, **PC
    )
    src = np.array([-1, 0, 1, 2], np.float32).reshape(1, 2, 2)
    (got,) = run_quantgraph(model, "onednn", {"src": src})
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got.ravel(), [-10, 0, 5, 10])
