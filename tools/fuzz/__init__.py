"""Differential fuzzer: native backend == Python backend == reference == onnxruntime's Q/DQ.

Hypothesis draws one call of one quantgraph op per example: an operator and a row of its
data-type table (zps absent or of every type the row takes for the dynamic ops, DynamicDequantize's
4-bit src and f16/bf16 scales and dst included; every dst/src of the static ones, float8
included), a rank 0..6 and shape (zero-size sometimes), per_tensor or per_channel on any axis
(negative too; qtype/axis also left out so the defaults apply), per_group for DynamicDequantize
(groups along one of the last two dims), scales of every kind
(powers of two, random, subnormal, huge, negative; zero, -0, NaN and +-inf for the dequantize
ops), zero points at their extremes, and src values on exact .5 ties, at the saturation edges,
special (NaN payloads, +-inf, subnormal) and raw bits. About one example in ten breaks one
rule of the spec instead (a zero/NaN/inf scale for a quantize op, a wrong scale or zero-point
count, an axis out of range, a static zero point outside s32, zps with float8).

Each example is run by

* :mod:`quantgraph.reference` (the oracle; a broken rule must be its ``SpecError``),
* the native backend and the Python backend through :class:`quantgraph.InferenceSession`:
  equal to the reference bit for bit (NaN equals NaN whatever its payload), or, for a broken
  rule, an error naming the op, the node (native) and ``[rule <id>]``; the native backend in
  oneDNN's arithmetic (``arithmetic="onednn"``) likewise, against the reference's numpy model
  of oneDNN (``quantgraph.reference.run(..., arithmetic="onednn")``). Where the Python backend
  cannot express the model (float8, 4-bit, f16/bf16 scales, per_channel/per_group without zps
  over symbolic dims, static zps that do not fit dst) it must raise its documented
  :class:`~quantgraph.errors.BackendError`, and nothing else;
* the onednn backend (oneDNN's Graph API, where it loads), against the same numpy model of
  oneDNN; a row oneDNN refuses is its documented one-line error (counted as refused). One known
  difference is counted apart: oneDNN quantizes a NaN product ``x * fl(1/s)`` to 127 for s8
  where the model (and the native backend in oneDNN's arithmetic) gives -128;
* onnxruntime's own QuantizeLinear/DequantizeLinear (opset 21, ``ORT_DISABLE_ALL``) where ONNX
  defines the same call: zero point of the quantized type or none, scale a scalar (per_tensor)
  or 1-D (per_channel).

Sessions are the slow part, so the dynamic ops get one model per signature (op, dtypes, rank,
qtype, axis, output_dtype) over symbolic dims, kept in an LRU cache with its native, Python and
onnxruntime sessions; onnxruntime's Q/DQ sessions take scale and zero point as inputs and are
cached the same way for the static ops too. A static op carries its scales in attributes, so
its native and Python sessions are built per example (about 1-3 ms each).

Mismatches are counted, not raised: the run goes on and the report lists the first ones with
what is needed to reproduce them. (Two bugs it found, native clamp bounds for s32 zero points
beyond 2^24 and Python-backend errors naming the wrong op, were counted apart until they were
fixed; they are ordinary mismatches now.)

``python -m tools.fuzz --profile long [--examples N] [--seed S] [--json]``; or
:func:`run`. The ``ci`` profile runs 250 examples per op, ``long`` 26,000 per op (104,000).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

try:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
except ImportError as _missing:  # pragma: no cover - hypothesis is a dev dependency
    raise ImportError(
        "quantgraph.fuzz needs hypothesis: pip install hypothesis (or quantgraph[dev])"
    ) from _missing

from quantgraph import reference
from quantgraph.backends import native_available
from quantgraph.backends.onednn import unavailable_reason as onednn_unavailable
from quantgraph.errors import BackendError, BackendLimit
from quantgraph.reference.compare import compare
from quantgraph.runtime.session import InferenceSession
from quantgraph.spec import (
    DOMAIN,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    PER_CHANNEL,
    PER_TENSOR,
    QUANTIZE,
    SpecError,
    dst_type,
    dtypes,
)
from quantgraph.spec import OPS as SPEC_OPS
from quantgraph.spec.dtypes import DType
from quantgraph.testing import (
    Input,
    Output,
    from_ort_value,
    one_op_model,
    ort_session,
    quiet_session_options,
    to_ort_value,
    typed_list,
)

OP_NAMES = tuple(SPEC_OPS)
STATIC_OPS = tuple(name for name, op in SPEC_OPS.items() if op.is_static)
QUANTIZE_OPS = tuple(name for name, op in SPEC_OPS.items() if op.is_quantize)
NODE = "fuzz_node"
BACKEND_NAMES = ("native", "python", "onednn")
# How the onednn backend says oneDNN refused a row (at session creation or at run time).
# "<Op> node '<name>': oneDNN <version> refused <row>: ..." or "...: refused <row> ...: oneDNN
# applies zps[0] ..." / "...: oneDNN <version> misreads ..." (custom_ops/src/onednn/kernel.cc).
ONEDNN_REFUSED = re.compile(r"node '[^']*': (oneDNN [0-9.]+ )?refused ")

F32 = np.float32
S32_MIN, S32_MAX = dtypes.S32.int_range


# -- profiles ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    name: str
    examples_per_op: int
    large_percent: int  # examples with > 2^17 elements (the native kernels' threaded path)
    error_percent: int  # examples that break one rule of the spec
    cache_size: int  # dynamic-op signatures whose sessions are kept


PROFILES = {
    "ci": Profile("ci", examples_per_op=250, large_percent=0, error_percent=15, cache_size=512),
    "long": Profile(
        "long", examples_per_op=26_000, large_percent=1, error_percent=15, cache_size=1024
    ),
}

# Largest dimension drawn per rank for the ordinary examples (at most 4096 elements).
MAX_DIM = {0: 1, 1: 300, 2: 40, 3: 12, 4: 7, 5: 5, 6: 4}


# -- what one example is -----------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """Everything a model fixes about a call; the dynamic ops' sessions are cached per value.

    ``zps``: the zps input's type for dynamic ops; for static ops "s32" when the zps attribute
    is present. ``qtype``/``axis``/``output_dtype`` None: the attribute is left out.
    """

    op: str
    src: str
    dst: str
    zps: str | None
    rank: int
    qtype: str | None
    axis: int | None
    output_dtype: int | None = None
    scales: str = "f32"  # DynamicDequantize: f16/bf16 too (dst is the scales' type)
    group_shape: tuple[int, ...] | None = None  # per_group only

    @property
    def per_channel(self) -> bool:
        return self.qtype == PER_CHANNEL

    @property
    def axis_value(self) -> int:
        return 1 if self.axis is None else self.axis

    @property
    def resolved_axis(self) -> int | None:
        if not self.per_channel:
            return None
        axis = self.axis_value
        if not -self.rank <= axis < self.rank:
            return None
        return axis + self.rank if axis < 0 else axis

    def attributes(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.qtype is not None:
            found["qtype"] = self.qtype
        if self.axis is not None:
            found["axis"] = self.axis
        if self.output_dtype is not None:
            found["output_dtype"] = self.output_dtype
        if self.group_shape is not None:
            found["group_shape"] = list(self.group_shape)
        return found

    def row(self) -> str:
        """The data-type row and zps type, and per_group: what coverage is counted by."""
        grouped = ", per_group" if self.group_shape is not None else ""
        return f"{self.src}->{self.dst} scales {self.scales} zps {self.zps or 'none'}{grouped}"

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes().items())
        return (
            f"{self.op}({self.src} -> {self.dst}, scales {self.scales}, zps {self.zps or 'none'}, "
            f"rank {self.rank}"
            f"{', ' + attrs if attrs else ''})"
        )


@dataclass
class Case:
    """One call: the signature, the tensors, and the rule it breaks (None: a valid call)."""

    sig: Signature
    src: np.ndarray
    scales: np.ndarray  # f32, 1-D (static ops: the scales attribute)
    zps: np.ndarray | None  # dynamic ops: typed input; static ops: int64 attribute values
    rule: str | None
    seed: int

    @property
    def static(self) -> bool:
        return self.sig.op in STATIC_OPS

    def reference_kwargs(self) -> dict[str, Any]:
        sig = self.sig
        kwargs: dict[str, Any] = {"qtype": sig.qtype or PER_TENSOR, "axis": sig.axis_value}
        if sig.group_shape is not None:
            kwargs["group_shape"] = list(sig.group_shape)
        if sig.op in QUANTIZE_OPS:
            kwargs["output_dtype"] = sig.output_dtype or 0
        kwargs["node"] = NODE
        return kwargs

    def repro(self) -> dict[str, Any]:
        """What reproduces the call: the signature, the parameters and (small) tensors."""
        found: dict[str, Any] = {
            "signature": asdict(self.sig),
            "rule": self.rule,
            "seed": self.seed,
            "src_shape": list(self.src.shape),
            "scales": [float(v) for v in self.scales.reshape(-1)[:16]],
            "zps": None if self.zps is None else [int(v) for v in self.zps.reshape(-1)[:16]],
        }
        if self.src.size <= 64:
            found["src_bits"] = _bits(self.src).reshape(-1).tolist()
        return found


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


def _per_element(
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
    s = _per_element(scales.astype(np.float64), shape, axis, 1.0) if usable else np.ones(n)
    if zps is not None and count_ok:
        z = _per_element(zps.astype(np.int64), shape, axis, 0)
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
            z = _per_element(zps.astype(np.int64), shape, axis, 0)
            near = np.clip(z + rng.integers(-1, 2, n), qmin, qmax)
            values = np.where(kind == 2, near, values)
        return values.astype(dtype.numpy).reshape(shape)
    return raw.view(dtype.numpy).reshape(shape)


# -- models and sessions -------------------------------------------------------------------------


def dynamic_model(sig: Signature) -> onnx.ModelProto:
    """A one-node model of a dynamic op over symbolic dims (one session serves every shape)."""
    dims = [f"d{i}" for i in range(sig.rank)]
    grouped = sig.group_shape is not None  # per_group: scales and zps of src's rank
    scale_dims = [f"g{i}" for i in range(sig.rank)] if grouped else ["c"]
    inputs: dict[str, Input] = {
        "src": (dtypes.BY_NAME[sig.src].onnx, dims),
        "scales": (dtypes.BY_NAME[sig.scales].onnx, scale_dims),
    }
    if sig.zps:
        inputs["zps"] = (dtypes.BY_NAME[sig.zps].onnx, scale_dims if grouped else ["z"])
    outputs: dict[str, Output] = {"dst": (dtypes.BY_NAME[sig.dst].onnx, dims)}
    return one_op_model(
        sig.op, inputs, outputs, domain=DOMAIN, name=NODE, graph_name="fuzz", **sig.attributes()
    )


def static_model(case: Case) -> onnx.ModelProto:
    """A one-node model of a static op: scales and zps are the node's attributes."""
    sig = case.sig
    dims = [f"d{i}" for i in range(sig.rank)]
    lists = {"scales": typed_list([float(v) for v in case.scales], floats=True)}
    if case.zps is not None:
        lists["zps"] = typed_list([int(v) for v in case.zps], floats=False)
    return one_op_model(
        sig.op,
        {"src": (dtypes.BY_NAME[sig.src].onnx, dims)},
        {"dst": (dtypes.BY_NAME[sig.dst].onnx, dims)},
        domain=DOMAIN,
        name=NODE,
        graph_name="fuzz",
        **sig.attributes(),
        **lists,
    )


