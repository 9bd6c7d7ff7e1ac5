"""Python-backed kernels registered through onnxruntime-extensions (``onnx_op``).

The portable backend, and a second opinion for the native one. What onnxruntime-extensions can
and cannot express, and how each limit is handled:

* Exceptions raised in a Python op abort the process, so kernels never raise. A rejected call
  records a :class:`KernelError`, fills the output (NaN for f32, the lowest value for integers)
  and logs the error; :func:`raise_pending` (called by :class:`quantgraph.InferenceSession` after
  every run) raises it.
* Kernels cannot see node names, and static ops run as dynamic ones (below), so
  :func:`prepare_model` stamps each node with string attributes ``model_op`` and ``node_name``
  and moves it to the domain ``com.quantgraph.prepared``, whose kernels read them: errors name
  the model's own op and node, as the native backend does. Plain onnxruntime sessions on a
  model's own ``com.quantgraph`` nodes name the node ``?``.
* Attributes have no defaults (a missing one fails session creation with
  ``Unable to find attribute 'qtype'``) and float/int lists cannot be read at all (static ops fail
  with ``Attribute name and type don't match``). :func:`prepare_model` writes qtype/axis
  explicitly and turns static ops into dynamic ones with constant scales/zero points.
* Overloads of one op must have one input count, and may not differ only in output type:
  kernels take three inputs (zps explicit), DynamicQuantize's dst is its zps type (s8/u8).
  :func:`prepare_model` adds zero zps where they are missing. Needing the native backend
  (each raises :class:`BackendError` naming the node): s32 zps on DynamicQuantize, dst of
  another type than its zps, static Quantize whose zps do not fit its dst type (e.g. u8 with
  zps=[300]), per_channel ops without zps whose channel count is symbolic, and every float8
  type (onnxruntime-extensions has no float8 tensor type). A type outside the spec's tables, or
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
from onnxruntime_extensions import PyCustomOpDef, get_library_path
from onnxruntime_extensions import onnx_op as _onnx_op

from .. import reference
from ..errors import KernelError
from ..spec import (
    DOMAIN,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    SpecError,
    dtypes,
)

log = logging.getLogger(__name__)

_DT = {
    dtypes.F32: PyCustomOpDef.dt_float,
    dtypes.U8: PyCustomOpDef.dt_uint8,
    dtypes.S8: PyCustomOpDef.dt_int8,
    dtypes.S32: PyCustomOpDef.dt_int32,
}
_ATTRS = {"qtype": PyCustomOpDef.dt_string, "axis": PyCustomOpDef.dt_int64}
# Prepared models move the nodes here, where kernels also read the node's identity.
PREPARED_DOMAIN = f"{DOMAIN}.prepared"
_ORIGIN_ATTRS = {
    "model_op": PyCustomOpDef.dt_string,  # the op as the model has it (Quantize for a static one)
    "node_name": PyCustomOpDef.dt_string,
}
_pending = threading.local()
_our_kernels: dict[int, np.dtype] = {}  # kernel id -> dst dtype


def _record(error: BaseException, op: str, model_op: str = "", node: str = "?") -> None:
    if isinstance(error, SpecError):
        message = str(error)
    else:
        message = f"{model_op or op} node '{node}': {type(error).__name__}: {error}"
    log.error("quantgraph python backend: %s", message)
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


def _guarded(op: str, dst: np.dtype, body: Callable[..., np.ndarray]) -> Callable[..., Any]:
    def kernel(
        *inputs: np.ndarray,
        qtype: str = "per_tensor",
        axis: int = 1,
        model_op: str = "",
        node_name: str = "?",
    ) -> np.ndarray:
        try:
            return body(*inputs, qtype=qtype, axis=int(axis), node=node_name)
        except SpecError as error:
            _record(SpecError(model_op or op, error.node, error.rule, **error.fields), op)
        except BaseException as error:
            _record(error, op, model_op, node_name)
        shape = inputs[0].shape if inputs else ()
        return _filler(dst, shape)

    return kernel


def _define(
    op: str, inputs: list[dtypes.DType], dst: dtypes.DType, body: Callable[..., np.ndarray]
) -> None:
    # Plain onnxruntime sessions run the model's own nodes; prepared models the stamped ones.
    for domain, attributes in ((DOMAIN, _ATTRS), (PREPARED_DOMAIN, {**_ATTRS, **_ORIGIN_ATTRS})):
        definition = _onnx_op(
            op_type=f"{domain}::{op}",
            inputs=[_DT[t] for t in inputs],
            outputs=[_DT[dst]],
            attrs=dict(attributes),
        )(_guarded(op, dst.numpy, body))
        _our_kernels[definition._id] = dst.numpy


def _define_all() -> None:
    """One overload per (src, zps) pair of the spec tables that extensions can express."""
    for row in DYNAMIC_QUANTIZE.type_rows:
        # dst cannot be chosen by the model here, so it is the zps type.
        _define(
            DYNAMIC_QUANTIZE.name,
            [row.src, dtypes.F32, row.dst],
            row.dst,
            reference.dynamic_quantize,
        )
    for row in DYNAMIC_DEQUANTIZE.type_rows:
        for zps in row.zps:
            _define(
                DYNAMIC_DEQUANTIZE.name,
                [row.src, dtypes.F32, zps],
                row.dst,
                reference.dynamic_dequantize,
            )


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


def session_options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    register(options)
    return options


def _declared_types(node: Any, spec: Any) -> dict[str, int | None] | None:
    """Element types of a node's call as the model declares them; None where one is unknown."""
    from ..passes._graph import elem_type
    from ..spec import default_output_dtype

    inputs = [*node.inputs, None, None, None]
    known: dict[str, int | None] = {"src": elem_type(inputs[0])}
    if not spec.is_static:
        known["scales"] = elem_type(inputs[1])
        known["zps"] = elem_type(inputs[2]) if inputs[2] is not None else None
    declared = node.outputs[0].dtype if node.outputs else None
    if spec.is_quantize:
        wanted = node.attributes.get_int("output_dtype", 0)
        zp_raw = known.get("zps")
        zps = dtypes.from_onnx(int(zp_raw)) if zp_raw is not None else None
        known["dst"] = wanted or (int(declared) if declared else default_output_dtype(zps).onnx)
    else:
        known["dst"] = int(declared) if declared else dtypes.F32.onnx
    present = [known["src"], known["dst"]]
    if not spec.is_static:
        present += [known["scales"]] + ([known["zps"]] if inputs[2] is not None else [])
    return known if all(t is not None for t in present) else None


