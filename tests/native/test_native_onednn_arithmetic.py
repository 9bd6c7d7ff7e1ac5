"""The native library's opt-in ``onednn`` arithmetic (session config entry
``quantgraph.arithmetic`` = ``onednn``): bit for bit quantgraph.reference.onednn_arithmetic on every
quantize row (s8/u8 per tensor and per channel, no zps and zps of every type, s32 ones beyond
2**24 too, static and dynamic, f8_e4m3/f8_e5m2) and dequantize row, on random data, exact .5
ties, extremes, NaN payloads and +-inf, every kernel table, odd lengths and tails; it differs
from the default (ONNX) arithmetic exactly where reference_onednn differs from
quantgraph.reference. And the model against oneDNN's own numbers, measured once (below)."""

from __future__ import annotations

import functools
import zlib
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgraph import reference
from quantgraph.backends import native, onednn
from quantgraph.reference import onednn_arithmetic as reference_onednn
from quantgraph.spec import dtypes
from tests.native.native_support import (
    describe_mismatch,
    float_data,
    mismatches,
    onnx_type,
    options,
    quantized_data,
    requires_native,
    run_session,
    scale_values,
    spec_model,
    zp_values,
)
from tests.native.test_native_kernels import layouts

STATIC_OPS = ("Quantize", "Dequantize")
ZP_DTYPES: dict[str, np.dtype] = {
    "s8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "s32": np.dtype(np.int32),
}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- running one call: the native library in an arithmetic, and the two models ----------


def _split(
    op: str, scales: np.ndarray, zps: np.ndarray | None, attrs: dict[str, Any]
) -> tuple[list[np.ndarray | None], dict[str, Any]]:
    """(inputs after src, attributes): static ops take scales / zps as attributes."""
    attributes = dict(attrs)
    if op not in STATIC_OPS:
        return [scales, zps], attributes
    attributes["scales"] = [float(v) for v in np.asarray(scales).reshape(-1)]
    if zps is not None:
        attributes["zps"] = [int(v) for v in np.asarray(zps).reshape(-1)]
    return [], attributes


@functools.lru_cache(maxsize=64)
def _session(serialized: bytes, isa: str, arithmetic: str) -> ort.InferenceSession:
    """A session of the native library in ``arithmetic``, or (arithmetic "oneDNN") of the
    onednn backend: oneDNN itself."""
    del isa  # part of the key only: the ISA is chosen when the session creates its kernels
    opts = options()
    if arithmetic == "oneDNN":
        onednn.register(opts)
    else:
        opts.add_session_config_entry("quantgraph.arithmetic", arithmetic)
        native.register(opts)
    return ort.InferenceSession(serialized, opts, providers=["CPUExecutionProvider"])


def run_native(
    op: str,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    attrs: dict[str, Any],
    *,
    arithmetic: str = "onednn",
    isa: str = "",
) -> np.ndarray:
    inputs, attributes = _split(op, scales, zps, attrs)
    present = [v for v in inputs if v is not None]
    model = spec_model(
        op,
        onnx_type(src),
        src.ndim,
        scales_type=onnx_type(present[0]) if present else None,
        zps_type=onnx_type(present[1]) if len(present) > 1 else None,
        **attributes,
    )
    feeds = {"src": src}
    for name, value in zip(("scales", "zps"), inputs, strict=False):
        if value is not None:
            feeds[name] = value
    return run_session(_session(model.SerializeToString(), isa, arithmetic), feeds)


def run_model(
    op: str,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    attrs: dict[str, Any],
    *,
    onednn: bool = True,
    version: tuple[int, int] = reference_onednn.ONEDNN_VERSION,
) -> np.ndarray:
    """reference_onednn (of oneDNN ``version``; or, onednn False, quantgraph.reference) on the
    checked call."""
    inputs, attributes = _split(op, scales, zps, attrs)
    call = reference.checked_call(op, [src, *inputs], attributes)
    model: Any = reference_onednn if onednn else reference
    if call.op.is_quantize:
        more = {"onednn_version": version} if onednn else {}
        result: np.ndarray = model.quantize_values(
            call.src, call.scales, call.zps, call.axis, call.dst, **more
        )
        return result
    result = model.dequantize_values(
        call.src, call.scales, call.zps, call.axis, call.dst, call.group_shape
    )
    return result


