"""numpy model of what oneDNN's CPU engine computes for the four operators: the oracle of the
native backend's opt-in ``onednn`` arithmetic (session config entry ``quantgraph.arithmetic`` =
``onednn``). Never imports onnxruntime.

oneDNN Graph lowers Quantize/DynamicQuantize to a reorder with src scales ``1 / s`` and dst zero
points (``src/graph/backend/dnnl/passes/lower.cpp``: the static op computes ``1.f / s`` on the
host, the dynamic one an eltwise ``pow(s, -1)``, whose JIT is a ``vdivps`` for beta -1), and
the reorder (``cpu/x64/jit_uni_reorder.cpp``) multiplies, then adds the zero point converted
to float, then clamps (``jit_generator.hpp`` ``saturate_f32``) and converts with the MXCSR
rounding. In float32, with ``fl`` one rounding to nearest even::

    m = fl(1 / s)
    quantize s8/u8:  q = saturate(round_half_even(fl(fl(x * m) + fl(zp))))
    quantize f8:     q = f8(f16(fl(x * m) + 0))
    dequantize:      y = fl(fl(float(x) - fl(zp)) * s)       (f8: fl(x * s) + 0)

* Two roundings, no FMA, and the zero point is added before rounding (ONNX rounds ``x / s``
  and adds zp as an integer): the results differ near .5 ties (scale 0.0123, zp 128: ~4% of
  exact ties) and for s32 zero points above 2**24, which oneDNN rounds to float32.
* NaN quantizes to qmin (s8 -128, u8 0) in oneDNN v3.7+ on CPUs with AVX; v3.2-v3.6 (and any
  version on an SSE4.1-only CPU) give 127 for s8 (``onednn_version`` selects that rule);
  +-inf saturate. ``1 / s`` overflows to inf for tiny scales: then 0 quantizes as NaN.
* float8 (``common/float8.cpp``, ``float16.hpp``): through float16 (round to nearest even,
  overflow to inf), then without saturation: e4m3 magnitudes above 464 (inf, NaN) become
  ``sign | 0x7F`` (NaN), the rest round to nearest even (448 < |v| <= 464 to 448); e5m2 rounds
  the float16 bits to nearest even at bit 8 (61440 and up -> inf), NaN keeps its top payload
  bit (0x7E or 0x7F). The reference reorder adds its zero dst zero point: -0 becomes +0.
* Dequantize equals ONNX's ``float(x - zp) * s`` except where float(zp) is inexact (s32 zero
  points beyond 2**24) and for float8 -0 (oneDNN's +0). DynamicDequantize's other rows (f16/bf16
  dst, 4-bit, per_group) are not measured: the model, like the native kernels, keeps ONNX's.

Measured (tests/native/test_native_onednn_arithmetic.py keeps a sample): oneDNN v3.2.0 (PyPI
``onednn-cpu-gomp==2023.2.0``) and v3.13.2 (``onednn==2026.1.0``, f8 only there), single-op
Graph partitions on an AVX-512 CPU and capped by ``ONEDNN_MAX_CPU_ISA`` at SSE41/AVX/AVX2/
AVX512_CORE: 819,200 near-tie s8/u8 elements where the fused and two-rounding results differ on
17,012: the two-rounding model matched all; 352,000 with s32 zero points up to +-2**31: all;
every float16 value and 240,000 random values through f8_e4m3/f8_e5m2: all.

Not modelled: a static Quantize whose scales are all 1 and zero points all 0 runs an unscaled
reorder whose NaN result depends on the tensor's rank (rank 3-4: 0; rank 1-2: as above, but u8
255 on AVX-512 in v3.13); finite values are the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..spec import DType, dtypes
from . import onnx_arithmetic
from .broadcasting import broadcast_shape

ONEDNN_VERSION = (3, 13)  # the version whose rules quantize_values follows by default
NAN_TO_QMIN_SINCE = (3, 7)  # earlier versions quantize NaN to 127 for s8 dst


def reciprocals(scales: np.ndarray) -> np.ndarray:
    """``fl(1 / s)`` in float32, as oneDNN computes the reorder's scales (inf for tiny s)."""
    with np.errstate(divide="ignore", over="ignore"):
        result: np.ndarray = np.float32(1.0) / np.asarray(scales, dtype=np.float32)
    return result.astype(np.float32)


