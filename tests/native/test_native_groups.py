"""DynamicDequantize's oneDNN v3.13 rows in the native library: src s8/u8/s4/u4 (4-bit packed),
dst f32/f16/bf16 (the scales' type), every zps type of each row, per_tensor, per_channel and
per_group (group along each axis, block sizes 1, 2, 16, 32, 128 that divide, and groups along
several axes), ranks 1-4, odd element counts, zero-size tensors, special scales and extreme
zero points: the same bits as quantgraph.reference (quantgraph.reference.compare's rule), and as
onnxruntime's own DequantizeLinear-21 wherever ONNX defines the same call (src int8/uint8/
int4/uint4, float32/float16 scales, zero points of the src type, per tensor, per axis or blocked
along one axis)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from quantgraph.reference.compare import compare
from quantgraph.spec import DYNAMIC_DEQUANTIZE, dtypes
from quantgraph.spec.dtypes import DType
from tests.native.native_support import (
    SpecAttributes,
    requires_native,
    run_native,
    run_ort_dequantize,
    run_reference,
)

pytestmark = requires_native

OP = "DynamicDequantize"
BLOCKS = (1, 2, 16, 32, 128)
# (src, dst, zps or None) of every row of the spec's table.
ROWS = [(row.src, row.dst, zps) for row in DYNAMIC_DEQUANTIZE.type_rows for zps in (None, *row.zps)]
NEW_ROWS = [
    r for r in ROWS if r[0] in (dtypes.S4, dtypes.U4) or r[1] != dtypes.F32
]  # the 8-bit -> f32 rows' per_tensor / per_channel calls are test_native_kernels'
SHAPES = [
    (256,),
    (257,),  # odd: packed 4-bit rows end in half a byte
    (64, 33),
    (7, 128),
    (3, 32, 5),
    (2, 5, 16),
    (3, 5, 7),
    (2, 3, 16, 5),
    (1, 3, 5, 7),
    (0, 32),  # zero-size
    (4, 0, 2),
]


def row_id(row: tuple[DType, DType, DType | None]) -> str:
    src, dst, zps = row
    return f"{src.name}-{dst.name}-{zps.name if zps else 'nozps'}"


def layouts(shape: tuple[int, ...]) -> Iterator[tuple[dict[str, Any], tuple[int, ...]]]:
    """(attributes, parameter shape) of each call on src ``shape``."""
    rank = len(shape)
    yield {}, (1,)
    for axis in range(rank):
        yield {"qtype": "per_channel", "axis": axis - rank if axis % 2 else axis}, (shape[axis],)
    for axis in range(rank):
        for block in BLOCKS:
            if shape[axis] % block == 0 and (block > 1 or shape[axis] > 1):
                group = [1] * rank
                group[axis] = block
                yield group_layout(shape, group)
    if rank >= 2:  # along several axes: each dim's smallest divisor above 1
        group = [next((b for b in range(2, d + 1) if d % b == 0), 1) for d in shape]
        yield group_layout(shape, group)
        yield group_layout(shape, [max(d, 1) for d in shape])  # one group: the whole tensor


def group_layout(
    shape: tuple[int, ...], group: list[int]
) -> tuple[dict[str, Any], tuple[int, ...]]:
    params = tuple(d // g for d, g in zip(shape, group, strict=True))
    return {"qtype": "per_group", "group_shape": group}, params


def int_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Random values of an integer type over its whole range, its extremes included."""
    low, high = dtype.int_range
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == dtypes.S32:
        extremes = np.array([low, high, 0, 1, -1, 2**24 - 256, -(2**24) + 256, 1000], np.int64)
        wide = rng.integers(low, high + 1, n, dtype=np.int64)
        small = rng.integers(-300, 300, n)
        kind = rng.integers(0, 4, n)
        values = np.select(
            [kind == 0, kind == 1], [extremes[rng.integers(0, extremes.size, n)], wide], small
        )
    else:
        values = rng.integers(low, high + 1, n, dtype=np.int64)
        values[: min(n, 2)] = [low, high][: min(n, 2)]
    return values.astype(dtype.numpy).reshape(shape)


