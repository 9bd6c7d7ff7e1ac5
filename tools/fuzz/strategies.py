"""How the fuzzer draws a :class:`~tools.fuzz.case.Case`: the value pools (special floats,
scales, zero points, axes) and the hypothesis strategy :func:`cases` with the numpy generators
of shapes, scales, zero points and src values it uses.

Apart from running and checking the cases, which do not depend on how they are drawn.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

try:
    from hypothesis import strategies as st
except ImportError as _missing:  # pragma: no cover - hypothesis is a dev dependency
    raise ImportError(
        "quantgraph.fuzz needs hypothesis: pip install hypothesis (or quantgraph[dev])"
    ) from _missing

from quantgraph.spec import (
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    PER_CHANNEL,
    PER_TENSOR,
    QUANTIZE,
    dst_type,
    dtypes,
)
from quantgraph.spec.dtypes import DType

from .case import QUANTIZE_OPS, STATIC_OPS, Case, Profile, Signature

F32 = np.float32
S32_MIN, S32_MAX = dtypes.S32.int_range

# Largest dimension drawn per rank for the ordinary examples (at most 4096 elements).
MAX_DIM = {0: 1, 1: 300, 2: 40, 3: 12, 4: 7, 5: 5, 6: 4}


# -- value pools ---------------------------------------------------------------------------------

SPECIAL_FLOATS = np.array(
    [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        127.5,
        -128.5,
        255.5,
        np.inf,
        -np.inf,
        np.finfo(F32).max,
        -np.finfo(F32).max,
        np.finfo(F32).tiny,
        -np.finfo(F32).tiny,
        1e-45,
        -1e-45,
        2.0**31,
        -(2.0**31),
        2.0**24 + 2,
        448.0,
        464.0,
        480.0,
        57344.0,
        61440.0,
        2.0**-9,
        2.0**-10,
        2.0**-16,
        2.0**-17,
    ],
    dtype=F32,
)
NAN_BITS = np.array(
    [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA00000], dtype=np.uint32
)
SPECIALS = np.concatenate([SPECIAL_FLOATS, NAN_BITS.view(F32)])

SUBNORMAL_SCALES = np.array(
    [1e-45, 3e-45, 1e-40, 2.0**-130, 1.1754942e-38, 5e-39], dtype=F32
)  # smallest subnormal .. largest subnormal
HUGE_SCALES = np.array([1e30, 2.0**100, 3.4028235e38, 1.7e38, 65504.0, 2.0**64], dtype=F32)
TINY_SCALES = np.array([np.finfo(F32).tiny, 2.0**-125, 1e-37, 1e-30], dtype=F32)
SPECIAL_SCALES = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], dtype=F32)
BAD_QUANTIZE_SCALES = SPECIAL_SCALES  # quantize divides by them: rule scale-value
SCALE_MODES = ("pow2", "random", "subnormal", "huge", "tiny", "negative", "mixed")
DEQUANTIZE_SCALE_MODES = (*SCALE_MODES, "special", "mixed+special")

SRC_KINDS = ("normal", "tie", "edge", "special", "bits", "near")
ZP_MODES = ("zero", "extreme", "random", "mixed")


def _s32_extremes() -> np.ndarray:
    edges = [0, 1, -1, 127, -128, 255, S32_MAX, S32_MIN, S32_MAX - 1, S32_MIN + 1]
    # float32 stops being exact at 2^24; the native kernels switch clamp modes near it.
    big = 2**24
    edges += [big, -big, big + 1, -big - 1, big - 1, big - 256, -big + 255, 2**30, -(2**30)]
    edges += [2**25 + 3]
    return np.array(edges, np.int64)


S32_EXTREMES = _s32_extremes()
# Static zero points outside s32 (rule zps-value); the attribute is s64.
OUT_OF_S32 = np.array([S32_MAX + 1, S32_MIN - 1, 2**40, -(2**40), 2**63 - 1, -(2**63)], np.int64)
# Out-of-range axes for rank r are r + these or -r - 1 - these; also the s64 extremes.
AXIS_BEYOND = (0, 1, 5)
AXIS_EXTREMES = (2**62, -(2**62), 2**63 - 1, -(2**63))


def _float8_values(dtype: DType) -> np.ndarray:
    codes = np.arange(256, dtype=np.uint8).view(dtype.numpy).astype(np.float32)
    return np.unique(codes[np.isfinite(codes)])


# -- strategies ----------------------------------------------------------------------------------


# (src, dst, zps) of a DynamicDequantize row: its table has 40 with their zps types.
Pair = tuple[str, str, str | None]


def dequantize_pairs() -> list[Pair]:
    """Every (row, zps type or none) pair of DynamicDequantize's table."""
    return [
        (row.src.name, row.dst.name, zps)
        for row in DYNAMIC_DEQUANTIZE.type_rows
        for zps in (None, *(z.name for z in row.zps))
    ]


