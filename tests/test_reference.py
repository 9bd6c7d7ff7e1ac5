"""quantgraph.reference against independent oracles.

* onnxruntime's own QuantizeLinear/DequantizeLinear (C++/MLAS) for s8/u8, bit for bit;
* for float8, a float8 encoder/decoder written here from the bit layouts (no ml_dtypes),
  onnx's ReferenceEvaluator and onnxruntime's QuantizeLinear -> DequantizeLinear;
* exact integer arithmetic (float64 / int64) where onnxruntime has no counterpart (s32 zps).
"""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from quantgraph import reference
from quantgraph.spec import dtypes
from tests.builders import (
    dequantize_linear_model,
    graph_input,
    make_model,
    quantize_linear_model,
    run_evaluator,
    run_ort,
    tensor_info,
)
from tests.ortref import ort_dequantize_linear, ort_quantize_linear

F32 = np.float32
FMAX = float(np.finfo(F32).max)
TINY = float(np.finfo(F32).tiny)
DENORM = float(np.finfo(F32).smallest_subnormal)
SPECIALS = np.array(
    [
        0.0,
        -0.0,
        np.nan,
        -np.nan,
        np.inf,
        -np.inf,
        FMAX,
        -FMAX,
        TINY,
        -TINY,
        DENORM,
        -DENORM,
        1e-40,
        -1e-40,
        3e-39,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        1e30,
        -1e30,
        2.0**31,
        -(2.0**31),
    ],
    F32,
)
CI = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
INT_TYPES = {"u8": (np.uint8, TensorProto.UINT8), "s8": (np.int8, TensorProto.INT8)}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def ort_quantize(
    x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int, out_type: int
) -> np.ndarray:
    """onnxruntime QuantizeLinear-21; without zp the type comes from output_dtype."""
    if zp is not None or out_type == TensorProto.UINT8:
        return ort_quantize_linear(x, scale, zp, axis=axis)
    model = quantize_linear_model(
        graph_input(x), scale, check=False, axis=axis, output_dtype=out_type
    )
    return run_ort(model, {"x": x})[0]


