"""Python-backed kernels registered through onnxruntime-extensions (``onnx_op``).

The portable backend, and a second opinion for the native one. What onnxruntime-extensions can
and cannot express, and how each limit is handled:

* Exceptions raised in a Python op abort the process, so kernels never raise. A rejected call
  records a :class:`KernelError`, fills the output (NaN for f32, the lowest value for integers)
  and logs it at DEBUG level only; :func:`raise_pending` (called by
  :class:`quantgraph.InferenceSession` after every run) raises it, the error's one report.
* Kernels cannot see node names, and static ops run as dynamic ones (below), so
  :func:`~quantgraph.backends.python.prepare.prepare_model` stamps each node with string
  attributes ``model_op`` and ``node_name`` and moves it to the domain
  ``com.quantgraph.prepared``, whose kernels read them: errors name the model's own op and node,
  as the native backend does. Plain onnxruntime sessions on a model's own ``com.quantgraph``
  nodes name the node ``?``.
* Attributes have no defaults (a missing one fails session creation with
  ``Unable to find attribute 'qtype'``) and float/int lists cannot be read at all (static ops fail
  with ``Attribute name and type don't match``). The preparation writes qtype/axis explicitly
  and turns static ops into dynamic ones with constant scales/zero points.
* Overloads of one op must have one input count, and may not differ only in output type:
  kernels take three inputs (zps explicit; the preparation adds zero zps where they are
  missing). DynamicQuantize's dst is its zps type (s8/u8); a DynamicQuantize whose dst is
  another type (s32 zps, or output_dtype over s8/u8 zps) runs as ``DynamicQuantize_<dst>`` of
  the prepared domain (:data:`~quantgraph.backends.python.prepare.DST_VARIANT`), an op of its
  own per dst with an explicit ``output_dtype``. Needing the native backend (each raises
  :class:`BackendError` naming the node): static Quantize whose zps do not fit its dst type
  (e.g. u8 with zps=[300]), per_channel ops without zps whose channel count is symbolic, a
  computed zps whose type nothing declares, and every float8 type (onnxruntime-extensions has
  no float8 tensor type). A type outside the spec's tables, or
  a missing ``scales`` input, is the spec's rule error (:class:`SpecError`) before any of that,
  since no backend runs it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort

from ... import reference
from ...errors import KernelError
from ...passes.stamp_origin import MODEL_OP, NODE_NAME
from ...spec import DOMAIN, DYNAMIC_DEQUANTIZE, DYNAMIC_QUANTIZE, OPS, SpecError, dtypes
from . import kernels
from .extensions import PyCustomOpDef, get_library_path
from .extensions import onnx_op as _onnx_op
from .prepare import DST_VARIANT, GROUP_SHAPE_TEXT, PREPARED_DOMAIN

log = logging.getLogger(__name__)

_DT = {
    dtypes.F32: PyCustomOpDef.dt_float,
    dtypes.U8: PyCustomOpDef.dt_uint8,
    dtypes.S8: PyCustomOpDef.dt_int8,
    dtypes.S32: PyCustomOpDef.dt_int32,
}
_ATTRS = {"qtype": PyCustomOpDef.dt_string, "axis": PyCustomOpDef.dt_int64}
_DEQUANTIZE_ATTRS = {GROUP_SHAPE_TEXT: PyCustomOpDef.dt_string}
# Prepared models move the nodes to PREPARED_DOMAIN, where kernels also read who they are.
_ORIGIN_ATTRS = {MODEL_OP: PyCustomOpDef.dt_string, NODE_NAME: PyCustomOpDef.dt_string}
_pending = threading.local()
_our_kernels: dict[int, np.dtype] = {}  # kernel id -> dst dtype


def _record(error: BaseException, op: str, model_op: str = "", node: str = "?") -> None:
    if isinstance(error, SpecError):
        message = str(error)
    else:
        message = f"{model_op or op} node '{node}': {type(error).__name__}: {error}"
    # Debug only: the error comes back once, as the exception raise_pending() raises.
    log.debug("quantgraph python backend: %s", message)
    errors: list[str] = getattr(_pending, "errors", [])
    errors.append(message)
    _pending.errors = errors


def clear_pending() -> None:
    """Forget kernel errors recorded on this thread (by runs of other sessions)."""
    _pending.errors = []


def raise_pending() -> None:
    """Raise the first kernel error recorded on this thread since the last call, if any."""
    errors: list[str] = getattr(_pending, "errors", [])
    _pending.errors = []
    if errors:
        raise KernelError(errors[0])


def _filler(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, np.iinfo(dtype).min, dtype)


def _guarded(op: str, dst: np.dtype) -> Callable[..., Any]:
    def kernel(*inputs: np.ndarray, **attributes: Any) -> np.ndarray:
        model_op = str(attributes.pop(MODEL_OP, "")) or op
        node = str(attributes.pop(NODE_NAME, "?"))
        groups = str(attributes.pop(GROUP_SHAPE_TEXT, ""))
        if groups:
            attributes["group_shape"] = [int(g) for g in groups.split(",")]
        for name in ("axis", "output_dtype"):
            if name in attributes:  # extensions pass strings through
                attributes[name] = int(attributes[name])
        try:
            call = reference.checked_call(OPS[op], inputs, attributes, node=node)
            if call.op.is_quantize:
                return kernels.quantize(call.src, call.scales, call.zps, call.axis, call.dst)
            if call.group_shape is not None:
                return reference.dequantize_values(
                    call.src, call.scales, call.zps, None, call.dst, call.group_shape
                )
            return kernels.dequantize(call.src, call.scales, call.zps, call.axis, call.dst)
        except SpecError as error:
            _record(SpecError(model_op, error.node, error.rule, **error.fields), op)
        except BaseException as error:
            _record(error, op, model_op, node)
        shape = inputs[0].shape if inputs else ()
        return _filler(dst, shape)

    return kernel


def _define(op: str, inputs: list[dtypes.DType], dst: dtypes.DType) -> None:
    # Plain onnxruntime sessions run the model's own nodes; prepared models the stamped ones.
    own = dict(_ATTRS)
    prepared = {**_ATTRS, **_ORIGIN_ATTRS}
    if not OPS[op].is_quantize:
        prepared.update(_DEQUANTIZE_ATTRS)
    for domain, attributes in ((DOMAIN, own), (PREPARED_DOMAIN, prepared)):
        definition = _onnx_op(
            op_type=f"{domain}::{op}",
            inputs=[_DT[t] for t in inputs],
            outputs=[_DT[dst]],
            attrs=dict(attributes),
        )(_guarded(op, dst.numpy))
        _our_kernels[definition._id] = dst.numpy


def _define_variant(row_src: dtypes.DType, zps: dtypes.DType, dst: dtypes.DType) -> None:
    """DynamicQuantize to ``dst`` with zps of another type: an op of its own per dst, only in
    the prepared domain, with output_dtype (written by the preparation) as an attribute."""
    attributes = {**_ATTRS, **_ORIGIN_ATTRS, "output_dtype": PyCustomOpDef.dt_int64}
    definition = _onnx_op(
        op_type=f"{PREPARED_DOMAIN}::{DST_VARIANT.format(dst=dst.name)}",
        inputs=[_DT[row_src], _DT[dtypes.F32], _DT[zps]],
        outputs=[_DT[dst]],
        attrs=attributes,
    )(_guarded(DYNAMIC_QUANTIZE.name, dst.numpy))
    _our_kernels[definition._id] = dst.numpy


def _define_all() -> None:
    """One overload per (src, zps) pair of the spec tables that extensions can express."""
    for row in DYNAMIC_QUANTIZE.type_rows:
        if not {row.src, row.dst} <= _DT.keys():
            continue
        # Overloads cannot differ only in dst: the op's own name takes dst = zps type...
        _define(DYNAMIC_QUANTIZE.name, [row.src, dtypes.F32, row.dst], row.dst)
        for zps in row.zps:  # ...and DynamicQuantize_<dst> every other zps type
            if zps != row.dst and zps in _DT:
                _define_variant(row.src, zps, row.dst)
    for row in DYNAMIC_DEQUANTIZE.type_rows:
        if not {row.src, row.dst} <= _DT.keys() or row.dst != dtypes.F32:
            continue  # 4-bit, f16 and bf16 rows: see the module doc
        for zps in row.zps:
            if zps not in _DT:
                continue
            _define(DYNAMIC_DEQUANTIZE.name, [row.src, dtypes.F32, zps], row.dst)


def _install_fast_hook() -> None:
    """Return contiguous arrays instead of ``tolist()`` (the stock hook's per-element cost)."""
    from onnxruntime_extensions import _ocos

    stock = _ocos._on_pyop_invocation

    def invoke(k_id: int, feed: Any, attributes: dict[str, str]) -> tuple[Any, ...]:
        if k_id not in _our_kernels:
            return stock(k_id, feed, attributes)  # type: ignore[no-any-return]
        opdef = _ocos.Opdef._odlist[k_id]
        try:
            result = opdef.body(*feed, **opdef.cast_attributes(attributes))
        except BaseException as error:
            _record(error, opdef.op_type)
            result = _filler(_our_kernels[k_id], np.shape(feed[0]) if feed else ())
        return (k_id, result.shape, np.ascontiguousarray(result).reshape(-1))

    PyCustomOpDef.install_hooker(invoke)


_define_all()  # at import, before any SessionOptions loads the library (see module doc)
_install_fast_hook()


def register(options: ort.SessionOptions) -> None:
    """Register the Python-backed kernels on ``options``."""
    options.register_custom_ops_library(get_library_path())