def _row(
    op: str, draw: st.DrawFn, rng: np.random.Generator, forced: Pair | None = None
) -> tuple[str, str, str | None, int | None]:
    """(src, dst, zps, output_dtype) of one row of the op's data-type table."""
    if op == DYNAMIC_QUANTIZE.name:
        zps = draw(st.sampled_from([None, "s8", "u8", "s32"]))
        out = draw(st.sampled_from([None, 0, TensorProto.INT8, TensorProto.UINT8]))
        if out:
            dst = dtypes.from_onnx(out)
            assert dst is not None
        else:
            zps_type = dtypes.BY_NAME[zps].onnx if zps else None
            dst = dtypes.from_onnx(dst_type(DYNAMIC_QUANTIZE, zps=zps_type))
        assert dst is not None
        return "f32", dst.name, zps, out
    if op == DYNAMIC_DEQUANTIZE.name:  # every row: 4-bit src, f16/bf16 scales and dst
        if forced is not None:  # see _jobs
            return (*forced, None)
        # numpy picks: hypothesis leans to the first of 40 (row, zps) pairs
        rows = DYNAMIC_DEQUANTIZE.type_rows
        row = rows[int(rng.integers(0, len(rows)))]
        choices = [None, *(z.name for z in row.zps)]
        return row.src.name, row.dst.name, choices[int(rng.integers(0, len(choices)))], None
    if op == QUANTIZE.name:
        dst_name = draw(st.sampled_from(["default", "s8", "u8", "f8_e4m3", "f8_e5m2"]))
        if dst_name == "default":
            return "f32", "u8", "s32" if draw(st.booleans()) else None, None
        found = dtypes.BY_NAME[dst_name]
        zps = None if found.is_float8 or not draw(st.booleans()) else "s32"
        return "f32", dst_name, zps, found.onnx
    src = draw(st.sampled_from(["s8", "u8", "f8_e4m3", "f8_e5m2"]))
    is_f8 = dtypes.BY_NAME[src].is_float8
    return src, "f32", None if is_f8 or not draw(st.booleans()) else "s32", None


def _rules(op: str, sig_zps: str | None, per_channel: bool, float8: bool) -> list[str]:
    rules = ["per-channel-scale-count" if per_channel else "per-tensor-scale-count"]
    if op in QUANTIZE_OPS:
        rules.append("scale-value")
    if sig_zps is not None:
        rules.append("zps-count")
    if per_channel:
        rules.append("axis-range")
    if op in STATIC_OPS:
        if float8:
            rules.append("f8-zps")
        elif sig_zps is not None:
            rules.append("zps-value")
    return rules


