"""Helpers of the native-backend tests: one-node models of the spec ops and of onnxruntime's
QuantizeLinear/DequantizeLinear, run at ORT_DISABLE_ALL with raw-byte outputs (onnxruntime's
Python API has no numpy type for float8_e5m2, so outputs are read through OrtValue.data_ptr).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, TypedDict

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

from quantgraph import reference
from quantgraph.backends import native
from quantgraph.reference.compare import compare
from quantgraph.spec import DOMAIN, dtypes
from quantgraph.testing import (
    Input,
    from_ort_value,
    one_op_model,
    ort_session,
    quiet_session_options,
    to_ort_value,
    typed_list,
)
from tools import fuzz

F32_TYPE = TensorProto.FLOAT

NATIVE_BUILT = native.is_available()
requires_native = pytest.mark.skipif(
    not NATIVE_BUILT,
    reason="native library not built (pip install -e . builds it, or QUANTGRAPH_NATIVE_LIBRARY)",
)


class SpecAttributes(TypedDict, total=False):
    """Spec-op attributes the native tests vary, as spec_model, run_native and run_reference
    take them (the latter two take a static op's scales and zps as arguments)."""

    qtype: str
    axis: int
    group_shape: list[int]
    output_dtype: int


class StaticSpecAttributes(SpecAttributes, total=False):
    """A static op's attributes for spec_model, scales and zps included."""

    scales: list[float]
    zps: list[int]


NUMPY_OF_ONNX: dict[int, np.dtype] = {d.onnx: d.numpy for d in dtypes.ALL}


def onnx_type(array: np.ndarray) -> int:
    return dtypes.onnx_of_numpy(array.dtype)


def symbolic_shape(rank: int, prefix: str = "d") -> list[str]:
    return [f"{prefix}{i}" for i in range(rank)]


def spec_model(
    op: str,
    src_type: int,
    rank: int,
    *,
    scales_type: int | None = None,
    zps_type: int | None = None,
    out_type: int | None = None,
    out_shape: Sequence[int | str] | None = None,
    node_name: str = "node",
    params_rank: int = 1,
    **attributes: Any,
) -> onnx.ModelProto:
    """One spec op over inputs of symbolic shape (so a session serves every shape of a rank);
    scales and zps of rank ``params_rank`` (per_group: src's rank).

    ``out_type`` None leaves dst untyped: the library's shape inference decides its type.
    """
    params = ["c"] if params_rank == 1 else symbolic_shape(params_rank, "c")
    inputs: dict[str, Input] = {"src": (src_type, symbolic_shape(rank))}
    if scales_type is not None:
        inputs["scales"] = (scales_type, params)
    if zps_type is not None:
        inputs["scales"] = inputs.get("scales", "")
        inputs["zps"] = (zps_type, params)
    floats = {"scales": True, "zps": False}  # typed: an empty list has no inferable type
    for key, is_float in floats.items():
        if isinstance(attributes.get(key), list):
            attributes[key] = typed_list(attributes[key], floats=is_float)
    if attributes.get("group_shape") == []:  # per_group on a 0-d src
        attributes["group_shape"] = typed_list([], floats=False)
    output = None if out_type is None else (out_type, out_shape)
    return one_op_model(
        op, inputs, {"dst": output}, domain=DOMAIN, name=node_name, graph_name="spec", **attributes
    )


def options(threads: int = 0) -> ort.SessionOptions:
    # Many cached sessions each own a pool: idle workers must not spin and starve the rest.
    return quiet_session_options(threads=threads, spinning=False)


def native_session(model: onnx.ModelProto, threads: int = 0) -> ort.InferenceSession:
    opts = options(threads)
    native.register(opts)
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=64)
def _cached_session(serialized: bytes, threads: int, isa: str) -> ort.InferenceSession:
    del isa  # part of the key only: the ISA is chosen when the session creates its kernels
    opts = options(threads)
    native.register(opts)
    return ort.InferenceSession(serialized, opts, providers=["CPUExecutionProvider"])


