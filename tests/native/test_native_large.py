"""Millions of random elements through every kernel table: 0 mismatches with the reference.

Sizes are past the thresholds where the library splits work over the intra-op pool and
writes with streaming (non-temporal) stores, with shapes whose runs and rows start at every
alignment."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantgraph.reference.compare import compare
from quantgraph.spec import dtypes
from tests.native.native_support import (
    describe_mismatch,
    float_data,
    mismatches,
    quantized_data,
    requires_native,
    run_native,
    run_reference,
    scale_values,
    zp_values,
)

pytestmark = requires_native

# (op, src shape, axis or None, dst / src type, zps dtype or None)
CASES = [
    ("Quantize", (9_437_184,), None, "u8", "s32"),  # 9 MiB out: streaming stores
    ("Quantize", (7, 1_300_003), 0, "s8", "s32"),  # long runs starting at odd offsets
    ("Quantize", (2304, 4096), -1, "u8", "s32"),  # innermost, rows of 4096: row blocks
    ("Quantize", (3_000_017,), None, "f8_e4m3", None),
    ("Quantize", (1500, 2001), 1, "f8_e5m2", None),
    ("DynamicQuantize", (4, 2_500_001), None, "s8", "u8"),
    ("DynamicQuantize", (600, 5003), 1, "u8", "s8"),
    ("Dequantize", (4_194_304,), None, "s8", "s32"),  # 16 MiB out: streaming stores
    ("Dequantize", (1024, 4096), 1, "u8", "s32"),
    ("Dequantize", (3_000_017,), None, "f8_e5m2", None),
    ("Dequantize", (999, 3001), 1, "f8_e4m3", None),
    ("DynamicDequantize", (3, 1_000_003), 0, "u8", "u8"),
    ("DynamicDequantize", (700, 4099), -1, "s8", "s32"),
    # narrow innermost (issue #16): flat runs of a repeating pattern, streaming stores
    ("Quantize", (589_825, 16), -1, "u8", "s32"),
    ("DynamicQuantize", (24_577, 384), 1, "s8", "s8"),
    ("DynamicQuantize", (100_003, 48), 1, "u8", "u8"),
    ("Dequantize", (32_771, 64), -1, "u8", "s32"),
    ("DynamicDequantize", (5_463, 384), 1, "s8", "s8"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[3]}")
def test_millions_of_elements(isa: str, case: tuple[Any, ...]) -> None:
    op, shape, axis, qtype_name, zps_name = case
    rng = np.random.default_rng(sum(shape) + len(op))
    channels = 1 if axis is None else shape[axis]
    attrs: dict[str, Any] = {
        "qtype": "per_tensor" if axis is None else "per_channel",
        "axis": 1 if axis is None else axis,
    }
    q = dtypes.BY_NAME[qtype_name]
    quantize = "Dequantize" not in op
    scales = scale_values(rng, channels, allow_zero=not quantize)
    zps = None
    if zps_name is not None:
        zps = zp_values(rng, channels, dtypes.BY_NAME[zps_name].numpy)
        if zps_name == "s32":  # keep most in the SIMD range; a few extremes go scalar
            zps = (zps.astype(np.int64) % 1000 - 500).astype(np.int32)
    if quantize:
        src = float_data(rng, shape, float(scales[0]))
        if op == "Quantize":
            attrs["output_dtype"] = q.onnx
        else:
            attrs["output_dtype"] = q.onnx if zps is None or zps.dtype != q.numpy else 0
    else:
        src = quantized_data(rng, shape, q.numpy)
    want = run_reference(op, src, scales, zps, **attrs)
    got = run_native(op, src, scales, zps, isa=isa, **attrs)
    assert mismatches(got, want) == 0, describe_mismatch(src, got, want)


# DynamicDequantize's newer rows: (src, dst, shape, per_group group_shape / per_channel axis /
# None for per_tensor, zps type or None).
GROUP_CASES = [
    ("u4", "f32", (4096, 4096), [32, 1], "u4"),  # the benchmark's weights: 64 MiB out
    ("s4", "f16", (1024, 4096), [1, 32], "s4"),  # blocks along the rows: 8 MiB out
    ("u4", "bf16", (1001, 3003), [7, 1], "u8"),  # odd rows: their nibble phases alternate
    ("s4", "f32", (8, 128, 4099), [1, 128, 1], None),
    ("s8", "f16", (3, 1_000_003), 0, "s8"),
    ("u8", "bf16", (4_194_305,), None, "s32"),
    ("u4", "f16", (2, 2_100_001), 1, "u4"),
]


@pytest.mark.parametrize(
    "case", GROUP_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{'x'.join(map(str, c[2]))}-{c[3]}"
)
def test_millions_of_elements_per_group(isa: str, case: tuple[Any, ...]) -> None:
    src_name, dst_name, shape, layout, zps_name = case
    rng = np.random.default_rng(sum(shape))
    src_type, dst_type = dtypes.BY_NAME[src_name], dtypes.BY_NAME[dst_name]
    attrs: dict[str, Any] = {}
    params: tuple[int, ...] = (1,)
    if isinstance(layout, list):
        attrs = {"qtype": "per_group", "group_shape": layout}
        params = tuple(d // g for d, g in zip(shape, layout, strict=True))
    elif layout is not None:
        attrs = {"qtype": "per_channel", "axis": layout}
        params = (shape[layout],)
    low, high = src_type.int_range
    src = rng.integers(low, high + 1, shape, dtype=np.int16).astype(src_type.numpy)
    scales = scale_values(rng, int(np.prod(params)), allow_zero=True)
    with np.errstate(over="ignore"):  # f16: huge scales become inf
        scales = scales.astype(dst_type.numpy).reshape(params)
    zps = None
    if zps_name is not None:
        z = dtypes.BY_NAME[zps_name]
        zlow, zhigh = (-500, 500) if z == dtypes.S32 else z.int_range
        zps = rng.integers(zlow, zhigh + 1, params).astype(z.numpy)
    want = run_reference("DynamicDequantize", src, scales, zps, **attrs)
    got = run_native("DynamicDequantize", src, scales, zps, isa=isa, **attrs)
    result = compare("dst", want, got)
    assert result.agree, f"{result.mismatches} mismatches, first at {result.first_mismatch}"