@st.composite
def cases(draw: st.DrawFn, op: str, profile: Profile, forced: Pair | None = None) -> Case:
    """One call of ``op``: a valid one, or (``profile.error_percent``) one that breaks a rule."""
    # Bulk values and the odds below come from numpy, seeded by hypothesis: hypothesis's own
    # integers lean to small values, which would make "1 in 7" far more often than that.
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    src_name, dst_name, sig_zps, output_dtype = _row(op, draw, rng, forced)
    float8 = dtypes.BY_NAME[src_name].is_float8 or dtypes.BY_NAME[dst_name].is_float8
    rank = draw(st.integers(0, 6))
    qtype = draw(st.sampled_from([None, PER_TENSOR, PER_CHANNEL] if rank else [None, PER_TENSOR]))
    if op == DYNAMIC_DEQUANTIZE.name and rank and draw(st.integers(0, 3)) == 0:
        return _per_group_case(draw, rng, rank, src_name, dst_name, sig_zps, seed)
    per_channel = qtype == PER_CHANNEL
    wants_error = rng.random() * 100 < profile.error_percent
    rule: str | None = None
    if wants_error:
        can_break = _rules(op, sig_zps, per_channel, float8)
        if rank == 0:
            can_break.append("axis-range")  # per_channel on a scalar: no axis is in range
        rule = draw(st.sampled_from(can_break))
        if rule == "axis-range" and not per_channel:
            qtype, per_channel = PER_CHANNEL, True  # rank 0: every axis is out of range
        if rule == "f8-zps":
            sig_zps = "s32"
    # axis: in range for per_channel (or left out when 1 is), anything for per_tensor.
    if rule == "axis-range":
        beyond = draw(st.sampled_from(AXIS_BEYOND))
        axis: int | None = draw(
            st.sampled_from([rank + beyond, -rank - 1 - beyond, *AXIS_EXTREMES])
        )
        if rank <= 1 and draw(st.booleans()):
            axis = None  # the default axis 1 is out of range for ranks 0 and 1
    elif per_channel:
        axis = draw(st.integers(-rank, rank - 1))
        if axis == 1 and draw(st.booleans()):
            axis = None
    else:
        axis = draw(st.sampled_from([None, 0, 7, -(2**63)]))  # ignored by per_tensor
    scales_name = dst_name if op == DYNAMIC_DEQUANTIZE.name else "f32"
    sig = Signature(op, src_name, dst_name, sig_zps, rank, qtype, axis, output_dtype, scales_name)
    shape = _shape(draw, rng, rank, profile)
    resolved = sig.resolved_axis
    channels = shape[resolved] if resolved is not None else 1
    if rule == "scale-value" and channels == 0:
        rule = None  # no scale to break: a valid zero-size call instead
    scale_count = channels
    if rule == "per-tensor-scale-count":
        scale_count = draw(st.sampled_from([0, 2, 3, 17]))
    elif rule == "per-channel-scale-count":
        scale_count = max(0, channels + draw(st.sampled_from([-1, 1, 2, -channels - 1])))
        if scale_count == channels:
            scale_count += 1
    elif rule == "axis-range":
        scale_count = 1
    is_quantize = op in QUANTIZE_OPS
    modes = SCALE_MODES if is_quantize else DEQUANTIZE_SCALE_MODES
    scales = _scales(rng, scale_count, draw(st.sampled_from(modes)), scales_name)
    if rule == "scale-value":
        bad = draw(st.sampled_from(list(range(len(BAD_QUANTIZE_SCALES)))))
        index = draw(st.integers(0, scale_count - 1))
        scales[index] = BAD_QUANTIZE_SCALES[bad]

    zps: np.ndarray | None = None
    if sig_zps is not None:
        zp_count = scale_count
        if rule == "zps-count":
            zp_count = max(0, scale_count + draw(st.sampled_from([-1, 1, 3])))
            if zp_count == scale_count:
                zp_count += 1
        zp_mode = draw(st.sampled_from(ZP_MODES))
        if op in STATIC_OPS:
            zps = _static_zps(rng, zp_count, zp_mode, dst_name if is_quantize else src_name)
            if rule == "zps-value" and zp_count:
                out_of_range = OUT_OF_S32[draw(st.integers(0, OUT_OF_S32.size - 1))]
                zps[draw(st.integers(0, zp_count - 1))] = out_of_range
            elif rule == "zps-value":
                rule = None  # no zero point to break: a valid zero-size call instead
        else:
            zps = _dynamic_zps(rng, zp_count, zp_mode, dtypes.BY_NAME[sig_zps])

    # Per-element scale and zero point, to aim src values at ties and saturation edges.
    count_ok = scale_count == channels and (zps is None or zps.size == scale_count)
    src_dtype = dtypes.BY_NAME[src_name]
    if is_quantize:
        kinds = tuple(draw(st.lists(st.sampled_from(SRC_KINDS), min_size=1, unique=True)))
        src = _float_src(rng, shape, sig, scales, zps, resolved, count_ok, kinds)
    else:
        src = _quantized_src(rng, shape, src_dtype, zps, resolved, count_ok)
    return Case(sig, src, scales, zps, rule, seed)