def run_session(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> np.ndarray:
    values = {name: to_ort_value(array) for name, array in feeds.items()}
    return from_ort_value(session.run_with_ort_values(None, values)[0])


STATIC_OPS = ("Quantize", "Dequantize")


def _to_attributes(scales: Any, zps: Any, attributes: dict[str, Any]) -> bool:
    """Static ops: scales / zps given as arguments become the attributes (lists)."""
    if scales is not None:
        attributes["scales"] = [float(v) for v in np.asarray(scales).reshape(-1)]
    if zps is not None:
        attributes["zps"] = [int(v) for v in np.asarray(zps).reshape(-1)]
    return True


def run_native(
    op: str,
    src: np.ndarray,
    scales: np.ndarray | None = None,
    zps: np.ndarray | None = None,
    *,
    threads: int = 0,
    isa: str = "",
    **attributes: Any,
) -> np.ndarray:
    """Run one op in the native library (sessions cached per model; dynamic ops take scales
    and zps as inputs, static ones as attributes)."""
    if op in STATIC_OPS:
        _to_attributes(scales, zps, attributes)
        scales, zps = None, None
    model = spec_model(
        op,
        onnx_type(src),
        src.ndim,
        scales_type=None if scales is None else onnx_type(scales),
        zps_type=None if zps is None else onnx_type(zps),
        params_rank=1 if scales is None else scales.ndim,
        **attributes,
    )
    session = _cached_session(model.SerializeToString(), threads, isa)
    feeds = {"src": src}
    if scales is not None:
        feeds["scales"] = scales
    if zps is not None:
        feeds["zps"] = zps
    return run_session(session, feeds)


def run_reference(
    op: str,
    src: np.ndarray,
    scales: np.ndarray | None = None,
    zps: np.ndarray | None = None,
    **attributes: Any,
) -> np.ndarray:
    if op in STATIC_OPS:
        _to_attributes(scales, zps, attributes)
        return reference.run(op, [src], attributes)
    return reference.run(op, [src, scales, zps], attributes)


# ---- onnxruntime's own QuantizeLinear / DequantizeLinear --------------------------------


@functools.lru_cache(maxsize=32)
def _ort_qdq_session(
    op: str, src_type: int, rank: int, per_axis: bool, zp_type: int, out_type: int, axis: int
) -> ort.InferenceSession:
    params = ["c"] if per_axis else []
    inputs: dict[str, Input] = {"x": (src_type, symbolic_shape(rank)), "scale": (F32_TYPE, params)}
    if zp_type:
        inputs["zp"] = (zp_type, params)
    attributes: dict[str, Any] = {"axis": axis}
    if op == "QuantizeLinear" and not zp_type:
        attributes["output_dtype"] = out_type
    model = one_op_model(
        op, inputs, {"y": (out_type, None)}, name="", graph_name="qdq", **attributes
    )
    return ort_session(model, options())


def run_ort_qdq(
    op: str,
    x: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    axis: int | None,
    out_type: int,
) -> np.ndarray:
    """onnxruntime's QuantizeLinear / DequantizeLinear (opset 21): axis None = per tensor."""
    per_axis = axis is not None
    session = _ort_qdq_session(
        op,
        onnx_type(x),
        x.ndim,
        per_axis,
        0 if zps is None else onnx_type(zps),
        out_type,
        axis if axis is not None else 1,
    )
    feeds = {"x": x, "scale": scales if per_axis else scales.reshape(())}
    if zps is not None:
        feeds["zp"] = zps if per_axis else zps.reshape(())
    return run_session(session, feeds)


@functools.lru_cache(maxsize=64)
def _ort_dequantize_session(
    src_type: int,
    rank: int,
    scale_type: int,
    scale_rank: int,
    zp_type: int,
    attrs: tuple[tuple[str, int], ...],
) -> ort.InferenceSession:
    params = symbolic_shape(scale_rank, "c")
    inputs: dict[str, Input] = {
        "x": (src_type, symbolic_shape(rank)),
        "scale": (scale_type, params),
    }
    if zp_type:
        inputs["zp"] = (zp_type, params)
    attributes: dict[str, Any] = dict(attrs)  # one_op_model's **attributes: Any
    model = one_op_model(
        "DequantizeLinear",
        inputs,
        {"y": (scale_type, None)},
        name="",
        graph_name="dq",
        **attributes,
    )
    return ort_session(model, options())


def run_ort_dequantize(
    x: np.ndarray,
    scales: np.ndarray,
    zps: np.ndarray | None,
    *,
    axis: int | None = None,
    block_size: int = 0,
) -> np.ndarray:
    """onnxruntime's DequantizeLinear-21, any src type (int4 too) and float32/float16 scales:
    per tensor (axis None: scalar scale), per axis (1-D scales) or blocked (block_size, scales
    of x's rank)."""
    per_tensor = axis is None
    scale = scales.reshape(()) if per_tensor else scales
    zp = None if zps is None else (zps.reshape(()) if per_tensor else zps)
    attrs: dict[str, int] = {} if axis is None else {"axis": axis}
    if block_size:
        attrs["block_size"] = block_size
    session = _ort_dequantize_session(
        onnx_type(x),
        x.ndim,
        onnx_type(scale),
        scale.ndim,
        0 if zp is None else onnx_type(zp),
        tuple(sorted(attrs.items())),
    )
    feeds = {"x": x, "scale": scale}
    if zp is not None:
        feeds["zp"] = zp
    return run_session(session, feeds)


# ---- comparison -------------------------------------------------------------------------


def mismatches(got: np.ndarray, want: np.ndarray) -> int:
    """Elements whose bits differ (float NaNs compare by bits too)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.size == 0:
        return 0
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    return int(np.count_nonzero(got.view(width) != want.view(width)))


def mismatches_nan_equal(got: np.ndarray, want: np.ndarray) -> int:
    """As :func:`mismatches`, but any two NaNs are equal (onnxruntime's float8_e5m2 NaN code
    is 0x7F, ml_dtypes' 0x7E): quantgraph.reference.compare's rule."""
    return compare("", want, got).mismatches


def describe_mismatch(src: np.ndarray, got: np.ndarray, want: np.ndarray, limit: int = 5) -> str:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    bad = np.flatnonzero(got.reshape(-1).view(width) != want.reshape(-1).view(width))
    flat = src.reshape(-1)
    rows = [
        f"[{i}] src={flat[i]!r} got={got.reshape(-1)[i]!r} want={want.reshape(-1)[i]!r}"
        for i in bad[:limit]
    ]
    return f"{bad.size} mismatches: " + "; ".join(rows)


# ---- data -------------------------------------------------------------------------------

F32 = np.float32
# The fuzzer's special values (ties, saturation edges, float8 edges, extremes) and a few more.
SPECIAL_FLOATS = np.concatenate(
    [
        fuzz.SPECIAL_FLOATS,
        np.array(
            [-1.5, 2.5, 126.5, -127.5, np.nan, -np.nan, 3 * 2.0**-11, 3 * 2.0**-18, 1e30, -1e30],
            dtype=F32,
        ),
    ]
)
NAN_PAYLOADS = np.array(
    [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA00000], dtype=np.uint32
).view(F32)


def float_data(rng: np.random.Generator, shape: Sequence[int], scale: float = 1.0) -> np.ndarray:
    """float32 values that stress quantize: ties of x / scale, clip bounds, specials, raw bits."""
    n = int(np.prod(shape, dtype=np.int64))
    kind = rng.integers(0, 6, n)
    out = np.empty(n, F32)
    wide = rng.standard_normal(n).astype(F32) * F32(300.0)
    ties = (rng.integers(-300, 300, n).astype(F32) + F32(0.5)) * F32(scale)
    specials = np.concatenate([SPECIAL_FLOATS, NAN_PAYLOADS])
    picked = specials[rng.integers(0, specials.size, n)]
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(F32)
    small = rng.standard_normal(n).astype(F32) * F32(abs(scale) * 4.0)
    near = (rng.integers(-260, 260, n).astype(F32) + F32(0.5)) * F32(scale)
    near = np.nextafter(near, np.where(rng.integers(0, 2, n) == 1, F32(np.inf), F32(-np.inf)))
    for k, values in enumerate((wide, ties, picked, bits, small, near)):
        out[kind == k] = values[kind == k]
    return out.reshape(shape)


def quantized_data(rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Every bit pattern of an 8-bit type, at random."""
    n = int(np.prod(shape, dtype=np.int64))
    return rng.integers(0, 256, n, dtype=np.uint16).astype(np.uint8).view(dtype).reshape(shape)


def scale_values(rng: np.random.Generator, count: int, *, allow_zero: bool = False) -> np.ndarray:
    """Scales of every magnitude and sign (finite and non-zero unless allow_zero)."""
    choices = np.array(
        [1.0, 0.5, 0.25, 2.0, 0.1, 0.007, 3.7, -0.5, -1.3, 1e-30, 1e30, 1e-40, 65536.0],
        dtype=F32,
    )
    kind = rng.integers(0, 2, count)
    picked = choices[rng.integers(0, choices.size, count)]
    random = (rng.random(count) * 2.0 + 0.01).astype(F32) * np.where(
        rng.integers(0, 5, count) == 0, F32(-1.0), F32(1.0)
    )
    out = np.where(kind == 0, picked, random).astype(F32)
    if allow_zero:
        out[rng.integers(0, 4, count) == 0] = 0.0
    return out


def zp_values(rng: np.random.Generator, count: int, dtype: np.dtype) -> np.ndarray:
    if dtype == np.int32:
        extremes = np.array(
            [0, 1, -1, 2**31 - 1, -(2**31), 2**30, -(2**30), 1000, -1000, 2**30 - 1], np.int64
        )
        kind = rng.integers(0, 3, count)
        picked = extremes[rng.integers(0, extremes.size, count)]
        small = rng.integers(-300, 300, count)
        wide = rng.integers(-(2**31), 2**31, count)
        return np.select([kind == 0, kind == 1], [picked, small], wide).astype(np.int32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, count).astype(dtype)