def differs(a: np.ndarray, b: np.ndarray, *, nan_equal: bool = False) -> np.ndarray:
    """Elementwise: the bits differ (float32 NaNs by bits too, unless ``nan_equal``: the
    project's comparison rule, quantgraph.reference.compare)."""
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    mask: np.ndarray = a.reshape(-1).view(width) != b.reshape(-1).view(width)
    if nan_equal and a.dtype == np.float32:
        mask &= ~(np.isnan(a.reshape(-1)) & np.isnan(b.reshape(-1)))
    return mask


def check_call(
    op: str,
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    attrs: dict[str, Any],
    isa: str,
    what: str,
) -> int:
    """The onednn arithmetic equals reference_onednn, and differs from the onnx arithmetic
    exactly where reference_onednn differs from quantgraph.reference. Returns that count."""
    want = run_model(op, src, scales, zps, attrs)
    got = run_native(op, src, scales, zps, attrs, isa=isa)
    assert mismatches(got, want) == 0, f"{what}: {describe_mismatch(src, got, want)}"
    onnx_model = run_model(op, src, scales, zps, attrs, onednn=False)
    onnx_native = run_native(op, src, scales, zps, attrs, arithmetic="onnx", isa=isa)
    model_mask = differs(want, onnx_model)
    native_mask = differs(got, onnx_native)
    assert np.array_equal(model_mask, native_mask), (
        f"{what}: the arithmetics part at {np.flatnonzero(native_mask)[:8]} natively, at "
        f"{np.flatnonzero(model_mask)[:8]} in the models"
    )
    return int(model_mask.sum())


# ---- data ---------------------------------------------------------------------------------


def onednn_ties(
    rng: np.random.Generator, multipliers: np.ndarray, zps: np.ndarray | None, count: int
) -> np.ndarray:
    """Values whose x * m + zp lands within a few ulps of a .5 tie, per channel (rows of
    ``count`` by channel): where oneDNN's two roundings, a fused multiply-add and ONNX's
    ``rne(x / s) + zp`` part."""
    m = multipliers.astype(np.float64)
    zp = 0.0 if zps is None else zps.astype(np.float64)
    k = rng.integers(-140, 270, (count, m.size)) + 0.5 - zp
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = np.nan_to_num(k / m, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)
    nudge = rng.integers(-3, 4, x.shape).astype(np.int32)
    bits = x.view(np.int32) + np.where(np.abs(x) > 0, nudge, 0)
    return bits.astype(np.int32).view(np.float32)


def quantize_src(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    scales: np.ndarray,
    zps: np.ndarray | None,
    channel_axis: int | None,
) -> np.ndarray:
    """float_data (ties of x / s, bounds, specials, NaN payloads, raw bits) with one element
    in three replaced by a oneDNN near-tie of its own channel."""
    src = float_data(rng, shape, float(scales[0]) if scales.size else 1.0)
    if src.size == 0:
        return src
    moved = np.moveaxis(src, channel_axis, -1) if channel_axis is not None else src[..., None]
    flat = moved.reshape(-1, moved.shape[-1])
    multipliers = reference_onednn.reciprocals(scales)
    m = multipliers if channel_axis is not None else multipliers[:1]
    z = None if zps is None else (zps if channel_axis is not None else zps[:1])
    ties = onednn_ties(rng, m, z, flat.shape[0])
    pick = rng.integers(0, 3, flat.shape) == 0
    flat[pick] = ties[pick]
    back = flat.reshape(moved.shape)
    if channel_axis is None:
        return back[..., 0].copy()
    return np.ascontiguousarray(np.moveaxis(back, -1, channel_axis))


# ---- every quantize row, every table, shapes around vector widths and tails --------------

# (op, dst, zps type or None); the static ops' zps attribute arrives as s32.
QUANTIZE_ROWS = [
    *[("DynamicQuantize", d, z) for d in ("s8", "u8") for z in (None, "s8", "u8", "s32")],
    *[("Quantize", d, z) for d in ("s8", "u8") for z in (None, "s32")],
    ("Quantize", "f8_e4m3", None),
    ("Quantize", "f8_e5m2", None),
]
SHAPES = [(1,), (7,), (63,), (131,), (3, 5), (4, 17, 3), (2, 33, 16), (5, 64), (3, 1001)]


def row_id(row: tuple[str, str, str | None]) -> str:
    return f"{row[0]}-{row[1]}-{row[2] or 'nozps'}"


