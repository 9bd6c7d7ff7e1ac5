"""The Python backend (onnxruntime-extensions kernels) against quantgraph.reference."""

from __future__ import annotations

import re
import time
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto

import quantgraph
from quantgraph import reference
from quantgraph.errors import BackendError, BackendLimit, KernelError
from quantgraph.reference.compare import compare
from quantgraph.spec import SpecError
from tests.builders import fed_spec_op_model, run_spec_op, spec_op_model

F32 = np.float32
CI = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
Feed = dict[str, np.ndarray]
NP: dict[str, type[np.integer[Any]]] = {"u8": np.uint8, "s8": np.int8, "s32": np.int32}
ONNX = {"u8": TensorProto.UINT8, "s8": TensorProto.INT8, "s32": TensorProto.INT32}


def same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if actual.dtype == np.float32:
        both_nan = np.isnan(actual) & np.isnan(expected)
        bits = actual.view(np.uint32) == expected.view(np.uint32)
        assert np.all(both_nan | bits), f"got {actual}, want {expected}"
    else:
        np.testing.assert_array_equal(actual, expected)


# ------------------------------------------------------------------------------------------
# strategies
# ------------------------------------------------------------------------------------------

FLOATS = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.integers(-1200, 1200).map(lambda k: k / 4),  # exact .5 ties for power-of-two scales
    st.sampled_from([0.0, -0.0, 1e-45, -1e-40, 3.4028235e38, -3.4028235e38]),
)
SCALES = st.one_of(
    st.sampled_from([0.5, 0.25, 1.0, 2.0, 0.125, 1e-3, -0.5]),
    st.floats(min_value=float(F32(1e-4)), max_value=float(F32(1e4)), width=32),
)