def float16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> float16 bits as oneDNN's ``float16_t``: nearest even, overflow to inf, NaN
    quieted with its top payload bits."""
    values = np.asarray(values, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = values.astype(np.float16).view(np.uint16).copy()
    nan = np.isnan(values)
    raw = values.view(np.uint32)[nan]
    bits[nan] = (((raw >> 16) & 0x8000) | 0x7E00 | ((raw >> 13) & 0x3FF)).astype(np.uint16)
    return bits


def e4m3_from_float16(half: np.ndarray) -> np.ndarray:
    """float16 bits -> f8_e4m3 codes as oneDNN's ``float8_e4m3_t`` (no saturation)."""
    h = half.astype(np.int32)
    sign = (h >> 8) & 0x80
    mag = h & 0x7FFF
    # Normal codes (from 2**-6, float16 0x2400): the mantissa rounded to 3 bits, half to even;
    # a carry moves the exponent (bias 15 -> 7).
    normal = ((mag + 0x3F + ((mag >> 7) & 1)) >> 7) - (8 << 3)
    # Subnormal codes: the value in units of 2**-9, half to even (exact in float64).
    value = mag.astype(np.uint16).view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):
        subnormal = np.rint(np.where(mag < 0x2400, value, 0.0) * 512.0).astype(np.int32)
    code = np.where(mag < 0x2400, subnormal, normal)
    code = np.where(mag > 0x5F40, 0x7F, code)  # above 464, inf, NaN: NaN
    result: np.ndarray = (sign | code).astype(np.uint8)
    return result


def e5m2_from_float16(half: np.ndarray) -> np.ndarray:
    """float16 bits -> f8_e5m2 codes as oneDNN's ``float8_e5m2_t``: the same exponent, so the
    bits round to nearest even at bit 8 (overflow to inf); NaN keeps its top payload bit."""
    h = half.astype(np.int32)
    nan = (h & 0x7FFF) > 0x7C00
    code = np.where(nan, (h >> 8) | 0x02, (h + 0x7F + ((h >> 8) & 1)) >> 8)
    result: np.ndarray = code.astype(np.uint8)
    return result


def quantize_values(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    dst: DType,
    *,
    onednn_version: tuple[int, int] = ONEDNN_VERSION,
) -> np.ndarray:
    """Quantize with already validated arguments as oneDNN does (module docstring); ``axis``
    None means per-tensor. Same signature as :func:`.onnx_arithmetic.quantize_values`."""
    src = np.asarray(src, dtype=np.float32)
    shape = broadcast_shape(src.ndim, axis)
    multiplier = reciprocals(scales).reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        product = (src * multiplier).astype(np.float32)
    if dst.is_float8:
        plus_zero = (product + np.float32(0.0)).astype(np.float32)  # -0 -> +0
        half = float16_bits(plus_zero)
        codes = e4m3_from_float16(half) if dst == dtypes.F8_E4M3 else e5m2_from_float16(half)
        return codes.view(dst.numpy)
    value = product
    if zps is not None:
        zp = np.asarray(zps, dtype=np.int64).reshape(shape).astype(np.float32)  # rounds > 2**24
        with np.errstate(over="ignore", invalid="ignore"):
            value = (product + zp).astype(np.float32)
    qmin, qmax = dst.int_range
    wide = value.astype(np.float64)
    nan = np.isnan(wide)
    clipped = np.clip(np.where(nan, 0.0, wide), qmin, qmax)
    rounded = np.rint(clipped)  # half to even
    nan_value = qmin if dst != dtypes.S8 or onednn_version >= NAN_TO_QMIN_SINCE else qmax
    result: np.ndarray = np.where(nan, nan_value, rounded).astype(dst.numpy)
    return result


def dequantize_values(
    src: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    dst: DType = dtypes.F32,
    group_shape: Sequence[int] | None = None,
) -> np.ndarray:
    """Dequantize with already validated arguments as oneDNN does (module docstring). Same
    signature as :func:`.onnx_arithmetic.dequantize_values`, which it equals except for
    s32 zero points beyond 2**24 and float8 -0; rows other than s8/u8/f8 -> f32 with f32
    scales per tensor or channel are :mod:`quantgraph.reference`'s."""
    source = dtypes.from_numpy(np.asarray(src).dtype)
    scale_array = np.asarray(scales)
    measured = (dtypes.S8, dtypes.U8, dtypes.F8_E4M3, dtypes.F8_E5M2)
    if (
        group_shape is not None
        or dst != dtypes.F32
        or scale_array.dtype != np.float32
        or source not in measured
    ):
        return onnx_arithmetic.dequantize_values(src, scales, zps, axis, dst, group_shape)
    shape = broadcast_shape(src.ndim, axis)
    scale = scale_array.reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        if source.is_float8:
            product = (src.astype(np.float32) * scale).astype(np.float32)
            result: np.ndarray = (product + np.float32(0.0)).astype(np.float32)  # -0 -> +0
            return result
        values = src.astype(np.float32)
        if zps is not None:
            zp = np.asarray(zps, dtype=np.int64).reshape(shape).astype(np.float32)
            values = (values - zp).astype(np.float32)
        result = (values * scale).astype(np.float32)
    return result