@pytest.mark.parametrize("row", QUANTIZE_ROWS, ids=row_id)
@requires_native
def test_quantize_rows_every_isa(isa: str, row: tuple[str, str, str | None]) -> None:
    op, dst, zps_type = row
    rng = np.random.default_rng(zlib.crc32(repr((isa, row)).encode()))
    parted = 0
    for shape in SHAPES:
        rank = len(shape)
        for axis in (None, *range(rank)):
            channels = 1 if axis is None else shape[axis]
            scales = scale_values(rng, channels)
            zps = None if zps_type is None else zp_values(rng, channels, ZP_DTYPES[zps_type])
            attrs: dict[str, Any] = {
                "qtype": "per_tensor" if axis is None else "per_channel",
                "axis": 1 if axis is None else axis - rank * (axis % 2),
                "output_dtype": dtypes.BY_NAME[dst].onnx,
            }
            src = quantize_src(rng, shape, scales, zps, axis)
            what = f"{op} {dst} zps={zps_type} shape={shape} axis={axis} isa={isa}"
            parted += check_call(op, src, scales, zps, attrs, isa, what)
    assert parted > 0  # the data reaches the places where the arithmetics part


@pytest.mark.parametrize("dst", ["s8", "u8"])
@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize"])
@requires_native
def test_exact_ties(isa: str, op: str, dst: str) -> None:
    """4096 .5 ties of x / 0.0123 (x the float32 nearest (k + 0.5) * 0.0123). With an even zp
    (u8: 128) oneDNN's rne(x * m + zp) parts from ONNX's rne(x / s) + zp only where the float32
    values miss the tie differently; with an odd one (s8: -3) on nearly every tie as well, as
    rounding before and after adding an odd zp picks neighbours of different parity."""
    zp = 128 if dst == "u8" else -3
    k = np.arange(4096) % 250 - 125 - zp
    src = ((k + 0.5) * np.float64(np.float32(0.0123))).astype(np.float32)
    scales = np.array([0.0123], np.float32)
    zps = np.array([zp], ZP_DTYPES[dst] if op != "Quantize" else np.int32)
    attrs = {"output_dtype": dtypes.BY_NAME[dst].onnx}
    parted = check_call(op, src, scales, zps, attrs, isa, f"{op} {dst} ties")
    assert (40 < parted < 600) if zp % 2 == 0 else parted > 2000, parted


@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize"])
@requires_native
def test_s32_zero_points_beyond_float(isa: str, op: str) -> None:
    """oneDNN adds float(zp): s32 zero points beyond 2**24 round first. Around x * m = -zp,
    both signs, the extremes of s32; per tensor and per channel (int32 vec kernels)."""
    zps = np.array(
        [2**24 + 1, -(2**24) - 3, 2**25 + 3, 2**31 - 1, -(2**31), 123456789, -987654321, 300],
        np.int32,
    )
    scales = np.array([1.0, 0.5, 3.0, 1.0, 1.0, 0.37, 2.0, 1e-3], np.float32)
    m = reference_onednn.reciprocals(scales).astype(np.float64)
    offsets = np.arange(-300, 301)[:, None]
    src = ((-zps.astype(np.float64)[None, :] + offsets) / m[None, :]).astype(np.float32)
    rng = np.random.default_rng(5)
    src = np.concatenate([src, float_data(rng, (64, 8))])
    for dst in ("s8", "u8"):
        attrs: dict[str, Any] = {"output_dtype": dtypes.BY_NAME[dst].onnx}
        for c in range(zps.size):  # per tensor: the run kernels
            x = np.ascontiguousarray(src[:, c])
            check_call(op, x, scales[c : c + 1], zps[c : c + 1], attrs, isa, f"{op} {dst} c={c}")
        attrs.update(qtype="per_channel", axis=1)
        check_call(op, src, scales, zps, attrs, isa, f"{op} {dst} per_channel")
        attrs.update(axis=0)
        t = np.ascontiguousarray(src.T)
        check_call(op, t, scales, zps, attrs, isa, f"{op} {dst} per_channel axis 0")


