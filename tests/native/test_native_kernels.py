"""The native kernels against the numpy reference (bit for bit) and onnxruntime's own
QuantizeLinear / DequantizeLinear, over every row of the spec's type tables, ranks 0..6,
zero-size tensors, every axis (negative too), with and without zero points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

from quantgraph.spec import dtypes
from tests.native.native_support import (
    describe_mismatch,
    float_data,
    mismatches,
    mismatches_nan_equal,
    quantized_data,
    requires_native,
    run_native,
    run_ort_qdq,
    run_reference,
    scale_values,
    zp_values,
)

pytestmark = requires_native

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZP_DTYPES: dict[str, np.dtype] = {
    "s8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "s32": np.dtype(np.int32),
}
INT_DST = {"s8": TensorProto.INT8, "u8": TensorProto.UINT8}
F8_DST = {"f8_e4m3": TensorProto.FLOAT8E4M3FN, "f8_e5m2": TensorProto.FLOAT8E5M2}


def spec_onnx(dtype: np.dtype) -> int:
    """The ONNX element type of a spec dtype (every dtype these tests produce is one)."""
    found = dtypes.from_numpy(dtype)
    assert found is not None, dtype
    return found.onnx


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    """A src shape (rank 0..6, zero-size sometimes), qtype and axis."""
    rank = draw(st.integers(0, 6))
    max_dim = {0: 1, 1: 300, 2: 40, 3: 12}.get(rank, 5)
    shape = tuple(draw(st.integers(0 if draw(st.booleans()) else 1, max_dim)) for _ in range(rank))
    per_channel = rank > 0 and draw(st.booleans())
    axis = draw(st.integers(-rank, rank - 1)) if per_channel else draw(st.integers(-3, 3))
    return {
        "shape": shape,
        "qtype": "per_channel" if per_channel else "per_tensor",
        "axis": axis,
        "channels": shape[axis] if per_channel else 1,
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def ort_axis(layout: dict[str, Any]) -> int | None:
    return layout["axis"] if layout["qtype"] == "per_channel" else None


def first(scales: np.ndarray) -> float:
    return float(scales[0]) if scales.size else 1.0


def check(src: np.ndarray, got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert mismatches(got, want) == 0, f"{what}: {describe_mismatch(src, got, want)}"


# ---- DynamicQuantize -------------------------------------------------------------------


@SETTINGS
@given(layout=layouts(), zps=st.sampled_from([None, "s8", "u8", "s32"]), data=st.data())
def test_dynamic_quantize(layout: dict[str, Any], zps: str | None, data: st.DataObject) -> None:
    rng = np.random.default_rng(layout["seed"])
    # dst: from the zps type, or output_dtype (0 = default) explicitly.
    output_dtype = data.draw(st.sampled_from([0, TensorProto.INT8, TensorProto.UINT8]))
    scales = scale_values(rng, layout["channels"])
    src = float_data(rng, layout["shape"], first(scales))
    zp = None if zps is None else zp_values(rng, layout["channels"], ZP_DTYPES[zps])
    attrs = {"qtype": layout["qtype"], "axis": layout["axis"], "output_dtype": output_dtype}
    want = run_reference("DynamicQuantize", src, scales, zp, **attrs)
    got = run_native("DynamicQuantize", src, scales, zp, **attrs)
    check(src, got, want, "reference")
    # onnxruntime's QuantizeLinear takes zero points of the dst type only.
    if zp is None or (zp.dtype == want.dtype and output_dtype in (0, spec_onnx(zp.dtype))):
        out_type = spec_onnx(want.dtype)
        builtin = run_ort_qdq("QuantizeLinear", src, scales, zp, ort_axis(layout), out_type)
        check(src, got, builtin, "onnxruntime QuantizeLinear")


# ---- Quantize (static) -----------------------------------------------------------------


@SETTINGS
@given(
    layout=layouts(),
    dst=st.sampled_from(["s8", "u8", "f8_e4m3", "f8_e5m2", "default"]),
    with_zps=st.booleans(),
)
def test_quantize(layout: dict[str, Any], dst: str, with_zps: bool) -> None:
    rng = np.random.default_rng(layout["seed"])
    output_dtype = 0 if dst == "default" else dtypes.BY_NAME[dst].onnx
    is_f8 = dst.startswith("f8")
    scales = scale_values(rng, layout["channels"])
    src = float_data(rng, layout["shape"], first(scales))
    zps = zp_values(rng, layout["channels"], np.dtype(np.int32)) if with_zps and not is_f8 else None
    attrs: dict[str, Any] = {
        "qtype": layout["qtype"],
        "axis": layout["axis"],
        "scales": [float(s) for s in scales],
        "output_dtype": output_dtype,
    }
    if zps is not None:
        attrs["zps"] = [int(z) for z in zps]
    want = run_reference("Quantize", src, **attrs)
    got = run_native("Quantize", src, **attrs)
    check(src, got, want, "reference")
    out_type = spec_onnx(want.dtype)
    if zps is None:
        builtin = run_ort_qdq("QuantizeLinear", src, scales, None, ort_axis(layout), out_type)
        if dst == "f8_e5m2":  # onnxruntime writes NaN as 0x7F, ml_dtypes as 0x7E
            assert mismatches_nan_equal(got, builtin) == 0
        else:
            check(src, got, builtin, "onnxruntime QuantizeLinear")
    elif np.all((zps >= -128) & (zps <= 255)):
        zp_typed = zps.astype(want.dtype)
        if np.array_equal(zp_typed.astype(np.int32), zps):
            builtin = run_ort_qdq(
                "QuantizeLinear", src, scales, zp_typed, ort_axis(layout), out_type
            )
            check(src, got, builtin, "onnxruntime QuantizeLinear")


# ---- DynamicDequantize -----------------------------------------------------------------


@SETTINGS
@given(
    layout=layouts(),
    src_type=st.sampled_from(["s8", "u8"]),
    zps=st.sampled_from([None, "s8", "u8", "s32"]),
)
def test_dynamic_dequantize(layout: dict[str, Any], src_type: str, zps: str | None) -> None:
    rng = np.random.default_rng(layout["seed"])
    src = quantized_data(rng, layout["shape"], ZP_DTYPES[src_type])
    scales = scale_values(rng, layout["channels"], allow_zero=True)
    zp = None if zps is None else zp_values(rng, layout["channels"], ZP_DTYPES[zps])
    attrs = {"qtype": layout["qtype"], "axis": layout["axis"]}
    want = run_reference("DynamicDequantize", src, scales, zp, **attrs)
    got = run_native("DynamicDequantize", src, scales, zp, **attrs)
    check(src, got, want, "reference")
    if zp is None or zp.dtype == src.dtype:
        builtin = run_ort_qdq(
            "DequantizeLinear", src, scales, zp, ort_axis(layout), TensorProto.FLOAT
        )
        check(src, got, builtin, "onnxruntime DequantizeLinear")


# ---- Dequantize (static) ---------------------------------------------------------------


@SETTINGS
@given(
    layout=layouts(),
    src_type=st.sampled_from(["s8", "u8", "f8_e4m3", "f8_e5m2"]),
    with_zps=st.booleans(),
)
def test_dequantize(layout: dict[str, Any], src_type: str, with_zps: bool) -> None:
    rng = np.random.default_rng(layout["seed"])
    src_dtype = dtypes.BY_NAME[src_type].numpy
    is_f8 = src_type.startswith("f8")
    src = quantized_data(rng, layout["shape"], src_dtype)
    scales = scale_values(rng, layout["channels"], allow_zero=True)
    zps = zp_values(rng, layout["channels"], np.dtype(np.int32)) if with_zps and not is_f8 else None
    attrs: dict[str, Any] = {
        "qtype": layout["qtype"],
        "axis": layout["axis"],
        "scales": [float(s) for s in scales],
    }
    if zps is not None:
        attrs["zps"] = [int(z) for z in zps]
    want = run_reference("Dequantize", src, **attrs)
    got = run_native("Dequantize", src, **attrs)
    check(src, got, want, "reference")
    if zps is None:
        builtin = run_ort_qdq(
            "DequantizeLinear", src, scales, None, ort_axis(layout), TensorProto.FLOAT
        )
        if is_f8:  # NaN payloads may differ between implementations
            assert mismatches_nan_equal(got, builtin) == 0
        else:
            check(src, got, builtin, "onnxruntime DequantizeLinear")


# ---- every ISA, geometries around vector widths, chunks and runs -----------------------

SHAPES = [
    (1, 1),
    (3, 7),
    (2, 5, 13),
    (4, 17, 3),
    (1, 33, 1),
    (5, 64),
    (3, 1000),
    (700, 300),  # > the parallel threshold: chunk edges fall inside runs
    (2, 3, 131_077),
    (131_101,),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize", "DynamicDequantize", "Dequantize"])
def test_every_isa_every_axis(isa: str, op: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(abs(hash((isa, op, shape))) % 2**32)
    rank = len(shape)
    for axis in [None, *range(-rank, rank)]:
        channels = 1 if axis is None else shape[axis]
        qtype = "per_tensor" if axis is None else "per_channel"
        attrs: dict[str, Any] = {"qtype": qtype, "axis": 1 if axis is None else axis}
        for dst in ("s8", "u8", "f8_e4m3", "f8_e5m2"):
            is_f8 = dst.startswith("f8")
            if op.startswith("Dynamic") and is_f8:
                continue
            scales = scale_values(rng, channels, allow_zero="Dequantize" in op)
            zp_dtype = ZP_DTYPES[dst] if not is_f8 else np.dtype(np.int32)
            zp = None if is_f8 else zp_values(rng, channels, zp_dtype)
            kw = dict(attrs)
            if op == "Quantize":
                kw["output_dtype"] = dtypes.BY_NAME[dst].onnx
            if "Quantize" in op and "Dequantize" not in op:
                src = float_data(rng, shape, first(scales))
            else:
                src = quantized_data(rng, shape, dtypes.BY_NAME[dst].numpy)
            if op in ("Quantize", "Dequantize") and zp is not None:
                zp = zp_values(rng, channels, np.dtype(np.int32))  # the zps attribute is s32
            args = (src, scales, zp)
            want = run_reference(op, *args, **kw)
            got = run_native(op, *args, isa=isa, **kw)
            check(src, got, want, f"{op} {dst} axis={axis} isa={isa}")


@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize"])
def test_s32_zero_points_clamp_exactly(isa: str, op: str) -> None:
    """Zero points whose float32 bounds qmin - zp / qmax - zp are inexact (|zp| > 2^24),
    including ones that round inwards, and the extremes of s32 (scalar fallback)."""
    zps = np.array(
        [2**25 + 1, -(2**25) - 3, 2**24 + 1, 2**30 - 1, -(2**30) + 1, 2**30, 2**31 - 1, -(2**31)],
        np.int32,
    )
    scales = np.array([1.0, 0.5, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0], np.float32)
    rng = np.random.default_rng(7)
    bounds = np.concatenate([-128 - zps.astype(np.int64), 255 - zps.astype(np.int64)])
    near = (bounds[:, None] + np.arange(-70, 71)[None, :]).astype(np.float32).reshape(-1)
    src = np.concatenate([near, -near, float_data(rng, (4000,))]).astype(np.float32)
    src = src[: src.size // 8 * 8].reshape(-1, 8)
    for dst in (TensorProto.INT8, TensorProto.UINT8):
        kw: dict[str, Any] = {"qtype": "per_channel", "axis": 1, "output_dtype": dst}
        for subset in (
            slice(0, 8),
            slice(0, 3),
            slice(0, 1),
            slice(1, 2),
            slice(3, 6),
            slice(7, 8),
        ):
            s, z = scales[subset], zps[subset]
            x = src[:, subset] if s.size > 1 else src[:, :1].copy()
            attrs = kw if s.size > 1 else dict(kw, qtype="per_tensor")
            want = run_reference(op, x, s, z, **attrs)
            got = run_native(op, x, s, z, isa=isa, **attrs)
            check(x, got, want, f"{op} dst={dst} zps={z.tolist()}")


@pytest.mark.parametrize(
    "zps",
    [
        [32767, -32768, 0, 255, -128, 1, 32767, -32768],  # all fit int16: the vec16 kernels
        [32768, -32768, 0, 255, -128, 1, 32767, -32769],  # two do not: the int32 kernels
    ],
    ids=["int16", "int32"],
)
@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize", "DynamicDequantize", "Dequantize"])
def test_innermost_zero_points_at_the_int16_edge(isa: str, op: str, zps: list[int]) -> None:
    """Per-channel zero points on the innermost axis are narrowed to int16 when all fit; the
    edges of int16 and one past them give the reference's bits, with rows enough to block."""
    channels = 8 * 37  # not a multiple of any vector width
    z = np.resize(np.array(zps, np.int32), channels)
    rng = np.random.default_rng(11)
    scales = scale_values(rng, channels, allow_zero=False)
    attrs: dict[str, Any] = {"qtype": "per_channel", "axis": 1}
    for rows in (1, 9, 300):
        if "Dequantize" in op:
            src = quantized_data(rng, (rows, channels), np.dtype(np.uint8))
        else:
            # Around every channel's bounds qmin - zp and qmax - zp, and random values.
            near = np.stack([(-128.0 - z) * scales, (255.0 - z) * scales] * 2).astype(np.float32)
            src = np.concatenate([near, float_data(rng, (rows, channels))])[:rows]
        for dst in (TensorProto.INT8, TensorProto.UINT8):
            kw = dict(attrs, output_dtype=dst) if op == "Quantize" else attrs
            x = src.view(np.int8) if "Dequantize" in op and dst == TensorProto.INT8 else src
            want = run_reference(op, x, scales, z, **kw)
            got = run_native(op, x, scales, z, isa=isa, **kw)
            check(x, got, want, f"{op} dst={dst} rows={rows} zps={zps}")