def float_bits_equal(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise: same float32 bits, or both NaN (NaN payload/sign is not specified)."""
    a = np.asarray(actual, F32)
    e = np.asarray(expected, F32)
    both_nan = np.isnan(a) & np.isnan(e)
    equal: np.ndarray = both_nan | (a.view(np.uint32) == e.view(np.uint32))
    return equal


def assert_float_bits_equal(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    assert actual.dtype == np.float32, actual.dtype
    assert actual.shape == expected.shape
    same = float_bits_equal(actual, expected)
    bad = np.flatnonzero(~same.reshape(-1))
    assert bad.size == 0, (
        f"{what}: {bad.size} mismatches, first at {bad[:5]}: "
        f"got {actual.reshape(-1)[bad[:5]]}, want {expected.reshape(-1)[bad[:5]]}"
    )


def channel_shape(rank: int, axis: int | None) -> tuple[int, ...]:
    if axis is None:
        return (1,) * rank
    shape = [1] * rank
    shape[axis] = -1
    return tuple(shape)


def random_scales(rng: np.random.Generator, count: int, *, powers_of_two: bool) -> np.ndarray:
    """Mostly powers of two (ties stay exact) or log-uniform values; a few extreme ones."""
    if powers_of_two:
        scales = 2.0 ** rng.integers(-12, 8, count).astype(np.float64)
    else:
        scales = 10.0 ** rng.uniform(-4, 3, count)
    scales = scales.astype(F32)
    extreme = rng.random(count) < 0.08
    scales[extreme] = rng.choice(np.array([1e-40, 1e-30, 3e30, 1e38, 1.0], F32), extreme.sum())
    negative = rng.random(count) < 0.1
    scales[negative] *= -1
    return scales


def quantize_inputs(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    axis: int | None,
    scales: np.ndarray,
    zps: np.ndarray | None,
    qmin: int,
    qmax: int,
) -> np.ndarray:
    """Random values, exact .5 ties, one-ulp neighbours of ties, saturation edges, specials."""
    cshape = channel_shape(len(shape), axis)
    sb = np.broadcast_to(scales.reshape(cshape), shape).astype(F32)
    zb = np.zeros(shape, np.int64)
    if zps is not None:
        zb = zb + zps.astype(np.int64).reshape(cshape)
    n = int(np.prod(shape))
    kind = rng.integers(0, 6, shape)
    with np.errstate(over="ignore", invalid="ignore"):
        x = _mix(rng, shape, kind, sb, zb, qmin, qmax)
    assert x.size == n
    return x


def _mix(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    kind: np.ndarray,
    sb: np.ndarray,
    zb: np.ndarray,
    qmin: int,
    qmax: int,
) -> np.ndarray:
    normal = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3.5, shape)).astype(F32) * sb
    k = rng.integers(-300, 300, shape).astype(F32)
    ties = ((k + F32(0.5)) * sb).astype(F32)
    near = np.nextafter(ties, np.where(rng.random(shape) < 0.5, np.inf, -np.inf).astype(F32))
    edge = np.where(rng.random(shape) < 0.5, qmin - zb, qmax - zb).astype(F32)
    offset = rng.choice(np.array([-1, -0.5, -0.25, 0, 0.25, 0.5, 1], F32), shape)
    edges = ((edge + offset) * sb).astype(F32)
    special = rng.choice(SPECIALS, shape)
    chosen: np.ndarray = np.select(
        [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4],
        [normal, ties, near, edges, special],
        default=(rng.standard_normal(shape) * 4).astype(F32),
    ).astype(F32)
    return chosen


def shapes_and_axes(
    rng: np.random.Generator, target: int
) -> Iterator[tuple[tuple[int, ...], int | None]]:
    """Per-tensor for ranks 1..5, per-axis for every axis (negative and positive) of ranks 1..5."""
    for rank in range(1, 6):
        layouts: list[int | None] = [None, *range(-rank, rank)]
        for axis in layouts:
            dims = [int(d) for d in rng.integers(1, 5, rank)]
            if axis is not None:
                dims[axis] = int(rng.integers(2, 9)) if rank > 1 else target
            free = [i for i in range(rank) if axis is None or i != axis % rank]
            if free:
                rest = int(np.prod([d for i, d in enumerate(dims) if i != free[-1]]))
                dims[free[-1]] = max(1, target // rest)
            yield tuple(dims), axis


# ------------------------------------------------------------------------------------------
# s8 / u8 quantize vs onnxruntime
# ------------------------------------------------------------------------------------------


def test_quantize_matches_onnxruntime_on_a_million_elements() -> None:
    rng = np.random.default_rng(20240611)
    total = 0
    configs = 0
    for name, (np_type, onnx_type) in INT_TYPES.items():
        qmin, qmax = int(np.iinfo(np_type).min), int(np.iinfo(np_type).max)
        for zp_mode in ("none", "random", "extremes"):
            for shape, axis in shapes_and_axes(rng, 5200):
                count = 1 if axis is None else shape[axis]
                scales = random_scales(rng, count, powers_of_two=rng.random() < 0.6)
                if zp_mode == "none":
                    zps = None
                elif zp_mode == "random":
                    zps = rng.integers(qmin, qmax + 1, count).astype(np_type)
                else:
                    zps = rng.choice(np.array([qmin, qmax], np_type), count)
                x = quantize_inputs(rng, shape, axis, scales, zps, qmin, qmax)
                # onnxruntime: scalar scale/zp for per-tensor, 1-D with axis for per-axis
                ort_scale = scales.reshape(()) if axis is None else scales
                ort_zp = None if zps is None else (zps.reshape(()) if axis is None else zps)
                want = ort_quantize(x, ort_scale, ort_zp, 1 if axis is None else axis, onnx_type)
                qtype = "per_tensor" if axis is None else "per_channel"
                ax = 1 if axis is None else axis
                got = reference.dynamic_quantize(
                    x, scales, zps, qtype=qtype, axis=ax, output_dtype=onnx_type
                )
                static = reference.quantize(
                    x,
                    scales=scales.tolist(),
                    zps=None if zps is None else zps.tolist(),
                    qtype=qtype,
                    axis=ax,
                    output_dtype=onnx_type,
                )
                assert got.dtype == want.dtype == np_type
                for label, result in (("dynamic", got), ("static", static)):
                    bad = np.flatnonzero(result.reshape(-1) != want.reshape(-1))
                    assert bad.size == 0, (
                        f"{label} {name} zp={zp_mode} shape={shape} axis={axis}: {bad.size} "
                        f"mismatches, e.g. x={x.reshape(-1)[bad[:4]]} got "
                        f"{result.reshape(-1)[bad[:4]]} want {want.reshape(-1)[bad[:4]]}"
                    )
                total += x.size
                configs += 1
    assert configs == 2 * 3 * 35
    assert total >= 1_000_000, total


@pytest.mark.parametrize("name", list(INT_TYPES))
def test_quantize_exhaustive_ties_and_edges_per_tensor(name: str) -> None:
    """Every k + 0.5 tie and every integer in and around the range, every zero point."""
    np_type, onnx_type = INT_TYPES[name]
    qmin, qmax = int(np.iinfo(np_type).min), int(np.iinfo(np_type).max)
    k = np.arange(-600, 600, dtype=F32)
    base = np.concatenate([k, k + F32(0.5), np.nextafter(k + F32(0.5), F32(np.inf))])
    for scale in (F32(0.5), F32(1.0), F32(0.125)):
        x = (base * scale).astype(F32)
        zps = np.arange(qmin, qmax + 1, 17).astype(np_type)
        for zp in zps:
            want = ort_quantize(x, np.array(scale), np.array(zp, np_type), 1, onnx_type)
            got = reference.dynamic_quantize(
                x, np.array([scale], F32), np.array([zp], np_type), output_dtype=onnx_type
            )
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------------
# s8 / u8 dequantize vs onnxruntime
# ------------------------------------------------------------------------------------------

DEQ_SCALES = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        FMAX,
        -FMAX,
        DENORM,
        1e-40,
        TINY,
        0.1,
        -0.1,
        1.0,
        2.0**-7,
        3.0e-5,
        1.7e3,
        123.456,
    ],
    F32,
)


def test_dequantize_matches_onnxruntime() -> None:
    rng = np.random.default_rng(7)
    total = 0
    for name, (np_type, _) in INT_TYPES.items():
        qmin, qmax = int(np.iinfo(np_type).min), int(np.iinfo(np_type).max)
        for zp_mode in ("none", "random", "extremes"):
            for shape, axis in shapes_and_axes(rng, 1500):
                count = 1 if axis is None else shape[axis]
                scales = np.where(
                    rng.random(count) < 0.5,
                    rng.choice(DEQ_SCALES, count),
                    (10.0 ** rng.uniform(-5, 4, count)).astype(F32),
                ).astype(F32)
                if zp_mode == "none":
                    zps = None
                elif zp_mode == "random":
                    zps = rng.integers(qmin, qmax + 1, count).astype(np_type)
                else:
                    zps = rng.choice(np.array([qmin, qmax], np_type), count)
                x = rng.integers(qmin, qmax + 1, shape).astype(np_type)
                x.reshape(-1)[: min(x.size, 4)] = [qmin, qmax, 0, qmin][: min(x.size, 4)]
                ort_scale = scales.reshape(()) if axis is None else scales
                ort_zp = None if zps is None else (zps.reshape(()) if axis is None else zps)
                want = ort_dequantize_linear(x, ort_scale, ort_zp, axis=1 if axis is None else axis)
                qtype = "per_tensor" if axis is None else "per_channel"
                ax = 1 if axis is None else axis
                got = reference.dynamic_dequantize(x, scales, zps, qtype=qtype, axis=ax)
                static = reference.dequantize(
                    x,
                    scales=scales.tolist(),
                    zps=None if zps is None else zps.tolist(),
                    qtype=qtype,
                    axis=ax,
                )
                what = f"{name} zp={zp_mode} shape={shape} axis={axis}"
                assert_float_bits_equal(got, want, f"dynamic {what}")
                assert_float_bits_equal(static, want, f"static {what}")
                total += x.size
    assert total >= 300_000


@pytest.mark.parametrize("name", list(INT_TYPES))
def test_dequantize_all_values_all_zero_points(name: str) -> None:
    np_type, _ = INT_TYPES[name]
    info = np.iinfo(np_type)
    x = np.arange(info.min, info.max + 1).astype(np_type)
    for zp in (info.min, info.max, 0, 1, -1 if info.min < 0 else 128):
        for scale in (F32(0.1), F32(3.0e-39), F32(FMAX)):
            want = ort_dequantize_linear(x, np.array(scale), np.array(zp, np_type))
            got = reference.dynamic_dequantize(x, np.array([scale]), np.array([zp], np_type))
            assert_float_bits_equal(got, want, f"zp={zp} scale={scale}")


@given(
    src=st.lists(st.integers(-128, 255), min_size=1, max_size=64),
    zp=st.integers(-(2**31), 2**31 - 1),
    scale=st.floats(width=32, allow_nan=True, allow_infinity=True),
    signed=st.booleans(),
)
@CI
def test_dequantize_s32_zero_points_are_exact(
    src: list[int], zp: int, scale: float, signed: bool
) -> None:
    """(src - zp) is exact in int64, rounded once to f32, times the scale in f32."""
    np_type = np.int8 if signed else np.uint8
    info = np.iinfo(np_type)
    x = np.clip(np.asarray(src), info.min, info.max).astype(np_type)
    want = (np.float64(1) * (x.astype(np.int64) - zp)).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (want * F32(scale)).astype(F32)
    got = reference.dynamic_dequantize(x, np.array([scale], F32), np.array([zp], np.int32))
    assert_float_bits_equal(got, want)
    static = reference.dequantize(x, scales=[scale], zps=[zp])
    assert_float_bits_equal(static, want)


# ------------------------------------------------------------------------------------------
# Exact oracle for quantize (any zero point, including s32 and mixed zps/dst types)
# ------------------------------------------------------------------------------------------


def exact_quantize(x: np.ndarray, scale: float, zp: int, qmin: int, qmax: int) -> np.ndarray:
    """saturate(round_half_even(f32(x / scale)) + zp), the sum taken exactly."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        q = (x.astype(F32) / F32(scale)).astype(F32).astype(np.float64)
    out = []
    for value in q:
        if np.isnan(value):
            out.append(qmin)
        elif np.isinf(value):
            out.append(qmax if value > 0 else qmin)
        else:
            rounded = int(np.rint(value))  # float64 rint is exact for float32 values
            out.append(min(qmax, max(qmin, rounded + zp)))
    return np.asarray(out, np.int64)


@given(
    x=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=32),
    scale=st.sampled_from([1.0, 0.5, 0.25, 3.0, 1e-3, 7.5e2]),
    zp=st.integers(-(2**31), 2**31 - 1),
    dst=st.sampled_from(["u8", "s8"]),
    near=st.booleans(),
)
@example(x=[-16777218.0], scale=1.0, zp=16777217, dst="u8", near=False)
@example(x=[-16777346.0], scale=1.0, zp=16777217, dst="s8", near=False)
@example(x=[16777472.0], scale=1.0, zp=-16777217, dst="u8", near=False)
@CI
def test_quantize_with_s32_zero_points_saturates_exactly(
    x: list[float], scale: float, zp: int, dst: str, near: bool
) -> None:
    """DynamicQuantize takes s32 zps; onnxruntime has none, so the oracle is exact arithmetic.

    ``near`` moves x so that x/scale lands within a few units of -zp, where the result is not
    simply saturated.
    """
    np_type, onnx_type = INT_TYPES[dst]
    qmin, qmax = int(np.iinfo(np_type).min), int(np.iinfo(np_type).max)
    values = np.asarray(x, F32)
    if near:
        with np.errstate(over="ignore", invalid="ignore"):
            values = (values % F32(600) - F32(300) - F32(zp)).astype(F32) * F32(scale)
    want = exact_quantize(values, scale, zp, qmin, qmax)
    got = reference.dynamic_quantize(
        values, np.array([scale], F32), np.array([zp], np.int32), output_dtype=onnx_type
    )
    np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"x={values} zp={zp}")
    static = reference.quantize(values, scales=[scale], zps=[zp], output_dtype=onnx_type)
    np.testing.assert_array_equal(static.astype(np.int64), want, err_msg=f"x={values} zp={zp}")