def _options(threads: int) -> ort.SessionOptions:
    # Rejected calls are asserted on, not logged; many cached sessions must not spin.
    return quiet_session_options(threads=threads, inter_op_threads=1, spinning=False)


_RUN_OPTIONS = ort.RunOptions()
_RUN_OPTIONS.log_severity_level = 4


def _run_raw(session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    values = {name: to_ort_value(array) for name, array in feeds.items()}
    return from_ort_value(session.run_with_ort_values(None, values, _RUN_OPTIONS)[0])


Outcome = np.ndarray | BaseException


@dataclass
class _Sessions:
    native: Any = None  # InferenceSession or the error creating it raised
    native_onednn: Any = None  # the native kernels in oneDNN's arithmetic
    python: Any = None
    onednn: Any = None  # the onednn backend (oneDNN's Graph API)


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[Any, Any] = OrderedDict()
        self.created = 0

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        value = make()
        self.created += 1
        self.entries[key] = value
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value


def _create(
    model: onnx.ModelProto, backend: str, threads: int, arithmetic: str | None = None
) -> Any:
    try:
        return InferenceSession(model, backend, arithmetic=arithmetic, options=_options(threads))
    except Exception as error:
        return error


# -- comparison ----------------------------------------------------------------------------------


def _bits(array: np.ndarray) -> np.ndarray:
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize]
    return np.ascontiguousarray(array).view(width)