@st.composite
def layouts(draw: Any) -> tuple[tuple[int, ...], str, int, int]:
    """(shape, qtype, axis, channel count); axis may be negative; per_tensor axis is arbitrary."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    qtype = draw(st.sampled_from(["per_tensor", "per_channel"]))
    axis = draw(st.integers(-rank, rank - 1))
    count = shape[axis] if qtype == "per_channel" else 1
    return shape, qtype, axis, count


def float_src(draw: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(draw(hnp.arrays(F32, shape, elements=FLOATS)), F32)


def int_values(draw: Any, name: str, count: int) -> np.ndarray:
    info = np.iinfo(NP[name])
    values = st.one_of(
        st.integers(int(info.min), int(info.max)), st.sampled_from([info.min, info.max])
    )
    return np.asarray(draw(st.lists(values, min_size=count, max_size=count)), NP[name])


# ------------------------------------------------------------------------------------------
# differential tests
# ------------------------------------------------------------------------------------------


@given(
    data=st.data(),
    zp_type=st.sampled_from(["u8", "s8", "s32", None]),
    output_dtype=st.sampled_from([None, "u8", "s8"]),
)
@CI
def test_dynamic_quantize_matches_reference(
    data: Any, zp_type: str | None, output_dtype: str | None
) -> None:
    """Every dst with every zps type, s32 ones and a dst other than the zps type included (the
    backend runs those as DynamicQuantize_<dst>)."""
    shape, qtype, axis, count = data.draw(layouts())
    src = float_src(data.draw, shape)
    scales = np.asarray(data.draw(st.lists(SCALES, min_size=count, max_size=count)), F32)
    inputs: dict[str, np.ndarray] = {"scales": scales}
    zps = None
    if zp_type is not None:
        zps = int_values(data.draw, zp_type, count)
        inputs["zps"] = zps
    attributes: dict[str, Any] = {"qtype": qtype, "axis": axis}
    if output_dtype is not None:
        attributes["output_dtype"] = ONNX[output_dtype]
    dst = output_dtype or (zp_type if zp_type in ("u8", "s8") else "u8")
    got = run_spec_op("python", "DynamicQuantize", src, inputs, ONNX[dst], **attributes)
    want = reference.dynamic_quantize(src, scales, zps, **attributes)
    same(got, want)


@given(
    data=st.data(),
    src_type=st.sampled_from(["u8", "s8"]),
    zp_type=st.sampled_from(["u8", "s8", "s32", None]),
)
@CI
def test_dynamic_dequantize_matches_reference(
    data: Any, src_type: str, zp_type: str | None
) -> None:
    shape, qtype, axis, count = data.draw(layouts())
    src = np.asarray(data.draw(hnp.arrays(NP[src_type], shape)), NP[src_type])
    scales = np.asarray(
        data.draw(
            st.lists(
                st.one_of(SCALES, st.sampled_from([0.0, float("inf"), float("nan"), 1e-45])),
                min_size=count,
                max_size=count,
            )
        ),
        F32,
    )
    inputs: dict[str, np.ndarray] = {"scales": scales}
    zps = None
    if zp_type is not None:
        zps = int_values(data.draw, zp_type, count)
        inputs["zps"] = zps
    got = run_spec_op(
        "python", "DynamicDequantize", src, inputs, TensorProto.FLOAT, qtype=qtype, axis=axis
    )
    same(got, reference.dynamic_dequantize(src, scales, zps, qtype=qtype, axis=axis))


@given(data=st.data(), dst=st.sampled_from(["u8", "s8"]), with_zps=st.booleans())
@CI
def test_static_quantize_matches_reference(data: Any, dst: str, with_zps: bool) -> None:
    shape, qtype, axis, count = data.draw(layouts())
    src = float_src(data.draw, shape)
    scales = [float(s) for s in data.draw(st.lists(SCALES, min_size=count, max_size=count))]
    attributes: dict[str, Any] = {"qtype": qtype, "axis": axis, "scales": scales}
    zps = None
    if with_zps:
        zps = [int(z) for z in int_values(data.draw, dst, count)]
        attributes["zps"] = zps
    if dst == "s8" or data.draw(st.booleans()):
        attributes["output_dtype"] = ONNX[dst]
    got = run_spec_op("python", "Quantize", src, {}, ONNX[dst], **attributes)
    want = reference.quantize(
        src, scales=scales, zps=zps, qtype=qtype, axis=axis, output_dtype=ONNX[dst]
    )
    same(got, want)


@given(
    data=st.data(),
    src_type=st.sampled_from(["u8", "s8"]),
    zp_range=st.sampled_from(["src", "s32", None]),
)
@CI
def test_static_dequantize_matches_reference(
    data: Any, src_type: str, zp_range: str | None
) -> None:
    shape, qtype, axis, count = data.draw(layouts())
    src = np.asarray(data.draw(hnp.arrays(NP[src_type], shape)), NP[src_type])
    scales = [float(s) for s in data.draw(st.lists(SCALES, min_size=count, max_size=count))]
    attributes: dict[str, Any] = {"qtype": qtype, "axis": axis, "scales": scales}
    zps = None
    if zp_range is not None:
        zps = [
            int(z) for z in int_values(data.draw, src_type if zp_range == "src" else "s32", count)
        ]
        attributes["zps"] = zps
    got = run_spec_op("python", "Dequantize", src, {}, TensorProto.FLOAT, **attributes)
    same(got, reference.dequantize(src, scales=scales, zps=zps, qtype=qtype, axis=axis))


def test_defaults_are_filled_in() -> None:
    """No qtype/axis/zps attributes or inputs: per_tensor, axis 1, zero zps, u8 dst."""
    src = np.array([[-2.5, -0.5, 0.5, 1.5, 2.5, 300.0]], F32)
    scales = np.array([1.0], F32)
    got = run_spec_op("python", "DynamicQuantize", src, {"scales": scales}, TensorProto.UINT8)
    same(got, np.array([[0, 0, 0, 2, 2, 255]], np.uint8))
    q = np.array([[0, 1, 255]], np.uint8)
    got = run_spec_op("python", "DynamicDequantize", q, {"scales": scales}, TensorProto.FLOAT)
    same(got, np.array([[0, 1, 255]], F32))
    per_channel = run_spec_op(
        "python",
        "DynamicDequantize",
        q,
        {"scales": np.array([1.0, 2.0, 4.0], F32)},
        TensorProto.FLOAT,
        qtype="per_channel",
        axis=-1,
    )
    same(per_channel, np.array([[0, 2, 1020]], F32))


# ------------------------------------------------------------------------------------------
# the oneDNN hand-checkable cases (shape {1, 2, 2})
# ------------------------------------------------------------------------------------------

X = np.array([-1.0, 0.0, 1.0, 2.0], F32).reshape(1, 2, 2)
Q = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)


def test_onednn_dequantize() -> None:
    got = run_spec_op("python", "Dequantize", Q, {}, TensorProto.FLOAT, scales=[0.1], zps=[10])
    np.testing.assert_allclose(got, np.array([-1, 0, 1, 2], F32).reshape(1, 2, 2), rtol=1e-6)
    same(got, reference.dequantize(Q, scales=[0.1], zps=[10]))


def test_onednn_quantize() -> None:
    got = run_spec_op(
        "python",
        "Quantize",
        X,
        {},
        TensorProto.INT8,
        qtype="per_channel",
        axis=1,
        scales=[0.1, 0.2],
        output_dtype=TensorProto.INT8,
    )
    same(got, np.array([-10, 0, 5, 10], np.int8).reshape(1, 2, 2))


@pytest.mark.parametrize("zps_type", [np.uint8, np.int32], ids=["u8", "s32"])
def test_onednn_dynamic_quantize(zps_type: type) -> None:
    """oneDNN's hand case, with its u8 zps and as s32 zps (dst u8 by default)."""
    inputs: Feed = {"scales": np.array([0.1], F32), "zps": np.array([10], zps_type)}
    got = run_spec_op("python", "DynamicQuantize", X, inputs, TensorProto.UINT8)
    same(got, np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2))
    same(got, reference.dynamic_quantize(X, inputs["scales"], inputs["zps"]))


