"""Kernel benchmarks: the native library against onnxruntime's own QuantizeLinear /
DequantizeLinear, the Python backend and a preallocated ``np.copyto`` of the same float data.

For each op (quantize f32 -> u8, dequantize u8 -> f32, both with zero points), layout and size,
every implementation runs in one process on the same input: per-tensor (shape ``[n]``),
per-channel on the outer axis (``[C, n/C]``, axis 0) and on the innermost axis (``[n/C, C]``,
axis 1, as MatMul weights). C is the largest power of two dividing n with C * C <= n. The
onnxruntime sessions (native and built-in) run at ``ORT_DISABLE_ALL`` with the default
intra-op threads and I/O bound to the same preallocated input and output memory, so a timing is
one ``Run`` (kernel plus onnxruntime's per-call overhead) and nothing of Python's conversions or
of where each session's buffers happen to land. The implementations take
turns in rounds of timed blocks; a time is the median block mean.

Rows of op ``dequantize_4bit`` time 4-bit weights (``[K, N]``, default ``[4096, 4096]``) to f32:
the native ``DynamicDequantize`` (per_group ``[32, 1]``, ONNX ``block_size`` 32 on axis 0; per
row ``[1, 32]``; per_channel on axis 1) against onnxruntime's own ``DequantizeLinear`` of the
same call (opset 21, int4/uint4 weights) and ``np.copyto`` of the f32 result; the weights are
one shared int4/uint4 input, scales and zero points initializers
(:data:`quantgraph.bench.weights.WEIGHT_LAYOUTS`).

``quantgraph bench`` prints :func:`format_table`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

from ..backends.ort_sessions import ort_session
from ..cpu import cpu as this_cpu
from ..spec import DEQUANTIZE, DOMAIN, PER_TENSOR, QUANTIZE
from ..testing import one_op_model
from . import weights as bench_weights
from .timing import (
    ON_BACKEND,
    SETTINGS,
    BenchRow,
    Progress,
    measure,
    microseconds,
    progress_line,
    timed_options,
    unavailable_reason,
)

DEFAULT_SIZES = (1_000, 65_536, 1_048_576, 16_777_216)
DIRECTIONS = ("quantize", "dequantize")  # timed as static Quantize / Dequantize
LAYOUTS = (PER_TENSOR, "per_channel_outer", "per_channel_inner")
NARROW_COLUMNS = (16, 64, 384)
IMPLEMENTATIONS = ("native", "native_onednn", "onednn", "onnxruntime", "python", "numpy", "copyto")
# Innermost-axis layouts with a fixed number of columns (attention heads, small projections):
# "per_channel_inner_c64" is [n // 64, 64], axis 1.
NARROW_PREFIX = "per_channel_inner_c"
DEFAULT_LAYOUTS = (*LAYOUTS, *(f"{NARROW_PREFIX}{c}" for c in NARROW_COLUMNS))


def channels_for(n: int) -> int:
    """The largest power of two C dividing n with C * C <= n (1 if none)."""
    c = 1
    while n % (2 * c) == 0 and (2 * c) * (2 * c) <= n:
        c *= 2
    return c


def _layout(layout: str, n: int) -> tuple[tuple[int, ...], int | None]:
    if layout.startswith(NARROW_PREFIX):
        columns = int(layout.removeprefix(NARROW_PREFIX))
        return (n // columns, columns), 1
    c = channels_for(n)
    if layout == PER_TENSOR:
        return (n,), None
    if layout == "per_channel_outer":
        return (c, n // c), 0
    return (n // c, c), 1


def _parameters(count: int) -> tuple[np.ndarray, np.ndarray]:
    scales = np.linspace(0.01, 0.05, count, dtype=np.float32)
    zps = np.full(count, 128, np.uint8)
    return scales, zps


def _spec_model(op: str, shape: tuple[int, ...], axis: int | None) -> onnx.ModelProto:
    count = 1 if axis is None else shape[axis]
    scales, zps = _parameters(count)
    attrs: dict[str, Any] = {"scales": [float(s) for s in scales], "zps": [int(z) for z in zps]}
    if axis is not None:
        attrs.update(qtype="per_channel", axis=axis)
    if op == "quantize":
        attrs["output_dtype"] = TensorProto.UINT8
        name, src, dst = QUANTIZE.name, TensorProto.FLOAT, TensorProto.UINT8
    else:
        name, src, dst = DEQUANTIZE.name, TensorProto.UINT8, TensorProto.FLOAT
    return one_op_model(
        name,
        {"x": (src, shape)},
        {"y": (dst, shape)},
        domain=DOMAIN,
        name=name.lower(),
        graph_name="bench",
        **attrs,
    )


def _qdq_model(op: str, shape: tuple[int, ...], axis: int | None) -> onnx.ModelProto:
    count = 1 if axis is None else shape[axis]
    scales, zps = _parameters(count)
    if axis is None:
        scales, zps = scales.reshape(()), zps.reshape(())
    name = "QuantizeLinear" if op == "quantize" else "DequantizeLinear"
    src, dst = (
        (TensorProto.FLOAT, TensorProto.UINT8)
        if op == "quantize"
        else (TensorProto.UINT8, TensorProto.FLOAT)
    )
    return one_op_model(
        name,
        {"x": (src, shape), "s": scales, "z": zps},
        {"y": (dst, shape)},
        name="",
        graph_name="bench",
        axis=1 if axis is None else axis,
    )


def _input(op: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    if op == "quantize":
        return (rng.standard_normal(shape) * 2.0).astype(np.float32)
    return rng.integers(0, 256, shape, dtype=np.uint8)


@dataclass(frozen=True)
class _Buffers:
    """The input and output memory of one (op, size), shared by the sessions timed against each
    other (viewed in each layout's shape): where a buffer lands (page offsets, huge pages) moved
    one implementation's timings by up to 30% from one process to the next."""

    x: np.ndarray  # flat
    y: np.ndarray  # flat

    @classmethod
    def make(cls, op: str, n: int) -> _Buffers:
        out_dtype = np.uint8 if op == "quantize" else np.float32
        return cls(_input(op, (n,)), np.empty(n, out_dtype))


def _bound_runner(
    session: ort.InferenceSession, buffers: _Buffers, shape: tuple[int, ...]
) -> Callable[[], None]:
    binding = session.io_binding()
    x = ort.OrtValue.ortvalue_from_numpy(buffers.x.reshape(shape))
    y = ort.OrtValue.ortvalue_from_numpy(buffers.y.reshape(shape))
    binding.bind_ortvalue_input(session.get_inputs()[0].name, x)
    binding.bind_ortvalue_output(session.get_outputs()[0].name, y)

    def call() -> None:
        session.run_with_iobinding(binding)

    return call


def _runner(
    impl: str,
    op: str,
    shape: tuple[int, ...],
    axis: int | None,
    buffers: _Buffers | None = None,
) -> Callable[[], None]:
    buffers = buffers or _Buffers.make(op, int(np.prod(shape)))
    x = buffers.x.reshape(shape)
    if impl in ON_BACKEND:
        return _backend_runner(impl, op, shape, axis, buffers)
    if impl == "onnxruntime":
        session = ort_session(_qdq_model(op, shape, axis), timed_options())
        return _bound_runner(session, buffers, shape)
    if impl == "numpy":
        return _numpy_runner(op, shape, axis, buffers)
    # copyto: the float32 side of the call, copied into a preallocated array.
    src = np.asarray(x, np.float32) if op == "quantize" else np.zeros(shape, np.float32)
    dst = np.empty_like(src)

    def copy() -> None:
        np.copyto(dst, src)

    return copy


def _backend_runner(
    impl: str, op: str, shape: tuple[int, ...], axis: int | None, buffers: _Buffers
) -> Callable[[], None]:
    """The spec op on the backend ``impl`` names (:data:`ON_BACKEND`)."""
    from ..backends import get, session_options

    name, arithmetic = ON_BACKEND[impl]
    if get(name).prepares:
        # Its kernels run a prepared model and report errors after a run: a whole session.
        from ..runtime.session import InferenceSession

        spec_session = InferenceSession(
            _spec_model(op, shape, axis), name, arithmetic=arithmetic, options=timed_options()
        )
        feeds = {"x": buffers.x.reshape(shape)}

        def call() -> None:
            spec_session.run(None, feeds)

        return call
    options = session_options(name, timed_options(), arithmetic=arithmetic)
    session = ort_session(_spec_model(op, shape, axis), options)
    return _bound_runner(session, buffers, shape)


def _numpy_runner(
    op: str, shape: tuple[int, ...], axis: int | None, buffers: _Buffers
) -> Callable[[], None]:
    """Plain numpy in float32, the sequence an exact quantize needs (divide, clip to
    [qmin - zp, qmax - zp], round half to even, add zp, narrow) or a dequantize (subtract zp,
    multiply), writing the same output buffer: the bar for the Python backend."""
    count = 1 if axis is None else shape[axis]
    scales, zps = _parameters(count)
    where = [1] * len(shape)
    if axis is not None:
        where[axis] = -1
    scale = scales.reshape(where)
    zero = zps.astype(np.float32).reshape(where)
    x, y = buffers.x.reshape(shape), buffers.y.reshape(shape)
    scratch = np.empty(shape, np.float32)
    low, high = np.float32(0) - zero, np.float32(255) - zero
    if op == "quantize":

        def quantize() -> None:
            np.divide(x, scale, out=scratch)
            np.clip(scratch, low, high, out=scratch)
            np.rint(scratch, out=scratch)
            np.add(scratch, zero, out=scratch)
            np.copyto(y, scratch, casting="unsafe")

        return quantize

    def dequantize() -> None:
        np.subtract(x, zero, out=scratch)
        np.multiply(scratch, scale, out=y)

    return dequantize


def run(
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeat: int = 20,
    progress: Progress | None = None,
    *,
    ops: Sequence[str] = DIRECTIONS,
    layouts: Sequence[str] = DEFAULT_LAYOUTS,
    implementations: Sequence[str] = IMPLEMENTATIONS,
    threads: int = 0,
    spinning: bool = True,
    weights: Sequence[tuple[int, int]] | None = None,
    weight_layouts: Sequence[str] | None = None,
    on_row: Callable[[BenchRow], None] | None = None,
) -> list[BenchRow]:
    """Time every (op, layout, size) on every implementation; one row each. Then the 4-bit
    weight rows: each shape in ``weights`` ([K, N], K and N multiples of 32) in each of
    ``weight_layouts`` (op ``dequantize_4bit``: native, onnxruntime and copyto only).
    ``on_row(row)`` is called with each row as soon as it is measured (a full run takes
    minutes: the command line prints rows as they come).

    ``threads``: intra-op threads of every onnxruntime session (0: onnxruntime's default, one
    per physical core).
    """
    SETTINGS.threads = threads
    SETTINGS.spinning = spinning
    unavailable = {impl: unavailable_reason(impl) for impl in implementations}
    rows = []
    warmed = False
    for op in ops:
        for layout in layouts:
            for size in sizes:
                shape, axis = _layout(layout, size)
                n = int(np.prod(shape))  # a narrow layout drops the remainder rows
                notes: dict[str, str] = {}
                calls: dict[str, Callable[[], None]] = {}
                buffers = _Buffers.make(op, n)
                for impl in implementations:
                    reason = unavailable[impl]
                    if reason is None:
                        try:
                            calls[impl] = _runner(impl, op, shape, axis, buffers)
                        except Exception as error:  # report, keep benchmarking the rest
                            reason = f"{type(error).__name__}: {error}".splitlines()[0][:200]
                    if reason is not None:
                        notes[impl] = reason
                if not warmed:
                    # The process's first measurement runs slow (native 1K quantize: 0.77x of
                    # onnxruntime in one full run, 0.95x-1.00x in three reruns): discard one.
                    measure(calls, 3)
                    warmed = True
                measured = measure(calls, repeat)
                seconds: dict[str, float | None] = {
                    impl: measured.get(impl) for impl in implementations
                }
                vs_pt = None
                native_call = calls.get("native")
                if layout != PER_TENSOR and native_call is not None:
                    vs_pt = _versus_per_tensor(op, n, native_call, repeat, buffers)
                row = BenchRow(op, layout, shape, 5 * n, seconds, notes, vs_pt)
                rows.append(row)
                if progress is not None:
                    progress(progress_line(row))
                if on_row is not None:
                    on_row(row)
    rows += bench_weights.weight_rows(
        bench_weights.DEFAULT_WEIGHTS if weights is None else weights,
        tuple(bench_weights.WEIGHT_LAYOUTS) if weight_layouts is None else weight_layouts,
        implementations,
        repeat,
        progress,
        on_row,
    )
    return rows


def _versus_per_tensor(
    op: str, n: int, native: Callable[[], None], repeat: int, buffers: _Buffers
) -> float:
    """Native's time on a per-channel layout over its per-tensor time at the same size, the
    two timed in turns with nothing else between them: the implementations of a row disturb
    each other's caches differently (onnxruntime's per-channel kernels and the Python backend
    take 10-300x longer), so ratios across rows mixed those effects in (1.1x-2.0x from one
    process to the next for the same kernels)."""
    per_tensor = _runner("native", op, (n,), None, buffers)
    measured = measure({"per_tensor": per_tensor, "layout": native}, repeat)
    return measured["layout"] / measured["per_tensor"]


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _gbs(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e9:.1f}"


def environment(threads: int | None = None, spinning: bool | None = None) -> str:
    """One line about where the numbers come from (threads, spinning: as given to run(); by
    default those of the last run)."""
    try:
        from ..backends import native

        isa = native.isa() if native.is_available() else "not built"
    except Exception as error:  # pragma: no cover - informational only
        isa = f"unknown ({error})"
    cpu = this_cpu().describe()
    count = SETTINGS.threads if threads is None else threads
    spins = SETTINGS.spinning if spinning is None else spinning
    return (
        f"onnxruntime {ort.__version__}, native ISA {isa}, {os.cpu_count()} CPUs ({cpu}), "
        f"intra-op threads {count or 'default'}{'' if spins else ' (no spinning)'}, "
        "ORT_DISABLE_ALL, "
        "median of interleaved timed blocks"
    )


def format_table(rows: Sequence[BenchRow]) -> str:
    """A Markdown table: times in microseconds per call, ratios, effective bandwidth.

    ``ort/native`` is onnxruntime's time over native's (above 1: native is faster);
    ``python/numpy`` is the Python backend's time over the plain numpy sequence's;
    ``arith/native`` is the native kernels' time in oneDNN's arithmetic over their default
    (ONNX's); ``onednn/native`` is oneDNN's own (the onednn backend) over native's;
    ``vs per-tensor`` is native's time over native per-tensor at the same op and size, the two
    timed together (:func:`_versus_per_tensor`);
    GB/s counts the bytes a call reads and writes (5 per element, 4.5 for 4-bit weights plus
    their scales and zero points; copyto moves 8).
    """
    notes = table_notes(rows)
    parts = [table_head(), *(table_row(r) for r in rows), *(["", notes] if notes else [])]
    return "\n".join(parts)


def table_head(threads: int | None = None, spinning: bool | None = None) -> str:
    """:func:`format_table`'s lines before its rows: the environment line (see
    :func:`environment`), the header and its rule."""
    header = (
        "| op | layout | shape | native µs | onnxruntime µs | python µs | numpy µs | copyto µs "
        "| onednn µs | ort/native | python/native | python/numpy | arith/native | onednn/native "
        "| vs per-tensor | native GB/s | copyto GB/s |"
    )
    return "\n".join([environment(threads, spinning), "", header, "|" + "---|" * 17])


def table_row(r: BenchRow) -> str:
    """One row of :func:`format_table`."""
    vs_pt = r.vs_per_tensor
    return (
        f"| {r.op} | {r.layout} | {'x'.join(map(str, r.shape))} "
        f"| {microseconds(r.seconds.get('native'))} "
        f"| {microseconds(r.seconds.get('onnxruntime'))} "
        f"| {microseconds(r.seconds.get('python'))} | {microseconds(r.seconds.get('numpy'))} "
        f"| {microseconds(r.seconds.get('copyto'))} | {microseconds(r.seconds.get('onednn'))} "
        f"| {_x(r.ratio('onnxruntime'))} | {_x(r.ratio('python'))} "
        f"| {_x(r.ratio('python', 'numpy'))} | {_x(r.ratio('native_onednn'))} "
        f"| {_x(r.ratio('onednn'))} "
        f"| {'-' if vs_pt is None else f'{vs_pt:.2f}'} "
        f"| {_gbs(r.bandwidth('native'))} | {_gbs(r.bandwidth('copyto'))} |"
    )


def table_notes(rows: Sequence[BenchRow]) -> str:
    """:func:`format_table`'s lines after its rows: why an implementation did not run ("" when
    every one ran)."""
    notes = sorted({f"{impl}: {why}" for r in rows for impl, why in r.notes.items()})
    return "\n".join(f"- {note}" for note in notes)