@given(
    x=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=32),
    scale=st.floats(min_value=float(F32(1e-6)), max_value=float(F32(1e6)), width=32),
    zp_type=st.sampled_from(["u8", "s8"]),
    zp=st.integers(0, 255),
    dst=st.sampled_from(["u8", "s8"]),
)
@CI
def test_quantize_with_zps_of_another_8bit_type(
    x: list[float], scale: float, zp_type: str, zp: int, dst: str
) -> None:
    """The spec allows dst s8 with zps u8 and the reverse (ONNX does not); exact oracle."""
    zp_np = INT_TYPES[zp_type][0]
    zp_value = int(np.array(zp).astype(zp_np))
    np_type, onnx_type = INT_TYPES[dst]
    qmin, qmax = int(np.iinfo(np_type).min), int(np.iinfo(np_type).max)
    values = np.asarray(x, F32)
    got = reference.dynamic_quantize(
        values, np.array([scale], F32), np.array([zp_value], zp_np), output_dtype=onnx_type
    )
    assert got.dtype == np_type
    want = exact_quantize(values, scale, zp_value, qmin, qmax)
    np.testing.assert_array_equal(got.astype(np.int64), want)


# ------------------------------------------------------------------------------------------
# round(x/s + zp), the seeds' literal formula, is not what ONNX/onnxruntime compute
# ------------------------------------------------------------------------------------------