def test_onednn_dynamic_dequantize() -> None:
    got = run_spec_op(
        "python", "DynamicDequantize", Q, {"scales": np.array([0.1], F32)}, TensorProto.FLOAT
    )
    np.testing.assert_allclose(got, np.array([0, 1, 2, 3], F32).reshape(1, 2, 2), rtol=1e-6)
    same(got, reference.dynamic_dequantize(Q, np.array([0.1], F32)))


# ------------------------------------------------------------------------------------------
# kernel errors: KernelError naming op and rule; the process and the session survive
# ------------------------------------------------------------------------------------------


def symbolic_model(
    op: str, src_type: int, zps_type: int | None, **attributes: Any
) -> onnx.ModelProto:
    """A model whose scales/zps lengths are symbolic, so any count can be fed."""
    dst = TensorProto.FLOAT if op == "DynamicDequantize" else (zps_type or TensorProto.UINT8)
    return spec_op_model(
        op,
        (src_type, ["A", "B", "C"]),
        (TensorProto.FLOAT, ["K"]),
        None if zps_type is None else (zps_type, ["K"]),
        dst_type=dst,
        name="the_node",
        **attributes,
    )


def test_kernel_errors_raise_and_the_session_recovers() -> None:
    session = quantgraph.InferenceSession(
        symbolic_model(
            "DynamicQuantize", TensorProto.FLOAT, TensorProto.UINT8, qtype="per_channel"
        ),
        "python",
    )
    good: Feed = {"src": X, "scales": np.array([0.1, 0.2], F32), "zps": np.array([10, 0], np.uint8)}
    expected = reference.dynamic_quantize(X, good["scales"], good["zps"], qtype="per_channel")
    same(session.run(None, good)[0], expected)

    count: Feed = {
        **good,
        "scales": np.array([0.1, 0.2, 0.3], F32),
        "zps": np.array([1, 2, 3], np.uint8),
    }
    with pytest.raises(KernelError) as caught:
        session.run(None, count)
    assert str(caught.value) == (
        "DynamicQuantize node 'the_node': per_channel needs one scale per element of src along "
        "axis 1 (2); got 3 [rule per-channel-scale-count]"
    )
    assert isinstance(caught.value, RuntimeError)
    same(session.run(None, good)[0], expected)  # the next run works and raises nothing

    zero: Feed = {**good, "scales": np.array([0.1, 0.0], F32)}
    with pytest.raises(
        KernelError,
        match=r"^DynamicQuantize node 'the_node': scales\[1\] = 0\.0: .*\[rule scale-value\]$",
    ):
        session.run(None, zero)
    zps: Feed = {**good, "zps": np.array([10], np.uint8)}
    with pytest.raises(KernelError, match=r"\(2\); got 1 \[rule zps-count\]$"):
        session.run(None, zps)
    same(session.run(None, good)[0], expected)


