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

from .case import (
    NODE,
    OP_NAMES,
    PROFILES,
    QUANTIZE_OPS,
    STATIC_OPS,
    Case,
    Profile,
    Signature,
)
from .cli import main, run
from .fuzzer import Fuzzer, python_limit
from .models import dynamic_model, static_model
from .report import FuzzReport, OpStats
from .strategies import SPECIAL_FLOATS, cases, dequantize_pairs

__all__ = [
    "NODE",
    "OP_NAMES",
    "PROFILES",
    "QUANTIZE_OPS",
    "SPECIAL_FLOATS",
    "STATIC_OPS",
    "Case",
    "FuzzReport",
    "Fuzzer",
    "OpStats",
    "Profile",
    "Signature",
    "cases",
    "dequantize_pairs",
    "dynamic_model",
    "main",
    "python_limit",
    "run",
    "static_model",
]
