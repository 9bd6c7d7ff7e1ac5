"""Helpers of the native-backend tests: one-node models of the spec ops and of onnxruntime's
QuantizeLinear/DequantizeLinear, run at ORT_DISABLE_ALL with raw-byte outputs (onnxruntime's
Python API has no numpy type for float8_e5m2, so outputs are read through OrtValue.data_ptr).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from quantgraph import reference
from quantgraph.backends import native
from quantgraph.spec import DOMAIN, OPSET_VERSION, dtypes
from tools import fuzz

NATIVE_BUILT = native.is_available()
requires_native = pytest.mark.skipif(
    not NATIVE_BUILT,
    reason="native library not built (pip install -e . builds it, or QUANTGRAPH_NATIVE_LIBRARY)",
)

NUMPY_OF_ONNX: dict[int, np.dtype] = {d.onnx: d.numpy for d in dtypes.ALL}
_NUMPY_OF_DATA_TYPE = {
    "tensor(float)": np.dtype(np.float32),
    "tensor(uint8)": np.dtype(np.uint8),
    "tensor(int8)": np.dtype(np.int8),
    "tensor(int32)": np.dtype(np.int32),
    "tensor(float8e4m3fn)": dtypes.F8_E4M3.numpy,
    "tensor(float8e5m2)": dtypes.F8_E5M2.numpy,
    "tensor(float16)": np.dtype(np.float16),
    "tensor(bfloat16)": dtypes.BF16.numpy,
}
OPSET_IMPORTS = [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)]


def onnx_type(array: np.ndarray) -> int:
    found = dtypes.from_numpy(array.dtype)
    if found is not None:
        return found.onnx
    return int(helper.np_dtype_to_tensor_dtype(array.dtype))


def pack4(array: np.ndarray) -> np.ndarray:
    """A 4-bit tensor's bytes as ONNX and onnxruntime store them: two elements a byte, the
    first in the low nibble; an odd count leaves the last high nibble zero."""
    nibbles = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & 0xF
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    packed: np.ndarray = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)
    return packed


def to_ort_value(array: np.ndarray) -> ort.OrtValue:
    # ortvalue_from_numpy turns a 0-d array into shape [1]; the _with_onnx_type one keeps it.
    array = np.array(array, copy=True, order="C")  # (ascontiguousarray makes 0-d 1-d)
    found = dtypes.from_numpy(array.dtype)
    if found is not None and found.bits == 4:
        # numpy holds one element a byte; onnxruntime's tensor is packed: allocate it with the
        # logical shape and copy the packed bytes in.
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), found.onnx)
        packed = pack4(array)
        if packed.size:
            ctypes.memmove(value.data_ptr(), packed.ctypes.data, packed.size)
        return value
    if found is not None and found.from_ml_dtypes:  # float8, bfloat16: the raw bits
        width = np.uint8 if found.bits == 8 else np.uint16
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(width), found.onnx)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array, onnx_type(array))


def from_ort_value(value: ort.OrtValue) -> np.ndarray:
    dtype = _NUMPY_OF_DATA_TYPE[value.data_type()]
    shape = tuple(value.shape())
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.zeros(shape, dtype)
    size = count * dtype.itemsize
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(value.data_ptr()))
    return raw.copy().view(dtype).reshape(shape)


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
    extra_inputs: Sequence[str] = (),
    params_rank: int = 1,
    **attributes: Any,
) -> onnx.ModelProto:
    """One spec op over inputs of symbolic shape (so a session serves every shape of a rank);
    scales and zps of rank ``params_rank`` (per_group: src's rank).

    ``out_type`` None leaves dst untyped: the library's shape inference decides its type.
    """
    inputs = ["src"]
    value_infos = [helper.make_tensor_value_info("src", src_type, symbolic_shape(rank))]
    params = ["c"] if params_rank == 1 else symbolic_shape(params_rank, "c")
    if scales_type is not None:
        inputs.append("scales")
        value_infos.append(helper.make_tensor_value_info("scales", scales_type, params))
    if zps_type is not None:
        if scales_type is None:
            inputs.append("")
        inputs.append("zps")
        value_infos.append(helper.make_tensor_value_info("zps", zps_type, params))
    inputs.extend(extra_inputs)
    typed = {"scales": onnx.AttributeProto.FLOATS, "zps": onnx.AttributeProto.INTS}
    lists = {k: attributes.pop(k) for k in typed if isinstance(attributes.get(k), list)}
    if attributes.get("group_shape") == []:  # per_group on a 0-d src
        lists["group_shape"] = attributes.pop("group_shape")
        typed["group_shape"] = onnx.AttributeProto.INTS
    node = helper.make_node(op, inputs, ["dst"], domain=DOMAIN, name=node_name, **attributes)
    for key, value in lists.items():  # typed explicitly: an empty list has no inferable type
        node.attribute.append(helper.make_attribute(key, value, attr_type=typed[key]))
    if out_type is None:
        output = onnx.ValueInfoProto(name="dst")
    else:
        output = helper.make_tensor_value_info("dst", out_type, out_shape)
    graph = helper.make_graph([node], "spec", value_infos, [output])
    return helper.make_model(graph, opset_imports=OPSET_IMPORTS)


def options(threads: int = 0) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 4  # errors are asserted on, not logged
    # Many cached sessions each own a pool: idle workers must not spin and starve the rest.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


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
    inputs = ["x", "scale"] + (["zp"] if zp_type else [])
    value_infos = [
        helper.make_tensor_value_info("x", src_type, symbolic_shape(rank)),
        helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["c"] if per_axis else []),
    ]
    if zp_type:
        value_infos.append(helper.make_tensor_value_info("zp", zp_type, ["c"] if per_axis else []))
    attributes: dict[str, Any] = {"axis": axis}
    if op == "QuantizeLinear" and not zp_type:
        attributes["output_dtype"] = out_type
    node = helper.make_node(op, inputs, ["y"], **attributes)
    graph = helper.make_graph(
        [node], "qdq", value_infos, [helper.make_tensor_value_info("y", out_type, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return ort.InferenceSession(
        model.SerializeToString(), options(), providers=["CPUExecutionProvider"]
    )


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
    inputs = ["x", "scale"] + (["zp"] if zp_type else [])
    params = symbolic_shape(scale_rank, "c")
    value_infos = [
        helper.make_tensor_value_info("x", src_type, symbolic_shape(rank)),
        helper.make_tensor_value_info("scale", scale_type, params),
    ]
    if zp_type:
        value_infos.append(helper.make_tensor_value_info("zp", zp_type, params))
    node = helper.make_node("DequantizeLinear", inputs, ["y"], **dict(attrs))
    graph = helper.make_graph(
        [node], "dq", value_infos, [helper.make_tensor_value_info("y", scale_type, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return ort.InferenceSession(
        model.SerializeToString(), options(), providers=["CPUExecutionProvider"]
    )


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
    is 0x7F, ml_dtypes' 0x7E)."""
    g = got.astype(np.float32)
    w = want.astype(np.float32)
    both_nan = np.isnan(g) & np.isnan(w)
    return int(np.count_nonzero((g.view(np.uint32) != w.view(np.uint32)) & ~both_nan))


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