def _has_rule(error: BaseException, op: str, rule: str, node: str | None) -> bool:
    """The error is ``<op> node '<node>': ... [rule <rule>]`` (op exactly: not Dynamic<op>)."""
    text = str(error)
    named = rf"(?<![A-Za-z]){re.escape(op)} node '{re.escape(node) if node is not None else ''}"
    return re.search(named, text) is not None and f"[rule {rule}]" in text


# -- the report ----------------------------------------------------------------------------------


@dataclass
class OpStats:
    """Figures of one operator."""

    examples: int = 0  # calls made (each on every runner)
    valid_examples: int = 0
    error_examples: int = 0  # calls that break a rule
    elements: int = 0  # output elements compared, summed over the comparisons below
    compared: dict[str, int] = field(default_factory=dict)  # elements per "<runner>-vs-reference"
    onnxruntime_examples: int = 0  # calls also checked against onnxruntime's Q/DQ
    python_not_runnable: int = 0  # calls where the Python backend raised its BackendError
    onednn_refused: int = 0  # calls the onednn backend's oneDNN refused (its documented error)
    onednn_nan_s8: int = 0  # onednn calls whose only differences are the known s8 NaN one
    rows: dict[str, int] = field(default_factory=dict)  # calls per row (Signature.row)
    errors_checked: int = 0  # expected rule errors asserted (reference, native, python)
    mismatches: int = 0  # calls where a runner disagreed (values or errors)
    mismatched_elements: int = 0
    sessions: int = 0  # sessions created (all runners)
    seconds: float = 0.0