def test_dequantize_kernel_error() -> None:
    session = quantgraph.InferenceSession(
        symbolic_model(
            "DynamicDequantize", TensorProto.INT8, TensorProto.INT32, qtype="per_channel", axis=-1
        ),
        "python",
    )
    src = np.arange(12, dtype=np.int8).reshape(1, 3, 4)
    with pytest.raises(KernelError) as caught:
        session.run(None, {"src": src, "scales": np.ones(3, F32), "zps": np.zeros(3, np.int32)})
    assert str(caught.value) == (
        "DynamicDequantize node 'the_node': per_channel needs one scale per element of src along "
        "axis -1 (4); got 3 [rule per-channel-scale-count]"
    )
    scales = np.array([1.0, 0.0, np.inf, np.nan], F32)  # any scale is fine for dequantize
    got = session.run(None, {"src": src, "scales": scales, "zps": np.full(4, 5, np.int32)})[0]
    same(
        got,
        reference.dynamic_dequantize(
            src, scales, np.full(4, 5, np.int32), qtype="per_channel", axis=-1
        ),
    )


def test_static_quantize_zero_scale_names_the_models_op() -> None:
    """The user's model has a static Quantize: the error should name that op, not the
    DynamicQuantize the Python backend rewrote it into (at session creation or at run time)."""
    model = fed_spec_op_model("Quantize", X, {}, TensorProto.UINT8, scales=[0.0])
    try:
        session = quantgraph.InferenceSession(model, "python")
        session.run(None, {"src": X})
    except (KernelError, BackendError, SpecError) as error:
        message = str(error)
    else:
        pytest.fail("a zero scale in a Quantize node was accepted")
    assert re.search(
        r"(?<!Dynamic)Quantize node '[^']*': scales\[0\] = 0\.0: .* \[rule scale-value\]", message
    ), message


def test_kernel_error_does_not_leak_into_another_session() -> None:
    """Errors recorded by a plain onnxruntime session (quantgraph.session_options) must not be
    raised by the next run of an unrelated quantgraph session."""
    feed: Feed = {"src": X, "scales": np.array([0.0], F32), "zps": np.array([10], np.uint8)}
    model = fed_spec_op_model(
        "DynamicQuantize",
        X,
        {k: v for k, v in feed.items() if k != "src"},
        TensorProto.UINT8,
        qtype="per_tensor",
        axis=1,
    )
    raw = ort.InferenceSession(
        model.SerializeToString(),
        quantgraph.session_options("python"),
        providers=["CPUExecutionProvider"],
    )
    raw.run(None, feed)  # records a scale-value error that nobody raises
    session = quantgraph.InferenceSession(model, "python")
    good: Feed = {**feed, "scales": np.array([0.5], F32)}
    same(session.run(None, good)[0], reference.dynamic_quantize(X, good["scales"], good["zps"]))