@pytest.mark.parametrize(
    "shape", [(3001, 16), (1000, 64), (700, 384), (65, 512), (2049, 8, 2), (40, 3001)]
)
@pytest.mark.parametrize("op", ["DynamicQuantize", "Quantize"])
@requires_native
def test_innermost_patterns_and_threads(isa: str, op: str, shape: tuple[int, ...]) -> None:
    """Per-channel on axis 1: flat patterns (16/64/384 columns), row blocks, int16 and int32
    zero points of both signs, and calls above the parallel threshold (pool chunks)."""
    channels = shape[1]
    rng = np.random.default_rng(sum(shape))
    scales = scale_values(rng, channels)
    for zps in (
        np.resize(np.array([128, 0, 255, 3], np.int32), channels),
        np.resize(np.array([-128, 5, 127, -1, 0], np.int32), channels),
        np.resize(np.array([40_000, -3, 70_000, -(2**24) - 7, 2**30], np.int32), channels),
    ):
        src = quantize_src(rng, shape, scales, zps, 1)
        for dst in ("s8", "u8"):
            attrs = {"qtype": "per_channel", "axis": 1, "output_dtype": dtypes.BY_NAME[dst].onnx}
            check_call(op, src, scales, zps, attrs, isa, f"{op} {dst} {shape} {zps[:3]}")