@dataclass
class FuzzReport:
    profile: str
    seed: int
    examples_per_op: int
    native: bool
    ops: dict[str, OpStats] = field(default_factory=dict)
    seconds: float = 0.0
    peak_rss_mib: float = 0.0  # the process's peak resident memory at the end of the run
    details: list[dict[str, Any]] = field(default_factory=list)  # first mismatches

    def total(self, name: str) -> int:
        return int(sum(getattr(stats, name) for stats in self.ops.values()))

    @property
    def examples(self) -> int:
        return self.total("examples")

    @property
    def elements(self) -> int:
        return self.total("elements")

    @property
    def mismatches(self) -> int:
        return self.total("mismatches")

    @property
    def errors_checked(self) -> int:
        return self.total("errors_checked")

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "seed": self.seed,
            "examples_per_op": self.examples_per_op,
            "native_backend": self.native,
            "seconds": round(self.seconds, 2),
            "peak_rss_mib": round(self.peak_rss_mib, 1),
            "totals": {
                "examples": self.examples,
                "error_examples": self.total("error_examples"),
                "elements": self.elements,
                "onnxruntime_examples": self.total("onnxruntime_examples"),
                "python_not_runnable": self.total("python_not_runnable"),
                "onednn_refused": self.total("onednn_refused"),
                "onednn_nan_s8": self.total("onednn_nan_s8"),
                "errors_checked": self.errors_checked,
                "mismatches": self.mismatches,
                "mismatched_elements": self.total("mismatched_elements"),
                "sessions": self.total("sessions"),
            },
            "ops": {
                name: {**asdict(stats), "seconds": round(stats.seconds, 2)}
                for name, stats in self.ops.items()
            },
            "mismatch_details": self.details,
        }

    def summary(self) -> str:
        head = (
            f"{'op':<18}{'examples':>9}{'errors':>8}{'elements':>12}{'vs ort':>8}"
            f"{'py n/a':>8}{'checked':>9}{'mismatch':>10}{'sessions':>10}"
            f"{'seconds':>9}"
        )
        lines = [
            f"quantgraph fuzz: profile {self.profile}, seed {self.seed}, "
            f"{self.examples_per_op} examples per op, native backend "
            f"{'on' if self.native else 'NOT BUILT'}",
            head,
        ]
        rows = [*self.ops.items(), ("total", None)]
        for name, stats in rows:
            if stats is None:
                values = [
                    self.examples,
                    self.total("error_examples"),
                    self.elements,
                    self.total("onnxruntime_examples"),
                    self.total("python_not_runnable"),
                    self.errors_checked,
                    self.total("mismatches"),
                    self.total("sessions"),
                ]
                seconds = self.seconds
            else:
                values = [
                    stats.examples,
                    stats.error_examples,
                    stats.elements,
                    stats.onnxruntime_examples,
                    stats.python_not_runnable,
                    stats.errors_checked,
                    stats.mismatches,
                    stats.sessions,
                ]
                seconds = stats.seconds
            widths = (9, 8, 12, 8, 8, 9, 10, 10)
            cells = "".join(f"{v:>{w},}" for v, w in zip(values, widths, strict=True))
            lines.append(f"{name:<18}{cells}{seconds:>9.1f}")
        compared: dict[str, int] = {}
        for stats in self.ops.values():
            for key, count in stats.compared.items():
                compared[key] = compared.get(key, 0) + count
        lines.append(
            "elements compared: " + ", ".join(f"{k} {v:,}" for k, v in sorted(compared.items()))
        )
        lines.append(
            f"onednn backend: {self.total('onednn_refused'):,} calls refused by oneDNN; "
            f"{self.total('onednn_nan_s8'):,} differ only where x * (1/scale) is NaN (s8: "
            "oneDNN gives 127, the model -128; known, counted apart)"
        )
        lines.append(f"peak RSS {self.peak_rss_mib:,.0f} MiB")
        lines.append(f"mismatches: {self.mismatches}")
        for detail in self.details[:10]:
            lines.append("  " + json.dumps(detail, default=str)[:600])
        return "\n".join(lines)


