"""The differential fuzzer (tools/fuzz/) at CI size, and robustness checks it does not reach.

* The ``ci`` profile (250 examples per op) must find no mismatch between the native backend,
  the Python backend, quantgraph.reference and onnxruntime's QuantizeLinear/DequantizeLinear,
  and every call that breaks a rule must be that rule's error on every runner.
* The fuzzer must notice a planted bug (it is not comparing something with itself).
* Zero-size tensors and rank-0 tensors (per_tensor) on both backends.
* Data types outside the spec's tables, and a missing required input: a clear error naming the
  op (and the type), at session creation or at run time, never a crash.

``QUANTGRAPH_FUZZ_SEED`` picks another seed for the CI profile (default: a fixed one).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import quantgraph
from quantgraph import reference
from quantgraph.backends import native_available
from quantgraph.backends.onednn import unavailable_reason as onednn_unavailable
from quantgraph.errors import BackendError
from quantgraph.reference import onnx_arithmetic
from quantgraph.reference.compare import compare
from quantgraph.spec import OPS as SPEC_OPS
from quantgraph.spec import PER_CHANNEL, PER_TENSOR, dtypes
from tests.builders import BACKENDS, Operand, requires_native, spec_op_model
from tools import fuzz

ROOT = Path(__file__).resolve().parent.parent
NATIVE = native_available()
ONEDNN = onednn_unavailable() is None
SEED = int(os.environ.get("QUANTGRAPH_FUZZ_SEED", "20240601"))


@pytest.fixture(autouse=True)
def _quiet_python_backend() -> Iterator[None]:
    """The Python backend logs every rejected call; these tests make many on purpose."""
    logger = logging.getLogger("quantgraph.backends.python")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    yield
    logger.setLevel(level)


# -- the CI profile -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ci_report() -> fuzz.FuzzReport:
    return fuzz.run("ci", seed=SEED)


def test_ci_profile_finds_no_mismatch(ci_report: fuzz.FuzzReport) -> None:
    assert ci_report.mismatches == 0, (
        f"seed {ci_report.seed}: {ci_report.mismatches} mismatch(es):\n"
        + json.dumps(ci_report.details[:5], indent=1, default=str)
    )


def test_ci_profile_covers_every_op_and_runner(ci_report: fuzz.FuzzReport) -> None:
    profile = fuzz.PROFILES["ci"]
    assert set(ci_report.ops) == set(fuzz.OP_NAMES)
    for op, stats in ci_report.ops.items():
        assert stats.examples == profile.examples_per_op, op
        assert stats.error_examples > 0, op
        # Each rule-breaking call is checked on the reference, the native and the Python
        # backend (or the Python backend's documented BackendError).
        runners = 4 if NATIVE else 2  # reference, native (both arithmetics), python
        checked = stats.errors_checked + stats.python_not_runnable
        assert checked >= stats.error_examples * (runners - 1), op
        assert stats.onnxruntime_examples > 0, op
        assert stats.compared.get("onnxruntime-vs-reference", 0) > 0, op
        assert stats.compared.get("python-vs-reference", 0) > 0, op
        if NATIVE:
            assert stats.compared.get("native-vs-reference", 0) > 0, op
            assert stats.compared.get("native_onednn-vs-reference", 0) > 0, op
    # float8, s32 zps on DynamicQuantize, ...: the Python backend's documented BackendError.
    assert ci_report.ops["Quantize"].python_not_runnable > 0
    assert ci_report.ops["DynamicQuantize"].python_not_runnable > 0
    payload = ci_report.to_dict()
    json.dumps(payload)  # serializable
    assert payload["totals"]["examples"] == 4 * profile.examples_per_op


def test_ci_profile_draws_every_row_and_runs_onednn(ci_report: fuzz.FuzzReport) -> None:
    """Every row of every op's table with every zps type (4-bit src, f16/bf16 scales and dst
    included), per_group with 4-bit src, and the onednn backend where oneDNN is loaded."""
    for op in SPEC_OPS.values():
        drawn = set(ci_report.ops[op.name].rows)
        for row in op.type_rows:
            scales = row.dst.name if op.name == "DynamicDequantize" else "f32"
            prefix = f"{row.src}->{row.dst} scales {scales} zps "
            assert any(r.startswith(prefix) for r in drawn), (op.name, prefix)
        if not op.is_static:  # and every zps type (each of ~40 pairs: too rare to demand)
            for zps in {"none", *(z.name for row in op.type_rows for z in row.zps)}:
                assert any(f" zps {zps}" in r for r in drawn), (op.name, zps)
    grouped = [r for r in ci_report.ops["DynamicDequantize"].rows if r.endswith("per_group")]
    assert any(r.startswith(("s4", "u4")) for r in grouped), grouped
    if ONEDNN:
        compared = sum(s.compared.get("onednn-vs-reference", 0) for s in ci_report.ops.values())
        assert compared > 0
        assert ci_report.total("onednn_refused") > 0  # v3.2 refuses 4-bit rows, for one


@pytest.mark.parametrize("op", ["Quantize", "Dequantize"])
@pytest.mark.parametrize(
    "backend",
    ["python", pytest.param("native", marks=requires_native)],
)
def test_static_op_run_time_error_names_the_models_op(backend: str, op: str) -> None:
    quantize = op == "Quantize"
    src = _X if quantize else _X.astype(np.uint8)
    model = _model(
        op,
        {"src": F if quantize else U8},
        U8 if quantize else F,
        scales=[1.0, 2.0],  # src has 3 channels along axis 1
        qtype=PER_CHANNEL,
        axis=1,
    )
    session = quantgraph.InferenceSession(model, backend)
    with pytest.raises(Exception, match=r"\[rule per-channel-scale-count\]") as caught:
        session.run(None, {"src": src})
    assert re.search(rf"(?<![A-Za-z]){op} node '", str(caught.value)), str(caught.value)


def test_long_profile_is_at_least_100k_examples() -> None:
    assert fuzz.PROFILES["long"].examples_per_op * len(fuzz.OP_NAMES) >= 100_000


def _big_zero_point_cases() -> list[fuzz.Case]:
    """Quantize calls with s32 zero points beyond 2^24 and at the kernels' clamp-mode edges,
    src aimed at the clamp bounds."""
    found = []
    zero_points = [2**24 + 1, -(2**24) - 1, 2**25 + 3, 2**31 - 1, -(2**31), 2**30 + 7]
    # Where the native kernels switch between clamping to qmin - zp, qmax - zp in float32 and
    # clamping loosely then saturating (simd_quantize.h, TightBoundsExact).
    zero_points += [2**24 - 256, 2**24 - 255, -(2**24) + 256, -(2**24) + 255, 0, 255, -128]
    for op in ("DynamicQuantize", "Quantize"):
        for dst in (dtypes.S8, dtypes.U8):
            for zp in zero_points:
                qmin, qmax = dst.int_range
                edges = np.array([qmin - zp, qmax - zp], np.float64)
                steps = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1e6, -1e6])
                src = (edges[:, None] + steps[None, :]).reshape(-1).astype(np.float32)
                src = np.concatenate([src, np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)])
                sig = fuzz.Signature(op, "f32", dst.name, "s32", 1, PER_TENSOR, None, dst.onnx)
                zps = np.array([zp], np.int32 if op == "DynamicQuantize" else np.int64)
                found.append(fuzz.Case(sig, src, np.array([1.0], np.float32), zps, None, 0))
    return found


@requires_native
def test_s32_zero_points_beyond_2_24() -> None:
    fuzzer = fuzz.Fuzzer(fuzz.PROFILES["ci"], fuzz.FuzzReport("targeted", 0, 0, True))
    for case in _big_zero_point_cases():
        want = fuzzer.run_reference(case)
        got = fuzzer.run_native(case)
        assert isinstance(want, np.ndarray) and isinstance(got, np.ndarray), (want, got)
        np.testing.assert_array_equal(got, want, err_msg=case.sig.describe())


def test_the_fuzzer_notices_a_planted_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference that is off by one in one element must show up as mismatches.

    The Python backend runs its own float32 numpy kernels (quantgraph.backends.python.kernels),
    so like the native backend and onnxruntime it disagrees with the planted bug.
    """
    honest = reference.quantize_values

    def off_by_one(*args: Any, **kwargs: Any) -> np.ndarray:
        result = honest(*args, **kwargs).copy()
        if result.size and result.dtype.kind in "iu":
            flat = result.reshape(-1)
            flat[0] = flat[0] + 1 if flat[0] < np.iinfo(result.dtype).max else flat[0] - 1
        return result

    # Where reference.run reads it, and where the package re-exports it for the backends.
    for module in (onnx_arithmetic, reference):
        monkeypatch.setattr(module, "quantize_values", off_by_one)
    report = fuzz.run("ci", max_examples=40, seed=SEED, ops=["DynamicQuantize"])
    assert report.mismatches > 0
    runners = {detail["runner"] for detail in report.details}
    assert "onnxruntime" in runners
    if NATIVE:
        assert "native" in runners
    assert "python" in runners