@requires_native
def test_streaming_stores(isa: str) -> None:
    """Outputs of 8 MiB and more: non-temporal stores, every chunk of the pool."""
    rng = np.random.default_rng(3)
    src = float_data(rng, (2, (8 << 20) // 2 + 37), 0.02)
    scales = np.array([0.02], np.float32)
    for op, zps in (("DynamicQuantize", np.array([131], np.int32)), ("Quantize", None)):
        attrs = {"output_dtype": dtypes.U8.onnx}
        check_call(op, src, scales, zps, attrs, isa, f"{op} streaming")
    attrs = {"output_dtype": dtypes.F8_E4M3.onnx}
    check_call("Quantize", src, scales, None, attrs, isa, "f8 streaming")


# ---- float8: every float16 value, the double-rounding and overflow edges ------------------


@pytest.mark.parametrize("dst", ["f8_e4m3", "f8_e5m2"])
@requires_native
def test_float8_every_half(isa: str, dst: str) -> None:
    """Every float16 value (and its neighbours in float32, which round to it or away) through
    scales 1, 0.5 and 0.37, per tensor and per channel."""
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    exact = halves.astype(np.float32)
    bits = exact.view(np.uint32)
    finite = np.isfinite(exact)
    above = np.where(finite, bits + 1, bits).view(np.float32)
    below = np.where(finite & (bits & 0x7FFFFFFF != 0), bits - 1, bits).view(np.float32)
    src = np.stack([exact, above, below], axis=1).reshape(-1, 3)
    scales = np.array([1.0, 0.5, 0.37], np.float32)
    attrs: dict[str, Any] = {"output_dtype": dtypes.BY_NAME[dst].onnx}
    for c in range(3):
        x = np.ascontiguousarray(src[:, c])
        check_call("Quantize", x, scales[c : c + 1], None, attrs, isa, f"{dst} s={scales[c]}")
    attrs.update(qtype="per_channel", axis=1)
    check_call("Quantize", src, scales, None, attrs, isa, f"{dst} per_channel")


# ---- dequantize -----------------------------------------------------------------------------


DEQUANTIZE_ROWS = [
    *[("DynamicDequantize", s) for s in ("s8", "u8")],
    *[("Dequantize", s) for s in ("s8", "u8", "f8_e4m3", "f8_e5m2")],
]


@pytest.mark.parametrize(("op", "src_type"), DEQUANTIZE_ROWS)
@requires_native
def test_dequantize_rows(isa: str, op: str, src_type: str) -> None:
    """oneDNN subtracts float(zp) (s32 zero points beyond 2**24 round) and turns float8's -0
    into +0; everything else is ONNX's. Every bit pattern of the src type."""
    rng = np.random.default_rng(zlib.crc32(repr((isa, op, src_type)).encode()))
    src_dtype = dtypes.BY_NAME[src_type].numpy
    zp_choices: list[str | None] = [None]
    if not src_type.startswith("f8"):
        zp_choices += ["s32"] if op == "Dequantize" else ["s8", "u8", "s32"]
    for shape in ((256,), (7, 131), (3, 5, 64)):
        src = quantized_data(rng, shape, src_dtype)
        src.reshape(-1)[: min(src.size, 256)] = (
            np.arange(min(src.size, 256)).astype(np.uint8).view(src_dtype)
        )
        for axis in (None, 1 % len(shape)):
            channels = 1 if axis is None else shape[axis]
            scales = scale_values(rng, channels, allow_zero=True)
            for zps_type in zp_choices:
                zps = None
                if zps_type is not None:
                    zps = zp_values(rng, channels, ZP_DTYPES[zps_type])
                    if zps_type == "s32":
                        zps[0] = [2**24 + 3, -(2**24) - 5, 2**31 - 1][int(rng.integers(0, 3))]
                attrs = {
                    "qtype": "per_tensor" if axis is None else "per_channel",
                    "axis": 1 if axis is None else axis,
                }
                what = f"{op} {src_type} zps={zps_type} shape={shape} axis={axis} isa={isa}"
                check_call(op, src, scales, zps, attrs, isa, what)


# ---- random layouts (hypothesis) ----------------------------------------------------------


@SETTINGS
@given(layout=layouts(), row=st.sampled_from(QUANTIZE_ROWS))
@requires_native
def test_random_layouts(layout: dict[str, Any], row: tuple[str, str, str | None]) -> None:
    """test_native_kernels' random layouts (rank 0..6, zero-size, negative axes)."""
    op, dst, zps_type = row
    rng = np.random.default_rng(layout["seed"])
    scales = scale_values(rng, layout["channels"])
    zps = None if zps_type is None else zp_values(rng, layout["channels"], ZP_DTYPES[zps_type])
    per_channel = layout["qtype"] == "per_channel"
    channel_axis = layout["axis"] % len(layout["shape"]) if per_channel else None
    src = quantize_src(rng, layout["shape"], scales, zps, channel_axis)
    attrs = {
        "qtype": layout["qtype"],
        "axis": layout["axis"],
        "output_dtype": dtypes.BY_NAME[dst].onnx,
    }
    check_call(op, src, scales, zps, attrs, "", f"{row} {layout}")


# ---- the model against oneDNN itself -------------------------------------------------------
#
# Measured with a C++ harness over the oneDNN Graph API (one single-op partition per call:
# Quantize with scales / zps attributes, DynamicQuantize with scales and s32 zps inputs; the
# results were the same for both), on an AVX-512 CPU (AMD EPYC, Zen 4 class), oneDNN v3.2.0
# (PyPI onednn-cpu-gomp==2023.2.0) and v3.13.2 (PyPI onednn==2026.1.0; float8 only there).
# Inputs are float32 bit patterns; outputs the dst bytes. Where the two versions agree, one list.

MEASURED_QUANTIZE: list[tuple[str, float, int | None, list[int], dict[str, list[int]]]] = [
    # Exact .5 ties of x / 0.0123 with zp 128: the first six part from ONNX's rne(x/s) + zp.
    (
        "u8",
        0.0123,
        128,
        [0xBF9B1412, 0xBF97EDFA, 0xBF8E7BB3, 0xBF8B559B, 0xBF81E354, 0xBF7D7A78, 0xBF9CA71E],
        {"both": [29, 31, 37, 39, 45, 47, 28]},
    ),
    # Near-ties where a fused multiply-add would round the other way: oneDNN rounds twice.
    (
        "u8",
        0.1,
        37,
        [0xC03CCCCD, 0xC0699999, 0xBF733335, 0xC0366666, 0xC0433333],
        {"both": [8, 0, 28, 8, 6]},
    ),
    # NaN, -NaN, +-inf, +-1e10, ties of x * 2 + 3: s8 NaN is 127 in v3.2, -128 (qmin) in v3.13.
    (
        "s8",
        0.5,
        3,
        [0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000, 0x501502F9, 0xD01502F9, 0x427A0000],
        {
            "3.2": [127, 127, 127, -128, 127, -128, 127],
            "3.13": [-128, -128, 127, -128, 127, -128, 127],
        },
    ),
    (
        "u8",
        0.5,
        3,
        [0x7FC00000, 0x7F800000, 0xFF800000, 0x501502F9, 0xD01502F9, 0x42FD0000, 0xBFC00000],
        {"both": [0, 255, 0, 255, 0, 255, 0]},
    ),
    # s32 zero points beyond 2**24 are rounded to float32 before the addition.
    (
        "s8",
        1.0,
        16777217,
        [0xCB800000, 0xCB800001, 0xCB800040, 0xCB7FFF8C],
        {"both": [0, -2, -128, 116]},
    ),
    (
        "u8",
        1.0,
        2147483647,
        [0xCF000000, 0xCEFFFFFE, 0xCF000001, 0x00000000],
        {"both": [0, 255, 0, 255]},
    ),
    # 1 / 1e-39 overflows to inf: 0 * inf is NaN -> 0, tiny values saturate.
    ("u8", 1e-39, 100, [0x00000000, 0x0DA24260, 0x8DA24260], {"both": [0, 255, 0]}),
    # f8_e4m3 via float16, scale 0.5: -0 -> +0, -1e-45 -> -0, 464 -> 448, 464.1 -> 448 (float16
    # rounds it to 464), 464.25 -> NaN, inf -> NaN, 1.0625 + 2**-20 -> 1 (double rounding),
    # 2**-10 -> 0, just above -> 2**-9.
    (
        "f8_e4m3",
        0.5,
        None,
        [
            0x80000000,
            0x80000001,
            0x43680000,
            0x43680CCD,
            0x43682000,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x3F080008,
            0x3A000000,
            0x3A002000,
            0xBB449BA6,
        ],
        {"3.13": [0x00, 0x80, 0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0x38, 0x00, 0x01, 0x83]},
    ),
    # f8_e5m2, scale 0.5: 57344, 61439.8 -> inf (float16 rounds it to 61440), 61440 -> inf,
    # inf, NaN 0x7E, NaN with payload bit 21 -> 0x7F, 1.125 + 2**-19 -> 1 (double rounding).
    (
        "f8_e5m2",
        0.5,
        None,
        [
            0x80000000,
            0x80000001,
            0x46E00000,
            0x46EFFFCD,
            0x46F00000,
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x7FA00000,
            0x3F100010,
            0x37000000,
            0x3300D959,
        ],
        {"3.13": [0x00, 0x80, 0x7B, 0x7C, 0x7C, 0x7C, 0xFC, 0x7E, 0x7F, 0x3C, 0x01, 0x00]},
    ),
]


def measured_cases() -> list[tuple[str, float, int | None, np.ndarray, tuple[int, int], list[int]]]:
    cases = []
    for dst, scale, zp, bits, results in MEASURED_QUANTIZE:
        src = np.array(bits, np.uint32).view(np.float32)
        for version, values in results.items():
            for v in (
                ((3, 2), (3, 13)) if version == "both" else [tuple(map(int, version.split(".")))]
            ):
                cases.append((dst, scale, zp, src, (v[0], v[1]), values))
    return cases


@pytest.mark.parametrize(
    "case", measured_cases(), ids=lambda c: f"{c[0]}-s{c[1]}-zp{c[2]}-v{c[4][0]}.{c[4][1]}"
)
def test_model_matches_measured_onednn(
    case: tuple[str, float, int | None, np.ndarray, tuple[int, int], list[int]],
) -> None:
    dst_name, scale, zp, src, version, values = case
    dst = dtypes.BY_NAME[dst_name]
    zps = None if zp is None else np.array([zp], np.int64)
    got = reference_onednn.quantize_values(
        src, np.array([scale], np.float32), zps, None, dst, onednn_version=version
    )
    want = np.array(values, np.int64).astype(np.uint8).view(dst.numpy)
    assert differs(got, want).sum() == 0, (got.view(np.uint8).tolist(), values)


# Dequantize: s8 [1, -128, 127, 0, 3] with zp 16777219 and scale 1 (v3.2 and v3.13, static and
# dynamic), float32 bits; float8 codes [0x80, 0x00, 0x81] times 0.37 (v3.13).
MEASURED_DEQUANTIZE = [
    (
        "s8",
        [1, -128, 127, 0, 3],
        1.0,
        16777219,
        [0xCB800002, 0xCB800042, 0xCB7FFF85, 0xCB800002, 0xCB800000],
    ),
    ("f8_e4m3", [0x80, 0x00, 0x81], 0.37, None, [0x00000000, 0x00000000, 0xBA3D70A4]),
    ("f8_e5m2", [0x80, 0x00, 0x81], 0.37, None, [0x00000000, 0x00000000, 0xB6BD70A4]),
]


@pytest.mark.parametrize("case", MEASURED_DEQUANTIZE, ids=lambda c: str(c[0]))
def test_dequantize_model_matches_measured_onednn(case: tuple[Any, ...]) -> None:
    src_name, values, scale, zp, bits = case
    source = dtypes.BY_NAME[src_name]
    if source.is_float8:
        src = np.array(values, np.uint8).view(source.numpy)
    else:
        src = np.array(values, np.int64).astype(source.numpy)
    zps = None if zp is None else np.array([zp], np.int32)
    got = reference_onednn.dequantize_values(src, np.array([scale], np.float32), zps, None)
    assert got.view(np.uint32).tolist() == bits
    onnx = reference.dequantize_values(src, np.array([scale], np.float32), zps, None)
    assert differs(got, onnx).any()  # both corners differ from ONNX's arithmetic


@requires_native
def test_native_matches_measured_onednn() -> None:
    """The native onednn arithmetic on the measured inputs (newest version's results)."""
    for dst_name, scale, zp, src, version, values in measured_cases():
        if version != (3, 13):
            continue
        dst = dtypes.BY_NAME[dst_name]
        scales = np.array([scale], np.float32)
        want = np.array(values, np.int64).astype(np.uint8).view(dst.numpy)
        for op in ("Quantize", "DynamicQuantize") if not dst.is_float8 else ("Quantize",):
            zps = None if zp is None else np.array([zp], np.int32)
            got = run_native(op, src, scales, zps, {"output_dtype": dst.onnx})
            assert differs(got, want).sum() == 0, (op, dst_name, got.view(np.uint8).tolist())


# ---- against oneDNN itself, live: the onednn backend, where it is installed --------------

requires_onednn_backend = pytest.mark.skipif(
    onednn.unavailable_reason() is not None,
    reason=f"onednn backend: {onednn.unavailable_reason()}",
)


@requires_onednn_backend
@requires_native
def test_same_bits_as_the_onednn_backend() -> None:
    """Every quantize and dequantize row oneDNN runs (the loaded one: v3.2 from
    onednn-cpu-gomp, or QUANTGRAPH_ONEDNN_LIBRARY's), per tensor and per channel: oneDNN's bits
    are reference_onednn's of that version, and the native onednn arithmetic's wherever the
    versions' rules agree (they part on s8 NaN before v3.7). Scales of 1 are avoided: a static
    op whose scales are all 1 runs an unscaled reorder with other NaN rules (the module doc of
    reference_onednn)."""
    version = onednn.version_tuple()[:2]
    rng = np.random.default_rng(17)
    ran = 0
    rows = [(op, dst, z) for op, dst, z in QUANTIZE_ROWS] + [
        (op, src, z) for op, src in DEQUANTIZE_ROWS for z in (None, "s32")
    ]
    for op, qtype, zps_type in rows:
        quantize = "Dequantize" not in op
        if not quantize and zps_type is not None and qtype.startswith("f8"):
            continue
        for shape, axis in (((1000,), None), ((7, 131), None), ((4, 6, 33), 1), ((5, 64), 0)):
            channels = 1 if axis is None else shape[axis]
            scales = np.abs(scale_values(rng, channels, allow_zero=False))
            scales[scales == 1.0] = 0.75
            zps = None if zps_type is None else zp_values(rng, channels, ZP_DTYPES[zps_type])
            attrs: dict[str, Any] = {
                "qtype": "per_tensor" if axis is None else "per_channel",
                "axis": 1 if axis is None else axis,
            }
            if quantize:
                attrs["output_dtype"] = dtypes.BY_NAME[qtype].onnx
                src = quantize_src(rng, shape, scales, zps, axis)
            else:
                src = quantized_data(rng, shape, dtypes.BY_NAME[qtype].numpy)
                if zps is not None:
                    zps[0] = 2**24 + 3  # float(zp) rounds
            try:
                got = run_native(op, src, scales, zps, attrs, arithmetic="oneDNN")
            except Exception as error:  # oneDNN refuses the row (its message says why)
                assert "oneDNN" in str(error) or "onednn" in str(error), error
                continue
            ran += 1
            what = f"{op} {qtype} zps={zps_type} shape={shape} axis={axis} {onednn.version()}"
            # NaN payloads of a float8 source's NaN may differ: quantgraph.reference.compare's rule.
            want = run_model(op, src, scales, zps, attrs, version=version)
            bad = differs(got, want, nan_equal=True)
            assert not bad.any(), f"{what}: {bad.sum()} mismatches, first {np.flatnonzero(bad)[:5]}"
            native_bits = run_native(op, src, scales, zps, attrs)
            newest = run_model(op, src, scales, zps, attrs)
            agree = ~differs(newest, want)
            assert not (differs(native_bits, got, nan_equal=True) & agree).any(), what
    assert ran >= 20, ran