# -- the fuzzer ----------------------------------------------------------------------------------


def python_limit(case: Case) -> str | None:
    """Why the Python backend cannot run this model (its documented BackendError), or None."""
    sig = case.sig
    if dtypes.BY_NAME[sig.src].is_float8 or dtypes.BY_NAME[sig.dst].is_float8:
        return "float8"
    if dtypes.BY_NAME[sig.src].bits == 4 or (sig.zps and dtypes.BY_NAME[sig.zps].bits == 4):
        return "4-bit"
    if sig.scales != "f32":
        return "f16/bf16"
    op = SPEC_OPS[sig.op]
    if not op.is_static and sig.zps is None and (sig.per_channel or sig.group_shape):
        return "per_channel/per_group without zps over symbolic dims (scales' shape unknown)"
    if sig.op == QUANTIZE.name and case.zps is not None:
        low, high = dtypes.BY_NAME[sig.dst].int_range
        if np.any(case.zps < low) or np.any(case.zps > high):
            return "static zps that do not fit dst"
    return None


# Rules the Python backend checks on static ops before deciding whether it can run them.
_PYTHON_FIRST_RULES = ("scale-value", "zps-value")


class Fuzzer:
    """Runs cases on every runner and keeps the figures (sessions cached across cases)."""

    def __init__(self, profile: Profile, report: FuzzReport) -> None:
        self.profile = profile
        self.report = report
        self.native = native_available()
        self.onednn = onednn_unavailable() is None
        self._dynamic = _LRU(profile.cache_size)
        self._onnxruntime = _LRU(profile.cache_size)

    # runners

    def _sessions(self, sig: Signature) -> _Sessions:
        def make() -> _Sessions:
            model = dynamic_model(sig)
            return _Sessions(
                native=_create(model, "native", 2) if self.native else None,
                native_onednn=_create(model, "native", 2, "onednn") if self.native else None,
                python=_create(model, "python", 1),
                onednn=_create(model, "onednn", 1) if self.onednn else None,
            )

        sessions: _Sessions = self._dynamic.get(sig, make)
        return sessions

    def _feeds(self, case: Case) -> dict[str, np.ndarray]:
        feeds = {"src": case.src}
        if not case.static:
            feeds["scales"] = case.scales
            if case.zps is not None:
                feeds["zps"] = case.zps
        return feeds

    def run_native(self, case: Case, arithmetic: str = "onnx") -> Outcome:
        if case.static:
            threads = 2 if case.src.size > 2**17 else 1
            session = _create(static_model(case), "native", threads, arithmetic)
            self._stats(case).sessions += 1
        else:
            sessions = self._sessions(case.sig)
            session = sessions.native if arithmetic == "onnx" else sessions.native_onednn
        if isinstance(session, BaseException):
            return session
        try:
            return _run_raw(session, self._feeds(case))
        except Exception as error:
            return error

    def run_onednn(self, case: Case) -> Outcome:
        if case.static:
            session = _create(static_model(case), "onednn", 1)
            self._stats(case).sessions += 1
        else:
            session = self._sessions(case.sig).onednn
        if isinstance(session, BaseException):
            return session
        try:
            return _run_raw(session, self._feeds(case))
        except Exception as error:
            return error

    def run_python(self, case: Case) -> Outcome:
        if case.static:
            session = _create(static_model(case), "python", 1)
            self._stats(case).sessions += 1
        else:
            session = self._sessions(case.sig).python
        if isinstance(session, BaseException):
            return session
        try:
            return np.asarray(session.run(None, self._feeds(case))[0])
        except Exception as error:
            return error

    @staticmethod
    def run_reference(case: Case, arithmetic: str = "onnx") -> Outcome:
        """quantgraph.reference; ``arithmetic="onednn"``: its numpy model of oneDNN's."""
        attributes: dict[str, Any] = case.reference_kwargs()
        node = attributes.pop("node", "")
        try:
            if case.static:
                attributes["scales"] = [float(v) for v in case.scales]
                if case.zps is not None:
                    attributes["zps"] = [int(v) for v in case.zps]
                return reference.run(
                    case.sig.op, [case.src], attributes, node=node, arithmetic=arithmetic
                )
            return reference.run(
                case.sig.op,
                [case.src, case.scales, case.zps],
                attributes,
                node=node,
                arithmetic=arithmetic,
            )
        except SpecError as error:
            return error

    def onnxruntime_zero_point(self, case: Case) -> tuple[bool, np.ndarray | None]:
        """Whether ONNX defines the same call, and the zero point it takes (typed)."""
        sig = case.sig
        if case.rule is not None or sig.group_shape is not None or sig.scales != "f32":
            return False, None  # per_group is blocked Q/DQ, f16 scales another model: not here
        quantized = dtypes.BY_NAME[sig.dst if sig.op in QUANTIZE_OPS else sig.src]
        if quantized.bits == 4:
            return False, None
        if case.zps is None:
            return True, None
        if quantized.is_float8:
            return False, None
        if not case.static:
            return case.zps.dtype == quantized.numpy, case.zps
        low, high = quantized.int_range
        if np.any(case.zps < low) or np.any(case.zps > high):
            return False, None
        return True, case.zps.astype(quantized.numpy)

    def run_onnxruntime(self, case: Case, zero_point: np.ndarray | None) -> Outcome:
        sig = case.sig
        quantize = sig.op in QUANTIZE_OPS
        axis = sig.resolved_axis
        key = (
            quantize,
            sig.src,
            sig.dst,
            None if zero_point is None else str(zero_point.dtype),
            sig.rank,
            axis,
        )

        def make() -> Any:
            self._stats(case).sessions += 1
            return self._onnxruntime_session(case, zero_point, axis)

        session = self._onnxruntime.get(key, make)
        per_axis = axis is not None
        feeds = {"x": case.src, "scale": case.scales if per_axis else case.scales.reshape(())}
        if zero_point is not None:
            feeds["zp"] = zero_point if per_axis else zero_point.reshape(())
        try:
            return _run_raw(session, feeds)
        except Exception as error:
            return error

    @staticmethod
    def _onnxruntime_session(case: Case, zero_point: np.ndarray | None, axis: int | None) -> Any:
        sig = case.sig
        quantize = sig.op in QUANTIZE_OPS
        per_axis = axis is not None
        dims = [f"d{i}" for i in range(sig.rank)]
        scale_shape = ["c"] if per_axis else []
        inputs: dict[str, Input] = {
            "x": (dtypes.BY_NAME[sig.src].onnx, dims),
            "scale": (TensorProto.FLOAT, scale_shape),
        }
        if zero_point is not None:
            inputs["zp"] = (dtypes.onnx_of_numpy(zero_point.dtype), scale_shape)
        attributes: dict[str, Any] = {"axis": axis if per_axis else 1}
        if quantize and zero_point is None:
            attributes["output_dtype"] = dtypes.BY_NAME[sig.dst].onnx
        model = one_op_model(
            "QuantizeLinear" if quantize else "DequantizeLinear",
            inputs,
            {"y": (dtypes.BY_NAME[sig.dst].onnx, dims)},
            name="",
            graph_name="qdq",
            **attributes,
        )
        return ort_session(model, _options(1))

    # checking

    def _stats(self, case: Case) -> OpStats:
        return self.report.ops.setdefault(case.sig.op, OpStats())

    def _mismatch(
        self, case: Case, runner: str, kind: str, detail: dict[str, Any], elements: int = 0
    ) -> None:
        stats = self._stats(case)
        stats.mismatches += 1
        stats.mismatched_elements += elements
        record = {"runner": runner, "kind": kind, **detail, "case": case.repro()}
        if len(self.report.details) < 50:
            self.report.details.append(record)

    def _compare(self, case: Case, runner: str, got: Outcome, want: np.ndarray) -> None:
        stats = self._stats(case)
        if isinstance(got, BaseException):
            self._mismatch(case, runner, "unexpected error", {"error": _one_line(got)})
            return
        result = compare(case.sig.op, want, got)
        key = f"{runner}-vs-reference"
        stats.compared[key] = stats.compared.get(key, 0) + int(want.size)
        stats.elements += int(want.size)
        count = result.mismatches
        if not count:
            return
        if result.first_mismatch is None or got.shape != want.shape or got.dtype != want.dtype:
            detail: dict[str, Any] = {
                "got": f"{got.dtype}{list(got.shape)}",
                "want": f"{want.dtype}{list(want.shape)}",
            }
        else:
            index = result.first_mismatch
            flat_src = case.src.reshape(-1)
            detail = {
                "count": count,
                "index": index,
                "src": repr(flat_src[index]),
                "src_bits": hex(int(_bits(flat_src[index : index + 1])[0])),
                "got": repr(got.reshape(-1)[index]),
                "want": repr(want.reshape(-1)[index]),
            }
        self._mismatch(case, runner, "value", detail, count)

    def _expect_error(self, case: Case, runner: str, got: Outcome, node: str | None) -> None:
        assert case.rule is not None
        if isinstance(got, BaseException) and _has_rule(got, case.sig.op, case.rule, node):
            self._stats(case).errors_checked += 1
            return
        if isinstance(got, BaseException):
            detail = {"expected_rule": case.rule, "error": _one_line(got)}
            self._mismatch(case, runner, "wrong error", detail)
        else:
            self._mismatch(case, runner, "missing error", {"expected_rule": case.rule})

    def _python_not_runnable(self, case: Case, got: Outcome) -> bool:
        """The Python backend's documented BackendError (counted), else a mismatch."""
        if isinstance(got, BackendLimit):
            self._stats(case).python_not_runnable += 1
            return True
        detail = {"expected": f"BackendError ({python_limit(case)})"}
        if isinstance(got, BaseException):
            detail["error"] = _one_line(got)
        self._mismatch(case, "python", "expected BackendError", detail)
        return False

    def _onednn_refused(self, case: Case, got: Outcome) -> bool:
        """oneDNN refused the row (the onednn backend's documented one-line error): counted."""
        if isinstance(got, BaseException) and ONEDNN_REFUSED.search(str(got)):
            self._stats(case).onednn_refused += 1
            return True
        return False

    def _onednn_nan_s8(self, case: Case, got: Outcome, want: np.ndarray) -> bool:
        """oneDNN (v3.2, measured) quantizes a NaN product x * fl(1/s) to 127 for s8, where the
        numpy model of oneDNN (and the native backend in its arithmetic) gives -128: counted
        apart when every difference is that one."""
        sig = case.sig
        if isinstance(got, BaseException) or sig.op not in QUANTIZE_OPS or sig.dst != "s8":
            return False
        if got.shape != want.shape or got.dtype != want.dtype:
            return False
        differ = got.reshape(-1) != want.reshape(-1)
        if not differ.any():
            return False
        scales = _per_element(case.scales, case.src.shape, case.sig.resolved_axis, 1.0)
        with np.errstate(all="ignore"):
            product = case.src.reshape(-1) * (F32(1) / scales.astype(F32))
        nan = np.isnan(product)
        if not np.all(nan[differ]) or not np.all(got.reshape(-1)[differ] == 127):
            return False
        self._stats(case).onednn_nan_s8 += 1
        return True

    def check(self, case: Case) -> None:
        stats = self._stats(case)
        stats.examples += 1
        stats.rows[case.sig.row()] = stats.rows.get(case.sig.row(), 0) + 1
        want = self.run_reference(case)
        native = self.run_native(case) if self.native else None
        native_onednn = self.run_native(case, "onednn") if self.native else None
        onednn = self.run_onednn(case) if self.onednn else None
        python = self.run_python(case)
        limit = python_limit(case)
        if case.rule is not None:
            stats.error_examples += 1
            if isinstance(want, SpecError) and want.rule == case.rule:
                stats.errors_checked += 1
            else:
                detail = {"expected_rule": case.rule, "got": _one_line(want)}
                self._mismatch(case, "reference", "wrong error", detail)
            if native is not None:
                self._expect_error(case, "native", native, NODE)
            if native_onednn is not None:
                self._expect_error(case, "native_onednn", native_onednn, NODE)
            if onednn is not None and not self._onednn_refused(case, onednn):
                self._expect_error(case, "onednn", onednn, NODE)
            python_first = case.static and case.rule in _PYTHON_FIRST_RULES
            if limit is None or python_first:
                self._expect_error(case, "python", python, None)
            elif not isinstance(python, BackendError):
                self._expect_error(case, "python", python, None)  # a rule error is fine too
            else:
                self._python_not_runnable(case, python)
            return
        stats.valid_examples += 1
        if isinstance(want, BaseException):
            self._mismatch(case, "reference", "unexpected error", {"error": _one_line(want)})
            return
        if native is not None:
            self._compare(case, "native", native, want)
        if native_onednn is not None or onednn is not None:
            want_onednn = self.run_reference(case, "onednn")
            if isinstance(want_onednn, BaseException):
                detail = {"error": _one_line(want_onednn)}
                self._mismatch(case, "reference_onednn", "unexpected error", detail)
            else:
                if native_onednn is not None:
                    self._compare(case, "native_onednn", native_onednn, want_onednn)
                if (
                    onednn is not None
                    and not self._onednn_refused(case, onednn)
                    and not self._onednn_nan_s8(case, onednn, want_onednn)
                ):
                    self._compare(case, "onednn", onednn, want_onednn)
        if limit is None:
            self._compare(case, "python", python, want)
        else:
            self._python_not_runnable(case, python)
        defined, zero_point = self.onnxruntime_zero_point(case)
        if defined:
            stats.onnxruntime_examples += 1
            self._compare(case, "onnxruntime", self.run_onnxruntime(case, zero_point), want)

    def sessions_created(self) -> int:
        per_signature = (3 if self.native else 1) + (1 if self.onednn else 0)
        return self._dynamic.created * per_signature