def test_kernel_error_is_raised_with_parallel_execution() -> None:
    """With ExecutionMode.ORT_PARALLEL the kernel runs on an inter-op thread; the error must
    still reach run() instead of returning the filler output."""
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    inputs: Feed = {"scales": np.array([0.0], F32), "zps": np.array([10], np.uint8)}
    model = fed_spec_op_model("DynamicQuantize", X, inputs, TensorProto.UINT8)
    session = quantgraph.InferenceSession(model, "python", options=options)
    with pytest.raises(KernelError, match=r"\[rule scale-value\]"):
        session.run(None, {"src": X, **inputs})


# ------------------------------------------------------------------------------------------
# models the Python backend cannot run
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "src", "inputs", "out_type", "attributes"),
    [
        pytest.param(
            "Quantize",
            X,
            {},
            TensorProto.FLOAT8E4M3FN,
            {"scales": [1.0], "output_dtype": TensorProto.FLOAT8E4M3FN},
            id="quantize-f8e4m3",
        ),
        pytest.param(
            "Quantize",
            X,
            {},
            TensorProto.FLOAT8E5M2,
            {"scales": [1.0], "output_dtype": TensorProto.FLOAT8E5M2},
            id="quantize-f8e5m2",
        ),
        pytest.param(
            "Dequantize",
            X.astype(ml_dtypes.float8_e4m3fn),
            {},
            TensorProto.FLOAT,
            {"scales": [1.0]},
            id="dequantize-f8e4m3",
        ),
        pytest.param(
            "Dequantize",
            X.astype(ml_dtypes.float8_e5m2),
            {},
            TensorProto.FLOAT,
            {"scales": [1.0]},
            id="dequantize-f8e5m2",
        ),
    ],
)
def test_unsupported_models_raise_backend_error(
    op: str,
    src: np.ndarray,
    inputs: dict[str, np.ndarray],
    out_type: int,
    attributes: dict[str, Any],
) -> None:
    model = fed_spec_op_model(op, src, inputs, out_type, **attributes)
    with pytest.raises(BackendError) as caught:
        quantgraph.InferenceSession(model, "python")
    message = str(caught.value)
    assert f"{op}_node" in message, message  # names the node
    assert "native" in message  # and says what to do
    assert isinstance(caught.value, BackendLimit)  # typed: nobody needs to read the words


def test_backend_error_leaves_the_callers_model_alone() -> None:
    model = fed_spec_op_model("Quantize", X, {}, TensorProto.UINT8, scales=[0.5], zps=[3])
    before = model.SerializeToString()
    session = quantgraph.InferenceSession(model, "python")
    assert model.SerializeToString() == before
    same(session.run(None, {"src": X})[0], reference.quantize(X, scales=[0.5], zps=[3]))


# ------------------------------------------------------------------------------------------
# a large tensor goes through the contiguous-array hook, not tolist()
# ------------------------------------------------------------------------------------------