def _per_group_case(
    draw: st.DrawFn,
    rng: np.random.Generator,
    rank: int,
    src_name: str,
    dst_name: str,
    sig_zps: str | None,
    seed: int,
) -> Case:
    """A valid per_group DynamicDequantize: groups along one of the last two dims (where
    oneDNN's CPU reorder groups), scales and zps of src's rank."""
    grouped = rank - 1 - draw(st.integers(0, min(1, rank - 1)))
    dims = [draw(st.integers(1, MAX_DIM[rank])) for _ in range(rank)]
    group = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    dims[grouped] = group * draw(st.integers(1, max(1, 64 // group)))
    groups = [1] * rank
    groups[grouped] = group
    scale_shape = tuple(d // g for d, g in zip(dims, groups, strict=True))
    sig = Signature(
        DYNAMIC_DEQUANTIZE.name,
        src_name,
        dst_name,
        sig_zps,
        rank,
        "per_group",
        None,
        None,
        dst_name,
        tuple(groups),
    )
    count = int(np.prod(scale_shape, dtype=np.int64))
    modes = draw(st.sampled_from(DEQUANTIZE_SCALE_MODES))
    scales = _scales(rng, count, modes, dst_name).reshape(scale_shape)
    zps = None
    if sig_zps is not None:
        zp_mode = draw(st.sampled_from(ZP_MODES))
        zps = _dynamic_zps(rng, count, zp_mode, dtypes.BY_NAME[sig_zps]).reshape(scale_shape)
    src = _quantized_src(rng, tuple(dims), dtypes.BY_NAME[src_name], None, None, False)
    return Case(sig, src, scales, zps, None, seed)


def _shape(
    draw: st.DrawFn, rng: np.random.Generator, rank: int, profile: Profile
) -> tuple[int, ...]:
    if 1 <= rank <= 3 and rng.random() * 100 < profile.large_percent:
        total = draw(st.integers(2**17 + 1, 3 * 2**17))
        dims = [1] * rank
        for index in range(rank - 1):
            dims[index] = draw(st.integers(1, 64))
        dims[-1] = max(1, total // int(np.prod(dims[:-1], dtype=np.int64)))
        return tuple(dims)
    dims = [draw(st.integers(1, MAX_DIM[rank])) for _ in range(rank)]
    if rank and rng.random() < 0.1:
        dims[draw(st.integers(0, rank - 1))] = 0  # zero-size
    return tuple(dims)


def _scales(rng: np.random.Generator, count: int, mode: str, dtype: str = "f32") -> np.ndarray:
    """``count`` scales of ``mode``, rounded to ``dtype`` (f16/bf16 scales of DynamicDequantize:
    huge ones become inf, subnormal ones 0, as a producer's cast would make them)."""
    found = _f32_scales(rng, count, mode)
    if dtype == "f32":
        return found
    with np.errstate(over="ignore"):
        narrowed: np.ndarray = found.astype(dtypes.BY_NAME[dtype].numpy)
    return narrowed


def _f32_scales(rng: np.random.Generator, count: int, mode: str) -> np.ndarray:
    def pick(which: str, n: int) -> np.ndarray:
        if which == "pow2":
            return (2.0 ** rng.integers(-24, 25, n)).astype(F32)
        if which == "random":
            return np.exp(rng.uniform(np.log(1e-4), np.log(1e4), n)).astype(F32)
        if which == "subnormal":
            return SUBNORMAL_SCALES[rng.integers(0, SUBNORMAL_SCALES.size, n)]
        if which == "huge":
            return HUGE_SCALES[rng.integers(0, HUGE_SCALES.size, n)]
        if which == "tiny":
            return TINY_SCALES[rng.integers(0, TINY_SCALES.size, n)]
        if which == "negative":
            return -pick("pow2" if rng.integers(0, 2) else "random", n)
        if which == "special":
            return SPECIAL_SCALES[rng.integers(0, SPECIAL_SCALES.size, n)]
        raise AssertionError(which)

    if mode.startswith("mixed"):
        pool = ["pow2", "random", "subnormal", "huge", "tiny", "negative"]
        if mode.endswith("special"):
            pool.append("special")
        out = np.empty(count, F32)
        which = rng.integers(0, len(pool), count)
        for index, name in enumerate(pool):
            mask = which == index
            out[mask] = pick(name, int(mask.sum()))
        return out
    return pick(mode, count).astype(F32)


def _dynamic_zps(rng: np.random.Generator, count: int, mode: str, dtype: DType) -> np.ndarray:
    low, high = dtype.int_range
    if dtype == dtypes.S32:
        extremes = S32_EXTREMES
    else:
        extremes = np.array([low, high, 0, 1, high - 1, low + 1, (low + high) // 2], np.int64)
        extremes = extremes[(extremes >= low) & (extremes <= high)]
    if mode == "zero":
        values = np.zeros(count, np.int64)
    elif mode == "extreme":
        values = extremes[rng.integers(0, extremes.size, count)]
    elif mode == "random":
        values = rng.integers(low, high + 1, count, dtype=np.int64)
    else:
        small = rng.integers(max(low, -300), min(high, 300) + 1, count, dtype=np.int64)
        values = np.where(
            rng.integers(0, 2, count) == 1, extremes[rng.integers(0, extremes.size, count)], small
        )
    return values.astype(dtype.numpy)


def _static_zps(rng: np.random.Generator, count: int, mode: str, quantized: str) -> np.ndarray:
    """The zps attribute: any s32 value; half the time within the quantized type's range."""
    qtype = dtypes.BY_NAME[quantized]
    if not qtype.is_float8 and rng.integers(0, 2):
        return _dynamic_zps(rng, count, mode, qtype).astype(np.int64)
    return _dynamic_zps(rng, count, mode, dtypes.S32).astype(np.int64)


def per_element(
    values: np.ndarray, shape: tuple[int, ...], axis: int | None, fill: float | int
) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if axis is None:
        first = values.reshape(-1)[0] if values.size else fill
        return np.full(n, first, dtype=values.dtype)
    view = [1] * len(shape)
    view[axis] = -1
    return np.broadcast_to(values.reshape(view), shape).reshape(-1)


def _float_src(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    sig: Signature,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    count_ok: bool,
    kinds: tuple[str, ...],
) -> np.ndarray:
    """float32 src aimed at x / scale: ties, the clamp bounds, specials, raw bits."""
    n = int(np.prod(shape, dtype=np.int64))
    dst = dtypes.BY_NAME[sig.dst]
    usable = count_ok and bool(np.all(np.isfinite(scales) & (scales != 0)))
    s = per_element(scales.astype(np.float64), shape, axis, 1.0) if usable else np.ones(n)
    if zps is not None and count_ok:
        z = per_element(zps.astype(np.int64), shape, axis, 0)
    else:
        z = np.zeros(n, np.int64)
    which = rng.integers(0, len(kinds), n)
    out = np.empty(n, F32)
    f8_values = _float8_values(dst) if dst.is_float8 else None
    for index, kind in enumerate(kinds):
        mask = which == index
        m = int(mask.sum())
        if not m:
            continue
        sm, zm = s[mask], z[mask]
        if kind == "normal":
            spread = np.array([1.0, 30.0, 300.0, 1e4])[rng.integers(0, 4, m)]
            t = rng.standard_normal(m) * spread
        elif kind in ("tie", "near"):
            if f8_values is not None:
                low = rng.integers(0, f8_values.size - 1, m)
                t = (f8_values[low].astype(np.float64) + f8_values[low + 1]) / 2
            else:
                t = rng.integers(-300, 300, m) + 0.5
                qmin, qmax = dst.int_range
                edge = rng.integers(0, 3, m)
                t = np.where(edge == 1, qmin - zm - 0.5, np.where(edge == 2, qmax - zm + 0.5, t))
        elif kind == "edge":
            if f8_values is not None:
                top = float(f8_values[-1])
                ulp = top - float(f8_values[-2])
                tiny = float(f8_values[f8_values > 0][0])
                pool = np.array(
                    [top, top + ulp / 2, top + ulp, 2 * top, tiny / 2, tiny, tiny * 1.5, 0.0]
                )
                t = pool[rng.integers(0, pool.size, m)] * np.where(
                    rng.integers(0, 2, m) == 1, 1.0, -1.0
                )
            else:
                qmin, qmax = dst.int_range
                base = np.where(rng.integers(0, 2, m) == 1, qmin - zm, qmax - zm)
                t = base + np.array([-1.0, -0.5, 0.0, 0.5, 1.0])[rng.integers(0, 5, m)]
        elif kind == "special":
            out[mask] = SPECIALS[rng.integers(0, SPECIALS.size, m)]
            continue
        elif kind == "bits":
            out[mask] = rng.integers(0, 2**32, m, dtype=np.uint64).astype(np.uint32).view(F32)
            continue
        else:
            raise AssertionError(kind)
        with np.errstate(over="ignore", invalid="ignore"):
            x = (t * sm).astype(F32)
        if kind == "near":
            x = np.nextafter(x, np.where(rng.integers(0, 2, m) == 1, F32(np.inf), F32(-np.inf)))
        out[mask] = x
    return out.reshape(shape)


def _quantized_src(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: DType,
    zps: np.ndarray | None,
    axis: int | None,
    count_ok: bool,
) -> np.ndarray:
    """Every code of the 8-bit type, with extra weight on the extremes and on zp and zp +- 1."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 256, n, dtype=np.uint16).astype(np.uint8)
    if not dtype.is_float8:
        qmin, qmax = dtype.int_range
        if dtype.bits == 4:  # every code of the 4-bit type
            values = rng.integers(qmin, qmax + 1, n, dtype=np.int64)
        else:
            values = raw.view(dtype.numpy).astype(np.int64)
        kind = rng.integers(0, 4, n)
        values = np.where(kind == 1, np.where(rng.integers(0, 2, n) == 1, qmin, qmax), values)
        if zps is not None and count_ok:
            z = per_element(zps.astype(np.int64), shape, axis, 0)
            near = np.clip(z + rng.integers(-1, 2, n), qmin, qmax)
            values = np.where(kind == 2, near, values)
        return values.astype(dtype.numpy).reshape(shape)
    return raw.view(dtype.numpy).reshape(shape)