def _one_line(error: object) -> str:
    text = str(error).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(error).__name__}: {head}"[:400]


@contextmanager
def _quiet() -> Iterator[None]:
    """The Python backend logs each rejected call; thousands are expected here."""
    logger = logging.getLogger("quantgraph.backends.python")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _peak_rss_mib() -> float:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB; bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def run(
    profile: str = "ci",
    max_examples: int | None = None,
    seed: int | None = None,
    ops: Sequence[str] = OP_NAMES,
) -> FuzzReport:
    """Fuzz every op of ``ops``; ``max_examples`` (per op) overrides the profile's count.

    ``seed`` None picks one (reported, so the run can be repeated).
    """
    chosen = PROFILES[profile]
    per_op = chosen.examples_per_op if max_examples is None else max_examples
    seed = secrets.randbelow(2**31) if seed is None else seed
    report = FuzzReport(chosen.name, seed, per_op, native_available())
    fuzzer = Fuzzer(chosen, report)
    start = time.perf_counter()
    with _quiet():
        for index, op in enumerate(ops):
            if op not in OP_NAMES:
                raise ValueError(f"unknown op {op!r}; choose from {', '.join(OP_NAMES)}")
            stats = report.ops.setdefault(op, OpStats())
            before = fuzzer.sessions_created()
            op_start = time.perf_counter()
            for forced, count, job_seed in _jobs(op, per_op, seed + index):
                _fuzz(fuzzer, cases(op, chosen, forced), count, job_seed)
            stats.sessions += fuzzer.sessions_created() - before
            stats.seconds = time.perf_counter() - op_start
    report.seconds = time.perf_counter() - start
    report.peak_rss_mib = _peak_rss_mib()
    return report