def literal_seed_formula(x: np.ndarray, scale: F32, zp: int, qmin: int, qmax: int) -> np.ndarray:
    """round(x / scale + zp) evaluated in float32, as the oneDNN pages write it."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = np.rint((x / scale).astype(F32) + F32(zp)).astype(F32)
    y = np.where(np.isnan(y), qmin, y)
    return np.clip(y, qmin, qmax).astype(np.int64)


def test_seed_formula_differs_from_onnxruntime_but_reference_matches() -> None:
    """Search near-tie inputs: the literal formula loses the tie-break bits when it adds zp."""
    rng = np.random.default_rng(5)
    n = 200_000
    scale = F32(0.0123)
    k = rng.integers(-100, 100, n).astype(F32)
    ties = ((k + F32(0.5)) * scale).astype(F32)
    direction = rng.choice(np.array([-np.inf, 0.0, np.inf], F32), n)
    x = np.where(direction == 0, ties, np.nextafter(ties, direction)).astype(F32)
    found = []
    for np_type in (np.uint8, np.int8):
        info = np.iinfo(np_type)
        for zp in (100, -77 if info.min < 0 else 200):
            zp_array = np.array(zp, np_type)
            want = ort_quantize_linear(x, np.array(scale), zp_array)
            got = reference.dynamic_quantize(x, np.array([scale]), zp_array.reshape(1))
            np.testing.assert_array_equal(got, want)
            literal = literal_seed_formula(x, scale, zp, int(info.min), int(info.max))
            differs = np.flatnonzero(literal != want.astype(np.int64))
            for i in differs[:3]:
                found.append((np_type.__name__, zp, float(x[i]), int(literal[i]), int(want[i])))
                # what onnxruntime did: round x/s first (half to even), then add zp
                ratio = np.float64((x[i] / scale).astype(F32))
                assert int(want[i]) == int(np.clip(np.rint(ratio) + zp, info.min, info.max))
    assert found, "expected inputs where round(x/s + zp) != saturate(round(x/s) + zp)"
    assert {dtype for dtype, *_ in found} == {"uint8", "int8"}, found


# ------------------------------------------------------------------------------------------
# float8: an independent codec from the bit layouts
# ------------------------------------------------------------------------------------------

F8 = {
    "f8_e4m3": (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, 4, 3, 7),
    "f8_e5m2": (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2, 5, 2, 15),
}


def f8_decode(name: str, codes: np.ndarray) -> np.ndarray:
    """float64 value of each float8 code (NaN for NaN codes), from the bit layout."""
    _, _, ebits, mbits, bias = F8[name]
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> mbits) & ((1 << ebits) - 1)
    man = codes & ((1 << mbits) - 1)
    value = np.where(
        exp == 0,
        man / 2.0**mbits * 2.0 ** (1 - bias),
        (1 + man / 2.0**mbits) * 2.0 ** (exp - bias).astype(np.float64),
    )
    if name == "f8_e4m3":  # FN: no infinities, S.1111.111 is NaN
        value = np.where((exp == 15) & (man == 7), np.nan, value)
    else:  # IEEE-like: exponent all ones is inf (man 0) or NaN
        value = np.where(exp == 31, np.where(man == 0, np.inf, np.nan), value)
    return sign * value


def f8_encode_saturating(name: str, values: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even code, saturate to +-max (inf too), NaN stays NaN."""
    positive = np.arange(0, 128)
    decoded = f8_decode(name, positive)
    finite = positive[np.isfinite(decoded)]
    table = decoded[finite]  # increasing with the code
    top = table[-1]
    v = np.asarray(values, np.float64)
    magnitude = np.minimum(np.abs(v), top)
    hi = np.clip(np.searchsorted(table, magnitude, side="left"), 0, len(table) - 1)
    lo = np.clip(hi - 1, 0, len(table) - 1)
    d_hi = table[hi] - magnitude
    d_lo = magnitude - table[lo]
    exact = table[hi] == magnitude
    pick_hi = exact | (d_hi < d_lo) | ((d_hi == d_lo) & (finite[hi] % 2 == 0))
    code = np.where(pick_hi, finite[hi], finite[lo])
    code = np.where(np.signbit(v), code | 0x80, code)
    nan_code = 0x7F if name == "f8_e4m3" else 0x7E
    return np.where(np.isnan(v), nan_code, code).astype(np.uint8)