def _best_of(runs: int, call: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return best, result


def test_large_tensor_runs_fast() -> None:
    """4M elements: the fast hook takes ~0.05 s per run here, the stock tolist() path
    0.5-0.9 s; the bound sits between them with room for a loaded machine."""
    rng = np.random.default_rng(0)
    n = 4 * 1024 * 1024
    src = (rng.standard_normal(n) * 50).astype(F32).reshape(1024, 4096)
    scales = np.array([0.37], F32)
    zps = np.array([-3], np.int8)
    model = fed_spec_op_model(
        "DynamicQuantize", src, {"scales": scales, "zps": zps}, TensorProto.INT8
    )
    session = quantgraph.InferenceSession(model, "python")
    feed: Feed = {"src": src, "scales": scales, "zps": zps}
    session.run(None, feed)  # warm-up
    quantize_seconds, (got,) = _best_of(3, lambda: session.run(None, feed))
    same(got, reference.dynamic_quantize(src, scales, zps))

    dq = fed_spec_op_model(
        "DynamicDequantize", got, {"scales": scales, "zps": zps}, TensorProto.FLOAT
    )
    dq_session = quantgraph.InferenceSession(dq, "python")
    dq_feed: Feed = {"src": got, "scales": scales, "zps": zps}
    dq_session.run(None, dq_feed)
    dequantize_seconds, (back,) = _best_of(3, lambda: dq_session.run(None, dq_feed))
    same(back, reference.dynamic_dequantize(got, scales, zps))
    assert quantize_seconds < 0.3, quantize_seconds
    assert dequantize_seconds < 0.3, dequantize_seconds


def test_concurrent_runs_keep_their_own_errors() -> None:
    """Two threads share one session: only the thread that fed a bad scale gets KernelError."""
    from concurrent.futures import ThreadPoolExecutor

    inputs: Feed = {"scales": np.array([0.5], F32), "zps": np.array([3], np.uint8)}
    session = quantgraph.InferenceSession(
        fed_spec_op_model("DynamicQuantize", X, inputs, TensorProto.UINT8), "python"
    )
    good: Feed = {"src": X, **inputs}
    bad: Feed = {**good, "scales": np.array([0.0], F32)}
    expected = reference.dynamic_quantize(X, inputs["scales"], inputs["zps"])

    def worker(feed: dict[str, np.ndarray]) -> list[str]:
        outcomes = []
        for _ in range(25):
            try:
                same(session.run(None, feed)[0], expected)
                outcomes.append("ok")
            except KernelError as error:
                outcomes.append(error.args[0].rsplit(" ", 1)[-1])
        return outcomes

    with ThreadPoolExecutor(2) as pool:
        good_runs, bad_runs = pool.map(worker, [good, bad])
    assert good_runs == ["ok"] * 25
    assert bad_runs == ["scale-value]"] * 25


@pytest.mark.parametrize("zps", [None, "u8", "s32"])
def test_per_group_runs_on_the_python_backend(zps: str | None) -> None:
    """group_shape is a list, which onnxruntime-extensions cannot read: the preparation
    stamps it as text and the kernel parses it back."""
    rng = np.random.default_rng(4)
    src = rng.integers(0, 256, (4, 6)).astype(np.uint8)
    inputs = {"scales": rng.uniform(0.01, 2, (2, 2)).astype(np.float32)}
    if zps == "u8":
        inputs["zps"] = rng.integers(0, 256, (2, 2)).astype(np.uint8)
    elif zps == "s32":
        inputs["zps"] = rng.integers(-1000, 1000, (2, 2)).astype(np.int32)
    attributes: dict[str, Any] = {"qtype": "per_group", "group_shape": [2, 3]}
    got = run_spec_op("python", "DynamicDequantize", src, inputs, TensorProto.FLOAT, **attributes)
    want = reference.dynamic_dequantize(src, inputs["scales"], inputs.get("zps"), **attributes)
    assert compare("dst", want, got).agree


@pytest.mark.parametrize(
    ("src_type", "scales_type", "named"),
    [
        ("int4", np.float32, "src type s4"),
        ("uint8", np.float16, "scales type f16"),
    ],
)
def test_types_extensions_cannot_carry_are_one_clear_error(
    src_type: str, scales_type: type, named: str
) -> None:
    src = np.zeros((2, 2), getattr(ml_dtypes, src_type, None) or np.dtype(src_type))
    model = spec_op_model("DynamicDequantize", src, np.ones(1, scales_type), name="dq")
    with pytest.raises(BackendLimit, match=rf"DynamicDequantize node 'dq' has {named}: "):
        quantgraph.InferenceSession(model, "python")