def _jobs(op: str, per_op: int, seed: int) -> list[tuple[Pair | None, int, int]]:
    """(forced pair, examples, seed) of each hypothesis run of one op. hypothesis mixes
    constants of the loaded modules into its draws, so one seed draws differently under pytest
    and from the command line; DynamicDequantize's 40 (row, zps) pairs are each given one
    example of their own first (within the op's count), so every run covers them all."""
    if op != DYNAMIC_DEQUANTIZE.name or per_op < 2 * len(dequantize_pairs()):
        return [(None, per_op, seed)]
    pairs = dequantize_pairs()
    jobs: list[tuple[Pair | None, int, int]] = [(None, per_op - len(pairs), seed)]
    jobs += [(pair, 1, seed + 7919 * (k + 1)) for k, pair in enumerate(pairs)]
    return jobs


def _fuzz(fuzzer: Fuzzer, strategy: st.SearchStrategy[Case], count: int, seed: int) -> None:
    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=strategy)
    def fuzz_one(case: Case) -> None:
        fuzzer.check(case)

    fuzz_one()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.fuzz",
        description="Differential fuzzing: native == python backend == reference == "
        "onnxruntime QuantizeLinear/DequantizeLinear. Exit 1 on any mismatch.",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    parser.add_argument(
        "--examples", type=int, default=None, help="examples per op (default: the profile's)"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, reported")
    parser.add_argument("--ops", default=",".join(OP_NAMES), help="comma-separated subset")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in ops if op not in OP_NAMES]
    if unknown:
        parser.error(f"unknown op(s) {', '.join(unknown)}; choose from {', '.join(OP_NAMES)}")
    if args.examples is not None and args.examples < 1:
        parser.error("--examples must be at least 1")
    report = run(args.profile, args.examples, args.seed, ops)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.summary())
    return 1 if report.mismatches else 0