def f8_inputs(name: str, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Every float8 value, every midpoint (exact ties), one-ulp neighbours, randoms, specials."""
    codes = np.arange(256)
    values = f8_decode(name, codes)
    finite = np.sort(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    base = np.concatenate([finite, mids, [finite[-1] * 1.03, finite[-1] * 1.5, finite[-1] * 7]])
    base32 = base.astype(F32)
    around = np.concatenate(
        [base32, np.nextafter(base32, F32(np.inf)), np.nextafter(base32, F32(-np.inf))]
    )
    randoms = (rng.standard_normal(20_000) * 10.0 ** rng.uniform(-9, 6, 20_000)).astype(F32)
    with np.errstate(over="ignore"):
        scaled = (around.astype(F32) * F32(scale)).astype(F32)
    return np.concatenate([scaled, randoms, SPECIALS]).astype(F32)


def evaluator_quantize(x: np.ndarray, scale: np.ndarray, axis: int, out_type: int) -> np.ndarray:
    model = quantize_linear_model(
        (TensorProto.FLOAT, None), scale, check=False, axis=axis, output_dtype=out_type
    )
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.asarray(run_evaluator(ReferenceEvaluator(model), None, {"x": x})[0])


def ort_float8_roundtrip(x: np.ndarray, scale: np.ndarray, axis: int, out_type: int) -> np.ndarray:
    """onnxruntime QuantizeLinear to float8 then DequantizeLinear with scale 1 (exact)."""
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=axis, output_dtype=out_type)
    dq = helper.make_node("DequantizeLinear", ["q", "one"], ["y"])
    model = make_model(
        [q, dq],
        [tensor_info("x", TensorProto.FLOAT, x.shape)],
        [tensor_info("y", TensorProto.FLOAT, x.shape)],
        [
            onnx.numpy_helper.from_array(scale, "s"),
            onnx.numpy_helper.from_array(np.array(1.0, F32), "one"),
        ],
        check=False,
    )
    return run_ort(model, {"x": x})[0]


def f8_codes_equal(actual: np.ndarray, expected_codes: np.ndarray, name: str) -> None:
    codes = actual.view(np.uint8).reshape(-1)
    want = expected_codes.reshape(-1)
    a_nan = np.isnan(f8_decode(name, codes))
    w_nan = np.isnan(f8_decode(name, want))
    bad = np.flatnonzero((a_nan != w_nan) | (~a_nan & (codes != want)))
    assert bad.size == 0, f"{bad.size} mismatches: codes {codes[bad[:5]]} want {want[bad[:5]]}"


def test_float8_codec_matches_the_bit_layouts() -> None:
    """Sanity of the oracle itself: a few well-known codes and the saturation bounds."""
    e4 = f8_decode("f8_e4m3", np.array([0x00, 0x01, 0x08, 0x38, 0x7E, 0x7F, 0xFE, 0x80]))
    np.testing.assert_array_equal(e4[:5], [0.0, 2.0**-9, 2.0**-6, 1.0, 448.0])
    assert np.isnan(e4[5]) and e4[6] == -448.0 and np.signbit(e4[7])
    e5 = f8_decode("f8_e5m2", np.array([0x01, 0x3C, 0x7B, 0x7C, 0x7D]))
    np.testing.assert_array_equal(e5[:4], [2.0**-16, 1.0, 57344.0, np.inf])
    assert np.isnan(e5[4])
    for name, (_, np_type, *_rest) in F8.items():
        codes = np.arange(256, dtype=np.uint8)
        mine = f8_decode(name, codes)
        theirs = codes.view(np_type).astype(np.float64)
        np.testing.assert_array_equal(mine, theirs)
        assert dtypes.BY_NAME[name].float8_max == np.nanmax(mine[np.isfinite(mine)])


@pytest.mark.parametrize("name", list(F8))
@pytest.mark.parametrize("scale", [1.0, 0.25, 3.0, 0.37, 1e-6, 1e4])
def test_float8_quantize_per_tensor(name: str, scale: float) -> None:
    onnx_type, np_type, *_ = F8[name]
    rng = np.random.default_rng(int(scale * 1000) + len(name))
    x = f8_inputs(name, scale, rng)
    got = reference.quantize(x, scales=[scale], output_dtype=onnx_type)
    assert got.dtype == np_type
    with np.errstate(over="ignore", invalid="ignore"):
        quotient = (x / F32(scale)).astype(F32)
    f8_codes_equal(got, f8_encode_saturating(name, quotient), name)
    f8_codes_equal(
        got, evaluator_quantize(x, np.array(scale, F32), 1, onnx_type).view(np.uint8), name
    )
    # onnx.numpy_helper.saturate_cast, the helper onnx's own QuantizeLinear uses
    helper_cast = onnx.numpy_helper.saturate_cast(quotient, np_type)
    f8_codes_equal(got, helper_cast.view(np.uint8), name)
    assert_float_bits_equal(
        got.astype(F32), ort_float8_roundtrip(x, np.array(scale, F32), 1, onnx_type), "ort"
    )


@pytest.mark.parametrize("name", list(F8))
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_float8_quantize_per_channel(name: str, axis: int) -> None:
    onnx_type, _, *_ = F8[name]
    rng = np.random.default_rng(axis + 10)
    flat = f8_inputs(name, 1.0, rng)
    x: np.ndarray
    if axis in (1, -2):
        x = flat[: flat.size // 24 * 24].reshape(-1, 4, 6)
    else:
        x = flat[: flat.size // 6 * 6].reshape(6, -1) if axis == 0 else flat.reshape(-1, 1)[:0]
        x = x if axis == 0 else flat[: flat.size // 6 * 6].reshape(-1, 6)
    channels = x.shape[axis]
    scales = np.array([0.5, 2.0, 0.37, 1.0, 8.0, 3.3][:channels], F32)
    got = reference.quantize(
        x, scales=scales.tolist(), qtype="per_channel", axis=axis, output_dtype=onnx_type
    )
    shape = channel_shape(x.ndim, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        quotient = (x / scales.reshape(shape)).astype(F32)
    f8_codes_equal(got, f8_encode_saturating(name, quotient), name)
    f8_codes_equal(got, evaluator_quantize(x, scales, axis, onnx_type).view(np.uint8), name)
    assert_float_bits_equal(got.astype(F32), ort_float8_roundtrip(x, scales, axis, onnx_type))


@pytest.mark.parametrize("name", list(F8))
def test_float8_dequantize_every_code(name: str) -> None:
    onnx_type, np_type, *_ = F8[name]
    codes = np.arange(256, dtype=np.uint8)
    src = codes.view(np_type).reshape(16, 16)
    for scale in (1.0, 0.37, 2.0**-20, 3.0e35, 0.0, float("inf"), float("nan"), -1.5):
        got = reference.dequantize(src, scales=[scale])
        with np.errstate(over="ignore", invalid="ignore"):
            want = (f8_decode(name, codes).astype(F32) * F32(scale)).astype(F32).reshape(16, 16)
        assert_float_bits_equal(got, want, f"scale={scale}")
        # onnx's ReferenceEvaluator DequantizeLinear with a float8 input
        model = dequantize_linear_model(
            (onnx_type, [16, 16]), np.array(scale, F32), name="", check=False
        )
        with np.errstate(over="ignore", invalid="ignore"):
            theirs = run_evaluator(ReferenceEvaluator(model), None, {"x": src})[0]
        assert_float_bits_equal(got, np.asarray(theirs, F32), f"evaluator scale={scale}")
    per_channel = reference.dequantize(src, scales=[0.5] * 8 + [4.0] * 8, qtype="per_channel")
    channel_scales = np.array([0.5] * 8 + [4.0] * 8, F32)
    want = (f8_decode(name, codes).astype(F32).reshape(16, 16) * channel_scales).astype(F32)
    assert_float_bits_equal(per_channel, want)


@pytest.mark.parametrize("name", list(F8))
def test_float8_dequantize_vs_onnxruntime(name: str) -> None:
    """Float8 src as an initializer (numpy cannot feed float8 to onnxruntime)."""
    onnx_type, np_type, *_ = F8[name]
    codes = np.arange(256, dtype=np.uint8)
    src = codes.view(np_type)
    for scale in (1.0, 0.37, 3.0e35):
        x = onnx.helper.make_tensor("x", onnx_type, [256], codes.tobytes(), raw=True)
        model = dequantize_linear_model(x, np.array(scale, F32), name="", check=False)
        want = run_ort(model)[0]
        assert_float_bits_equal(reference.dequantize(src, scales=[scale]), want, str(scale))


@given(
    x=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64),
    scale=st.floats(width=32, min_value=float(F32(1e-30)), max_value=float(F32(1e30))),
    negative=st.booleans(),
    name=st.sampled_from(list(F8)),
)
@CI
def test_float8_quantize_property(x: list[float], scale: float, negative: bool, name: str) -> None:
    onnx_type, *_ = F8[name]
    s = -scale if negative else scale
    values = np.asarray(x, F32)
    got = reference.quantize(values, scales=[s], output_dtype=onnx_type)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        quotient = (values / F32(s)).astype(F32)
    f8_codes_equal(got, f8_encode_saturating(name, quotient), name)


# ------------------------------------------------------------------------------------------
# The oneDNN unit-test cases (shape {1, 2, 2})
# ------------------------------------------------------------------------------------------


def test_onednn_dequantize_case() -> None:
    src = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)
    got = reference.dequantize(src, scales=[0.1], zps=[10])
    np.testing.assert_allclose(got, np.array([-1, 0, 1, 2], F32).reshape(1, 2, 2), rtol=1e-6)
    assert got.dtype == np.float32
    exact = ((src.astype(np.int64) - 10).astype(F32) * F32(0.1)).astype(F32)
    assert_float_bits_equal(got, exact)


def test_onednn_quantize_case() -> None:
    src = np.array([-1, 0, 1, 2], F32).reshape(1, 2, 2)
    got = reference.quantize(
        src, scales=[0.1, 0.2], qtype="per_channel", axis=1, output_dtype=TensorProto.INT8
    )
    np.testing.assert_array_equal(got, np.array([-10, 0, 5, 10], np.int8).reshape(1, 2, 2))
    assert got.dtype == np.int8


def test_onednn_dynamic_quantize_case() -> None:
    src = np.array([-1, 0, 1, 2], F32).reshape(1, 2, 2)
    got = reference.dynamic_quantize(src, np.array([0.1], F32), np.array([10], np.uint8))
    np.testing.assert_array_equal(got, np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2))
    assert got.dtype == np.uint8


def test_onednn_dynamic_dequantize_case() -> None:
    src = np.array([0, 10, 20, 30], np.uint8).reshape(1, 2, 2)
    got = reference.dynamic_dequantize(src, np.array([0.1], F32))
    np.testing.assert_allclose(got, np.array([0, 1, 2, 3], F32).reshape(1, 2, 2), rtol=1e-6)
    assert got.dtype == np.float32


def test_reference_does_not_modify_inputs() -> None:
    x = np.array([1.5, np.nan, -3.0], F32)
    s = np.array([0.5], F32)
    z = np.array([3], np.int8)
    copies = [a.copy() for a in (x, s, z)]
    reference.dynamic_quantize(x, s, z)
    q = np.array([1, 2, 3], np.int8)
    reference.dynamic_dequantize(q, s, z)
    for before, after in zip(copies, (x, s, z), strict=True):
        np.testing.assert_array_equal(before, after)