def _check_spec_rules(model: Any) -> None:
    """Rules the model breaks on every backend are the spec's errors, found before any run."""
    import numpy as np

    from ..passes._graph import all_graphs
    from ..spec import OPS, check_scale_values, check_static_attributes, check_types

    for graph in all_graphs(model):
        for node in graph:
            if node.domain != DOMAIN or node.op_type not in OPS:
                continue
            spec = OPS[node.op_type]
            name = node.name or ""
            if not spec.is_static and (len(node.inputs) < 2 or node.inputs[1] is None):
                raise SpecError(spec.name, name, "missing-input", name="scales")
            types = _declared_types(node, spec)
            if types is not None:
                check_types(spec, name, types)
            if spec.is_static:
                scales = node.attributes.get_floats("scales")
                zps = node.attributes.get_ints("zps")
                check_static_attributes(spec, name, scales, zps, dtypes.S8)
                check_scale_values(spec, name, np.asarray(scales, np.float32))


def _stamp_origin(model: Any) -> None:
    """Record each node's own op and name where the kernels can read them (see module doc)."""
    import onnx_ir as ir

    from ..passes._graph import all_graphs
    from ..spec import OPS

    for graph in all_graphs(model):
        for node in graph:
            if node.domain == DOMAIN and node.op_type in OPS:
                node.attributes["model_op"] = ir.AttrString("model_op", node.op_type)
                node.attributes["node_name"] = ir.AttrString("node_name", node.name or "")


def _move_to_prepared_domain(model: Any) -> bool:
    import onnx_ir as ir

    from ..passes._graph import all_graphs

    moved = False
    for graph in all_graphs(model):
        for node in graph:
            if node.domain == DOMAIN:
                node.domain = PREPARED_DOMAIN
                moved = True
                if isinstance(graph, ir.Function):
                    graph.opset_imports[PREPARED_DOMAIN] = graph.opset_imports.get(DOMAIN, 1)
    if moved:
        model.opset_imports[PREPARED_DOMAIN] = model.opset_imports.get(DOMAIN, 1)
    return moved


def prepare_model(model: Any) -> bool:
    """Put the model in the form these kernels run (an ``onnx_ir.Model``, changed in place).

    Returns whether anything changed. Raises :class:`SpecError` for a node that breaks a rule
    no backend could run (a type outside the tables, a missing scales input, a zero scale on a
    static Quantize, ...), naming the model's own op and node.

    Raises :class:`BackendError` for what the Python backend cannot run, naming the node.
    """
    import onnx_ir as ir

    from ..errors import BackendError
    from ..passes.explicit_form import ExplicitFormPass, StaticToDynamicPass

    assert isinstance(model, ir.Model)
    _check_spec_rules(model)
    _stamp_origin(model)
    try:
        modified = ir.passes.Sequential(StaticToDynamicPass(), ExplicitFormPass())(model).modified
    except (ValueError, ir.passes.PassError) as error:
        cause = error.__cause__ or error
        if isinstance(cause, SpecError):
            raise cause from None
        raise BackendError(f"python backend: {cause}; use backend='native'") from None
    from ..passes._graph import all_graphs, elem_type

    for graph in all_graphs(model):
        for node in graph:
            if node.domain != DOMAIN or node.op_type != DYNAMIC_QUANTIZE.name:
                continue
            zps = node.inputs[2] if len(node.inputs) > 2 else None
            raw = elem_type(zps)
            zp_type = dtypes.from_onnx(int(raw)) if raw is not None else None
            wanted = node.attributes.get_int("output_dtype", 0)
            if zp_type not in (dtypes.S8, dtypes.U8) or (wanted and wanted != zp_type.onnx):
                op = node.attributes.get_string("model_op", node.op_type)
                raise BackendError(
                    f"python backend: {op} node '{node.name}' needs dst type "
                    f"{dtypes.onnx_name(wanted) if wanted else 'u8'} with zps of type "
                    f"{zp_type or 'unknown'}; onnxruntime-extensions overloads cannot differ only "
                    "in output type, so dst must be the zps type (s8/u8); use backend='native'"
                )
    return _move_to_prepared_domain(model) or modified