def test_cli_json(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "tools.fuzz", "--examples", "3", "--seed", "1", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["seed"] == 1
    assert payload["totals"]["examples"] == 12
    assert payload["totals"]["mismatches"] == 0
    assert set(payload["ops"]) == set(fuzz.OP_NAMES)
    for stats in payload["ops"].values():
        assert {"examples", "elements", "mismatches", "errors_checked", "seconds"} <= set(stats)
    bad = subprocess.run(
        [sys.executable, "-m", "tools.fuzz", "--examples", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert "--examples" in bad.stderr


# -- zero-size and rank-0 tensors -----------------------------------------------------------------


def _case(
    op: str,
    shape: tuple[int, ...],
    quantized: str,
    *,
    axis: int | None = None,
    with_zps: bool = True,
) -> fuzz.Case:
    """A valid call: per_tensor when ``axis`` is None, else per_channel on ``axis``."""
    rng = np.random.default_rng(abs(hash((op, shape, quantized, axis))) % 2**32)
    channels = 1 if axis is None else shape[axis]
    scales = rng.uniform(0.01, 2.0, channels).astype(np.float32)
    q = dtypes.BY_NAME[quantized]
    static = op in fuzz.STATIC_OPS
    zps: np.ndarray | None = None
    if with_zps and not q.is_float8:
        low, high = q.int_range
        zps = rng.integers(low, high + 1, channels).astype(np.int64 if static else q.numpy)
    quantize = op in fuzz.QUANTIZE_OPS
    n = int(np.prod(shape, dtype=np.int64))
    if quantize:
        src = (rng.standard_normal(n) * 100).astype(np.float32).reshape(shape)
    else:
        src = rng.integers(0, 256, n).astype(np.uint8).view(q.numpy).reshape(shape)
    sig = fuzz.Signature(
        op,
        "f32" if quantize else quantized,
        quantized if quantize else "f32",
        None if zps is None else ("s32" if static else quantized),
        len(shape),
        PER_TENSOR if axis is None else PER_CHANNEL,
        axis,
        q.onnx if quantize else None,
    )
    return fuzz.Case(sig, src, scales, zps, None, 0)


SMALL_CASES = [
    pytest.param(
        op, shape, quantized, axis, id=f"{op}-{quantized}-{'x'.join(map(str, shape))}-{axis}"
    )
    for op in fuzz.OP_NAMES
    for quantized in (("s8", "u8", "f8_e4m3", "f8_e5m2") if op in fuzz.STATIC_OPS else ("s8", "u8"))
    for shape, axis in [
        ((), None),  # rank 0, per_tensor
        ((0,), None),
        ((2, 0, 3), None),
        ((2, 0, 3), 1),  # per_channel over zero channels
        ((2, 0, 3), -1),  # per_channel, three channels of nothing
        ((0,), 0),
    ]
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("op", "shape", "quantized", "axis"), SMALL_CASES)
def test_zero_size_and_rank_0(
    backend: str, op: str, shape: tuple[int, ...], quantized: str, axis: int | None
) -> None:
    case = _case(op, shape, quantized, axis=axis)
    fuzzer = fuzz.Fuzzer(fuzz.PROFILES["ci"], fuzz.FuzzReport("targeted", 0, 0, NATIVE))
    want = fuzzer.run_reference(case)
    assert isinstance(want, np.ndarray)
    assert want.shape == shape
    run = fuzzer.run_native if backend == "native" else fuzzer.run_python
    got = run(case)
    if backend == "python" and fuzz.python_limit(case) is not None:
        assert isinstance(got, BackendError), got
        assert "use backend='native'" in str(got)
        return
    assert isinstance(got, np.ndarray), got
    assert got.shape == shape and got.dtype == want.dtype
    assert compare(case.sig.op, want, got).agree


# -- data types outside the tables, missing inputs ------------------------------------------------

_X = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
_SCALE = np.array([0.5], np.float32)


def _model(
    op: str,
    inputs: dict[str, int],
    dst_type: int | None,
    **attributes: Any,
) -> onnx.ModelProto:
    """One op; ``inputs`` maps input names ("" for an absent one) to element types."""
    operands: list[Operand] = [
        "" if not name else (elem, ["a", "b"] if name == "src" else ["c"])
        for name, elem in inputs.items()
    ]
    return spec_op_model(
        op, *operands, dst_type=dst_type, name="bad_node", graph_name="bad", **attributes
    )


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    numpy_of = {
        TensorProto.FLOAT: np.float32,
        TensorProto.UINT8: np.uint8,
        TensorProto.INT8: np.int8,
        TensorProto.INT16: np.int16,
        TensorProto.INT32: np.int32,
        TensorProto.INT64: np.int64,
        TensorProto.FLOAT16: np.float16,
        TensorProto.DOUBLE: np.float64,
    }
    feeds = {}
    for value in model.graph.input:
        dtype = numpy_of[value.type.tensor_type.elem_type]
        feeds[value.name] = (_X if value.name == "src" else _SCALE).astype(dtype)
    return feeds


F, U8, S16 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT16
# (id, op, inputs, declared dst type or None, attributes, bad type's name)
BAD_TYPES: list[tuple[str, str, dict[str, int], int | None, dict[str, Any], str]] = [
    (
        "ddq-src-int16",
        "DynamicDequantize",
        {"src": S16, "scales": F, "zps": S16},
        F,
        {},
        "int16",
    ),
    (
        "ddq-src-int16-no-zps",
        "DynamicDequantize",
        {"src": S16, "scales": F},
        F,
        {},
        "int16",
    ),
    (
        "ddq-src-int32",
        "DynamicDequantize",
        {"src": TensorProto.INT32, "scales": F},
        F,
        {},
        "int32",
    ),
    (
        "ddq-zps-int16",
        "DynamicDequantize",
        {"src": U8, "scales": F, "zps": S16},
        F,
        {},
        "int16",
    ),
    (
        "ddq-scales-double",
        "DynamicDequantize",
        {"src": U8, "scales": TensorProto.DOUBLE},
        F,
        {},
        "double",
    ),
    (
        "dq-src-f16",
        "DynamicQuantize",
        {"src": TensorProto.FLOAT16, "scales": F},
        U8,
        {},
        "float16",
    ),
    (
        "dq-scales-double",
        "DynamicQuantize",
        {"src": F, "scales": TensorProto.DOUBLE, "zps": U8},
        U8,
        {},
        "double",
    ),
    (
        "dq-zps-int64",
        "DynamicQuantize",
        {"src": F, "scales": F, "zps": TensorProto.INT64},
        U8,
        {},
        "int64",
    ),
    (
        "dq-output-int16-untyped",
        "DynamicQuantize",
        {"src": F, "scales": F},
        None,
        {"output_dtype": S16},
        "int16",
    ),
    (
        "q-output-int16-untyped",
        "Quantize",
        {"src": F},
        None,
        {"scales": [0.5], "output_dtype": S16},
        "int16",
    ),
    # dst declared with the unsupported type too (the native library used to infer u8 here and
    # onnxruntime then reported a type mismatch instead of rule dst-type).
    (
        "dq-output-int16-declared",
        "DynamicQuantize",
        {"src": F, "scales": F},
        S16,
        {"output_dtype": S16},
        "int16",
    ),
    (
        "q-output-int16-declared",
        "Quantize",
        {"src": F},
        S16,
        {"scales": [0.5], "output_dtype": S16},
        "int16",
    ),
    (
        "q-output-int32",
        "Quantize",
        {"src": F},
        None,
        {"scales": [0.5], "output_dtype": TensorProto.INT32},
        "int32",
    ),
    (
        "deq-src-int16",
        "Dequantize",
        {"src": S16},
        F,
        {"scales": [0.5]},
        "int16",
    ),
    (
        "deq-src-int32",
        "Dequantize",
        {"src": TensorProto.INT32},
        F,
        {"scales": [0.5]},
        "int32",
    ),
]


def _bad_type_params() -> list[Any]:
    params = []
    for name, op, inputs, dst, attributes, type_name in BAD_TYPES:
        for backend in ("python", "native"):
            marks: list[Any] = [requires_native] if backend == "native" else []
            params.append(
                pytest.param(
                    backend,
                    op,
                    inputs,
                    dst,
                    attributes,
                    type_name,
                    id=f"{name}-{backend}",
                    marks=marks,
                )
            )
    return params


def _outcome(backend: str, model: onnx.ModelProto) -> BaseException | None:
    """The error session creation or one run raises; None when the call succeeds."""
    try:
        session = quantgraph.InferenceSession(model, backend)
        session.run(None, _feeds(model))
    except Exception as error:
        return error
    return None


@pytest.mark.parametrize(
    ("backend", "op", "inputs", "dst", "attributes", "type_name"), _bad_type_params()
)
def test_type_outside_the_table_is_a_clear_error(
    backend: str,
    op: str,
    inputs: dict[str, int],
    dst: int | None,
    attributes: dict[str, Any],
    type_name: str,
) -> None:
    error = _outcome(backend, _model(op, inputs, dst, **attributes))
    assert error is not None, "a type outside the spec's table ran"
    message = str(error)
    assert re.search(rf"\b{op}\b", message) and "bad_node" in message, message
    # The spec's name (s32) or ONNX's (int32) of the offending type.
    names = {
        type_name,
        {"int32": "s32", "float": "f32", "float16": "f16"}.get(type_name, type_name),
    }
    assert any(name in message for name in names), message
    assert "use backend='native'" not in message, message  # native rejects it as well
    assert "[rule " in message and "-type]" in message, message


MISSING: list[tuple[str, str, dict[str, int], dict[str, Any], str]] = [
    ("dynamic-quantize-no-scales", "DynamicQuantize", {"src": F}, {}, "missing-input"),
    ("dynamic-quantize-empty-scales", "DynamicQuantize", {"src": F, "": F}, {}, "missing-input"),
    ("dynamic-dequantize-no-scales", "DynamicDequantize", {"src": U8}, {}, "missing-input"),
    ("quantize-no-scales-attribute", "Quantize", {"src": F}, {}, "missing-attribute"),
    ("dequantize-no-scales-attribute", "Dequantize", {"src": U8}, {}, "missing-attribute"),
]


def _missing_params() -> list[Any]:
    params = []
    for name, op, inputs, attributes, rule in MISSING:
        for backend in ("python", "native"):
            marks: list[Any] = [requires_native] if backend == "native" else []
            params.append(
                pytest.param(
                    backend, op, inputs, attributes, rule, id=f"{name}-{backend}", marks=marks
                )
            )
    return params


@pytest.mark.parametrize(("backend", "op", "inputs", "attributes", "rule"), _missing_params())
def test_missing_required_input_is_the_rule_error(
    backend: str, op: str, inputs: dict[str, int], attributes: dict[str, Any], rule: str
) -> None:
    dst = U8 if op in fuzz.QUANTIZE_OPS else F
    error = _outcome(backend, _model(op, inputs, dst, **attributes))
    assert error is not None
    message = str(error)
    assert f"{op} node 'bad_node'" in message, message
    assert f"[rule {rule}]" in message and "'scales'" in message, message


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("feed", "expected"),
    [
        ({"src": _X.astype(np.float64)}, "Unexpected input data type"),
        ({"scales": None}, "Required inputs (['scales']) are missing"),
    ],
    ids=["float64-src", "scales-not-fed"],
)
def test_bad_feed_is_onnxruntime_error_then_the_session_works(
    backend: str, feed: dict[str, np.ndarray | None], expected: str
) -> None:
    model = _model("DynamicQuantize", {"src": F, "scales": F, "zps": U8}, U8)
    session = quantgraph.InferenceSession(model, backend)
    good: dict[str, np.ndarray] = {"src": _X, "scales": _SCALE, "zps": np.array([3], np.uint8)}
    bad = {k: v for k, v in {**good, **feed}.items() if v is not None}
    with pytest.raises(Exception, match=re.escape(expected)):
        session.run(None, bad)
    np.testing.assert_array_equal(
        session.run(None, good)[0],
        reference.dynamic_quantize(_X, _SCALE, good["zps"]),
    )
