"""The ``dequantize_4bit`` rows of :mod:`quantgraph.bench.kernels`: 4-bit weights ``[K, N]`` to f32,
native DynamicDequantize against onnxruntime's own DequantizeLinear on the same call (opset 21,
int4/uint4) and ``np.copyto`` of the f32 result, timed with the bench's interleaved blocks."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ..backends.ort_sessions import ort_session
from ..spec import DOMAIN, DYNAMIC_DEQUANTIZE
from ..testing import Input, Output, one_op_model
from .timing import (
    ON_BACKEND,
    BenchRow,
    Progress,
    measure,
    progress_line,
    timed_options,
    unavailable_reason,
)

# 4-bit weights dequantized to f32 (op "dequantize_4bit"): layout -> (src type, zero points,
# group_shape as [rows, columns] or None for per_channel on axis 1).
WEIGHT_OP = "dequantize_4bit"
WEIGHT_LAYOUTS: dict[str, tuple[int, bool, tuple[int, int] | None]] = {
    "u4_block32_axis0": (TensorProto.UINT4, True, (32, 1)),  # MatMulNBits-style QDQ weights
    "s4_block32_axis0": (TensorProto.INT4, False, (32, 1)),  # symmetric: no zero points
    "u4_block32_axis1": (TensorProto.UINT4, True, (1, 32)),
    "u4_per_channel_axis1": (TensorProto.UINT4, True, None),
}
DEFAULT_WEIGHTS = ((4096, 4096),)
WEIGHT_IMPLEMENTATIONS = ("native", "onnxruntime", "copyto")


def _weight_parameters(
    layout: str, shape: tuple[int, int]
) -> tuple[int, np.ndarray, np.ndarray | None, tuple[int, int] | None]:
    """(src type, f32 scales, 4-bit zero points as int values or None, group shape)."""
    src, with_zps, group = WEIGHT_LAYOUTS[layout]
    params = (shape[0] // group[0], shape[1] // group[1]) if group else (shape[1],)
    rng = np.random.default_rng(1)
    scales = (rng.random(params) * 0.05 + 0.001).astype(np.float32)
    zps = rng.integers(0, 16, params).astype(np.int8) if with_zps else None
    return src, scales, zps, group


def _weight_models(layout: str, shape: tuple[int, int]) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The native DynamicDequantize model and onnxruntime's DequantizeLinear one."""
    src, scales, zps, group = _weight_parameters(layout, shape)
    inputs: dict[str, Input] = {"x": (src, shape), "s": scales}
    if zps is not None:
        inputs["z"] = zps.astype(helper.tensor_dtype_to_np_dtype(src))  # packed as an initializer
    outputs: dict[str, Output] = {"y": (TensorProto.FLOAT, shape)}
    attrs: dict[str, Any] = (
        {"qtype": "per_group", "group_shape": list(group)}
        if group
        else {"qtype": "per_channel", "axis": 1}
    )
    spec = one_op_model(
        DYNAMIC_DEQUANTIZE.name,
        inputs,
        outputs,
        domain=DOMAIN,
        name="weights",
        graph_name="bench",
        **attrs,
    )
    if group is None:
        qdq_attrs: dict[str, Any] = {"axis": 1}
    else:
        axis = 0 if group[0] > 1 else 1
        qdq_attrs = {"axis": axis, "block_size": group[axis]}
    qdq = one_op_model(
        "DequantizeLinear", inputs, outputs, name="", graph_name="bench", **qdq_attrs
    )
    return spec, qdq


def _weight_runners(
    layout: str, shape: tuple[int, int], implementations: Sequence[str], notes: dict[str, str]
) -> dict[str, Callable[[], None]]:
    """Bound runners of one 4-bit weight row; the sessions share one packed input and one f32
    output buffer (as _Buffers does for the other rows)."""
    src = WEIGHT_LAYOUTS[layout][0]
    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, (shape[0] * shape[1] + 1) // 2, dtype=np.uint8)
    x = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), src)
    ctypes.memmove(x.data_ptr(), packed.ctypes.data, packed.size)
    y_array = np.empty(shape, np.float32)
    y = ort.OrtValue.ortvalue_from_numpy(y_array)
    spec, qdq = _weight_models(layout, shape)
    calls: dict[str, Callable[[], None]] = {}
    for impl in implementations:
        if impl not in WEIGHT_IMPLEMENTATIONS:
            notes[impl] = "not timed for 4-bit weights"
            continue
        reason = unavailable_reason(impl)
        if reason is not None:
            notes[impl] = reason
            continue
        if impl == "copyto":
            source = np.zeros(shape, np.float32)
            target = np.empty_like(source)
            calls[impl] = functools.partial(np.copyto, target, source)
            continue
        options = timed_options()
        on_backend = ON_BACKEND.get(impl)  # the spec op on a backend, else onnxruntime's Q/DQ
        if on_backend is not None:
            from ..backends import session_options

            session_options(on_backend[0], options, arithmetic=on_backend[1])
        model = spec if on_backend is not None else qdq
        session = ort_session(model, options)
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        calls[impl] = functools.partial(session.run_with_iobinding, binding)
    return calls


def weight_rows(
    weights: Sequence[tuple[int, int]],
    layouts: Sequence[str],
    implementations: Sequence[str],
    repeat: int,
    progress: Progress | None,
    on_row: Callable[[BenchRow], None] | None = None,
) -> list[BenchRow]:
    rows = []
    for shape in weights:
        for layout in layouts:
            notes: dict[str, str] = {}
            calls = _weight_runners(layout, shape, implementations, notes)
            measure(calls, 3)  # first touch of the output and the sessions' pools
            measured = measure(calls, repeat)
            seconds: dict[str, float | None] = {
                impl: measured.get(impl) for impl in implementations
            }
            n = shape[0] * shape[1]
            _, scales, zps, _ = _weight_parameters(layout, shape)
            moved = (n + 1) // 2 + 4 * n + scales.nbytes + (0 if zps is None else zps.size // 2)
            row = BenchRow(WEIGHT_OP, layout, tuple(shape), moved, seconds, notes)
            rows.append(row)
            if progress is not None:
                progress(progress_line(row))
            if on_row is not None:
                on_row(row)
    return rows