def small_zps(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """s32 zero points the SIMD kernels take (|zp| < 2^24); others as int_values."""
    if dtype != dtypes.S32:
        return int_values(rng, shape, dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return rng.integers(-(2**24) + 256, 2**24 - 255, n).astype(np.int32).reshape(shape)


SPECIAL_SCALES = {
    "f32": [1e-40, -3e-39, 3e38, -1e30, 1e-30],
    "f16": [6e-8, -3e-5, 65504.0, -1000.0, 1e-4],
    "bf16": [1e-40, -9e-39, 3e38, -1e30, 1e-30],
}


def scale_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Scales of the dst type: random magnitudes and signs, subnormal, huge, zero, -0, inf,
    NaN (one in eight special)."""
    n = int(np.prod(shape, dtype=np.int64))
    random = (rng.random(n) * 4.0 - 2.0) * 10.0 ** rng.integers(-6, 4, n)
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, *SPECIAL_SCALES[dtype.name]], np.float64
    )
    picked = specials[rng.integers(0, specials.size, n)]
    values = np.where(rng.integers(0, 8, n) == 0, picked, random)
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(dtype.numpy).reshape(shape)


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    result = compare("dst", want, got)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    assert result.agree, f"{what}: {result.mismatches} mismatches, first {result.first_mismatch}"


def ort_call(attrs: dict[str, Any], shape: tuple[int, ...]) -> dict[str, int] | None:
    """onnxruntime's DequantizeLinear arguments (axis, block_size) for the same call, or None
    where ONNX has no such call (groups along more than one axis)."""
    qtype = attrs.get("qtype", "per_tensor")
    if qtype == "per_tensor":
        return {}
    if qtype == "per_channel":
        return {"axis": attrs["axis"]}
    grouped = [d for d, g in enumerate(attrs["group_shape"]) if g != 1]
    if len(grouped) > 1:
        return None
    axis = grouped[0] if grouped else 0
    return {"axis": axis, "block_size": attrs["group_shape"][axis]}


def onnx_defines(src: DType, dst: DType, zps: DType | None) -> bool:
    return dst != dtypes.BF16 and (zps is None or zps == src)


def run_row(
    row: tuple[DType, DType, DType | None],
    shapes: list[tuple[int, ...]],
    *,
    isa: str = "",
    with_ort: bool = True,
) -> int:
    src_type, dst_type, zps_type = row
    calls = 0
    for shape in shapes:
        for attrs, params in layouts(shape):
            rng = np.random.default_rng(abs(hash((row_id(row), shape, repr(attrs)))) % 2**32)
            src = int_values(rng, shape, src_type)
            scales = scale_values(rng, params, dst_type)
            zps = None if zps_type is None else int_values(rng, params, zps_type)
            what = f"{row_id(row)} {shape} {attrs}"
            want = run_reference(OP, src, scales, zps, **attrs)
            got = run_native(OP, src, scales, zps, isa=isa, **attrs)
            check(got, want, what)
            calls += 1
            ort = ort_call(attrs, shape)
            if with_ort and ort is not None and src.size and onnx_defines(*row):
                builtin = run_ort_dequantize(src, scales, zps, **ort)
                check(got, builtin, f"{what} vs onnxruntime DequantizeLinear")
    return calls


@pytest.mark.parametrize("row", NEW_ROWS, ids=row_id)
def test_rows_every_qtype_rank_and_group(row: tuple[DType, DType, DType | None]) -> None:
    assert run_row(row, SHAPES) > 60


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r not in NEW_ROWS],
    ids=row_id,
)
def test_8bit_f32_rows_per_group(row: tuple[DType, DType, DType | None]) -> None:
    """The existing 8-bit -> f32 rows take per_group too (their per_tensor / per_channel calls
    keep the kernels of test_native_kernels, run again here)."""
    assert run_row(row, SHAPES) > 60


# Each ISA on one zps choice per (src, dst): the kernels differ by table, not by zps type.
ISA_ROWS = [r for r in ROWS if r[2] in (None, r[0])]


@pytest.mark.parametrize("row", ISA_ROWS, ids=row_id)
def test_every_isa(isa: str, row: tuple[DType, DType, DType | None]) -> None:
    shapes = [(256,), (257,), (7, 128), (3, 32, 5), (1, 3, 5, 7), (0, 32)]
    assert run_row(row, shapes, isa=isa, with_ort=False) > 20


@pytest.mark.parametrize("zps", ["extreme", "simd"])
@pytest.mark.parametrize("src", [dtypes.S8, dtypes.U8, dtypes.S4, dtypes.U4], ids=str)
def test_s32_zero_points(isa: str, src: DType, zps: str) -> None:
    """s32 zero points beyond +-(2^24 - 256) take the scalar table (exact in int64), the rest
    the SIMD kernels (float(x) - float(zp), exact there)."""
    rng = np.random.default_rng(5)
    shape = (64, 96)
    for dst in (dtypes.F32, dtypes.F16, dtypes.BF16):
        cases: list[tuple[SpecAttributes, tuple[int, ...]]] = [
            ({"qtype": "per_group", "group_shape": [32, 1]}, (2, 96)),
            ({"qtype": "per_group", "group_shape": [1, 32]}, (64, 3)),
            ({"qtype": "per_channel", "axis": 1}, (96,)),
            ({}, (1,)),
        ]
        for attrs, params in cases:
            src_values = int_values(rng, shape, src)
            scales = scale_values(rng, params, dst)
            make = int_values if zps == "extreme" else small_zps
            zp = make(rng, params, dtypes.S32)
            want = run_reference(OP, src_values, scales, zp, **attrs)
            got = run_native(OP, src_values, scales, zp, isa=isa, **attrs)
            check(got, want, f"{src} -> {dst} {attrs} zps {zps}")


@pytest.mark.parametrize("scales", ["f32", "f16", "bf16"])
def test_benchdnn_dynamicdq_s4(scales: str) -> None:
    """benchdnn's case dynamicdq_s4: src s4 [1, 32, 128, 32], group_shape [1, 1, 8, 1], scales
    and s4 zps [1, 32, 16, 32]; onnxruntime's blocked DequantizeLinear (axis 2, block 8) too."""
    dst = dtypes.BY_NAME[scales]
    rng = np.random.default_rng(32)
    src = int_values(rng, (1, 32, 128, 32), dtypes.S4)
    params = (1, 32, 16, 32)
    scale = scale_values(rng, params, dst)
    zps = int_values(rng, params, dtypes.S4)
    attrs: dict[str, Any] = {"qtype": "per_group", "group_shape": [1, 1, 8, 1]}
    got = run_native(OP, src, scale, zps, **attrs)
    check(got, run_reference(OP, src, scale, zps, **attrs), "reference")
    if dst != dtypes.BF16:
        builtin = run_ort_dequantize(src, scale, zps, axis=2, block_size=8)
        check(got, builtin, "onnxruntime DequantizeLinear")


def test_hand_checked_values() -> None:
    """Packed nibbles in order, the group an element belongs to, and rounding to f16/bf16."""
    src = np.array([[-8, 7, 1, -1, 3], [0, 2, -3, 5, -7]], dtypes.S4.numpy)  # odd count: 10
    scales = np.array([[0.5, 2.0, 1.0], [1.0, 3.0, 0.25]], np.float32)
    zps = np.array([[1, -1, 0], [0, 2, -8]], dtypes.S4.numpy)
    attrs: dict[str, Any] = {"qtype": "per_group", "group_shape": [1, 2]}
    with pytest.raises(Exception, match=r"\[rule group-divides\]"):
        run_native(OP, src, scales, zps, **attrs)  # 5 columns do not split into groups of 2
    src = src[:, :4]
    scales, zps = scales[:, :2], zps[:, :2]
    got = run_native(OP, src, scales, zps, **attrs)
    assert got.tolist() == [[-4.5, 3.0, 4.0, 0.0], [0.0, 2.0, -15.0, 9.0]]
    bf16 = run_native(OP, src, scales.astype(dtypes.BF16.numpy), zps, **attrs)
    assert bf16.dtype == dtypes.BF16.numpy and bf16.astype(np.float32).tolist() == got.tolist()
    # Ties round to even, once: x - zp = 257, 259 -> bf16 256, 260; 2049, 2051 -> f16 2048, 2052.
    ties = np.array([2, 4], np.uint8)
    bf = run_native(OP, ties, np.ones(1, dtypes.BF16.numpy), np.array([-255], np.int32))
    assert bf.astype(np.float32).tolist() == [256.0, 260.0]
    f16 = run_native(OP, ties - 1, np.ones(1, np.float16), np.array([-2048], np.int32))
    assert f16.dtype == np.float16 and f16.tolist() == [2048.0, 2052.0]


@pytest.mark.parametrize("row", [r for r in NEW_ROWS if r[2] in (None, r[0])], ids=row_id)
def test_rank_0(row: tuple[DType, DType, DType | None]) -> None:
    """A 0-d src: per_tensor, and per_group with group_shape [] and 0-d scales and zps."""
    src_type, dst_type, zps_type = row
    rng = np.random.default_rng(0)
    src = int_values(rng, (), src_type)
    cases: list[tuple[SpecAttributes, tuple[int, ...]]] = [
        ({}, (1,)),
        ({"qtype": "per_group", "group_shape": []}, ()),
    ]
    for attrs, params in cases:
        scales = scale_values(rng, params, dst_type)
        zps = None if zps_type is None else int_values(rng, params, zps_type)
        want = run_reference(OP, src, scales, zps, **attrs)
        got = run_native(OP, src, scales, zps, **attrs)
        check(got, want, f"{row_id(row)} {attrs}")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_agree(threads: int) -> None:
    """Tasks on the intra-op pool (whole blocks of rows sharing parameters, column ranges of
    long rows) give the same bits for any pool size."""
    rng = np.random.default_rng(threads)
    for shape, group in [((544, 1031), [32, 1]), ((3, 70_007), [1, 7]), ((96, 2049), [3, 1])]:
        params = tuple(d // g for d, g in zip(shape, group, strict=True))
        src = int_values(rng, shape, dtypes.U4)
        scales = scale_values(rng, params, dtypes.F16)
        zps = int_values(rng, params, dtypes.U4)
        attrs: dict[str, Any] = {"qtype": "per_group", "group_shape": group}
        want = run_reference(OP, src, scales, zps, **attrs)
        got = run_native(OP, src, scales, zps, threads=threads, **attrs)
        check(got, want, f"{shape} {group} threads={threads}")