@pytest.mark.parametrize(
    "shape",
    [
        (3001, 16),
        (1000, 64),
        (17, 384),
        (700, 384),
        (5, 8),
        (4099, 24),
        (333, 48),
        (90, 128),
        (65, 512),
        (2049, 8, 2),
    ],
    ids=lambda s: "x".join(map(str, s)),
)
@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize", "DynamicDequantize", "Dequantize"])
def test_narrow_innermost_flat_patterns(isa: str, op: str, shape: tuple[int, ...]) -> None:
    """Short per-channel patterns (channels * inner a few hundred elements at most) run flat:
    each task's rows as one run whose parameters repeat (issue #16); rows that do not fill a
    period, chunk edges inside rows, zero points of both signs and around the bounds."""
    channels = shape[1]
    rng = np.random.default_rng(sum(shape) + len(op))
    scales = scale_values(rng, channels, allow_zero="Dequantize" in op)
    attrs: dict[str, Any] = {"qtype": "per_channel", "axis": 1}
    for zps in (
        np.resize(np.array([128, 0, 255, 3], np.int32), channels),
        np.resize(np.array([-128, 5, 127, -1, 0], np.int32), channels),
        np.resize(np.array([40_000, -3, 70_000, 128, -40_000], np.int32), channels),  # not int16
    ):
        if "Dequantize" in op:
            src = quantized_data(rng, shape, np.dtype(np.uint8))
        else:
            src = float_data(rng, shape, first(scales))
            flat = src.reshape(-1)
            edges = np.stack([(-128.0 - zps) * scales, (255.0 - zps) * scales]).astype(np.float32)
            k = min(edges.size, flat.size)
            flat[:k] = np.resize(edges.reshape(-1), k)
        for dst in (TensorProto.INT8, TensorProto.UINT8):
            kw = dict(attrs, output_dtype=dst) if op == "Quantize" else attrs
            x = src.view(np.int8) if "Dequantize" in op and dst == TensorProto.INT8 else src
            want = run_reference(op, x, scales, zps, **kw)
            got = run_native(op, x, scales, zps, isa=isa, **kw)
            check(x, got, want, f"{op} dst={dst} shape={shape} zps={zps[:5].tolist()}")
