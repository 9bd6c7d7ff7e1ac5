"""ONNX OpSchemas for the custom domain, built from the spec, with type and shape inference.

Registering them lets ``onnx.checker.check_model(full_check=True)`` and strict shape inference
understand models that use the ops. Inference applies the same spec rules the kernels apply.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import onnx
import onnx.numpy_helper
from onnx import defs
from onnx.shape_inference import InferenceContext, InferenceError

from ..spec import (
    DOMAIN,
    DST_FROM_ZPS,
    OPS,
    OPSET_VERSION,
    Attribute,
    NodeFacts,
    OpSpec,
    SpecError,
    check_node,
    dtypes,
)

_ATTR_TYPES = {
    "int": defs.OpSchema.AttrType.INT,
    "string": defs.OpSchema.AttrType.STRING,
    "floats": defs.OpSchema.AttrType.FLOATS,
    "ints": defs.OpSchema.AttrType.INTS,
}
_lock = threading.Lock()


def _tensor_types(types: tuple[dtypes.DType, ...]) -> list[str]:
    return [
        f"tensor({onnx.helper.tensor_dtype_to_string(t.onnx).split('.')[-1].lower()})"
        for t in types
    ]


def _type_param(op: OpSpec, argument: str) -> tuple[str, tuple[dtypes.DType, ...]]:
    table = {
        "src": ("T1", op.src_types),
        "scales": ("T2", op.scales_types),
        "zps": ("T3", op.zps_types),
        "dst": ("T4", op.dst_types),
    }
    return table[argument]


def _attribute(attr: Attribute) -> defs.OpSchema.Attribute:
    if attr.required or attr.default is None:
        return defs.OpSchema.Attribute(
            attr.name, _ATTR_TYPES[attr.kind], attr.doc, required=attr.required
        )
    default = onnx.helper.make_attribute(attr.name, attr.default)
    return defs.OpSchema.Attribute(attr.name, default, attr.doc)


def build_schema(op: OpSpec) -> defs.OpSchema:
    """The OpSchema of one operator, derived from its spec."""
    option = defs.OpSchema.FormalParameterOption
    params: dict[str, tuple[str, tuple[dtypes.DType, ...]]] = {}

    def formal(name: str, doc: str, optional: bool) -> defs.OpSchema.FormalParameter:
        type_str, types = _type_param(op, name)
        params[type_str] = (name, types)
        return defs.OpSchema.FormalParameter(
            name, type_str, doc, param_option=option.Optional if optional else option.Single
        )

    inputs = [formal(a.name, a.doc, a.optional) for a in op.inputs]
    outputs = [formal(a.name, a.doc, a.optional) for a in op.outputs]
    constraints = [
        (type_str, _tensor_types(types), f"Types of {name} (the spec's data-type table).")
        for type_str, (name, types) in params.items()
    ]
    schema = defs.OpSchema(  # type: ignore[call-arg]
        op.name,
        DOMAIN,
        OPSET_VERSION,
        f"{op.summary}\n\n{op.formula}",
        inputs=inputs,
        outputs=outputs,
        type_constraints=constraints,
        attributes=[_attribute(a) for a in op.attributes],
        node_determinism=defs.OpSchema.NodeDeterminism.Deterministic,
    )
    schema.set_type_and_shape_inference_function(_inference(op))
    return schema


def _attr_value(ctx: InferenceContext, name: str) -> object:
    attr = ctx.get_attribute(name)
    return None if attr is None else onnx.helper.get_attribute_value(attr)


def _elem_and_shape(
    ctx: InferenceContext, index: int
) -> tuple[int | None, list[int | None] | None]:
    if index >= ctx.get_num_inputs() or not ctx.has_input(index):
        return None, None
    type_proto = ctx.get_input_type(index)
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None, None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    return tensor.elem_type, shape


def _node_name(display: str) -> str:
    # onnx shows "node <Op>[<domain>] (<name>)"; the rule messages want the bare name.
    match = re.match(r"node \S+ \((.*)\)$", display)
    return match.group(1) if match else ""


# Calls that passed every rule, by their serialized attributes, input types and constant
# scales, with the output type they infer (None: the declaration decides): a model repeats a
# handful of them over thousands of nodes, so the checker's per-node inference mostly looks
# one up (~25 µs decoded, a few µs as bytes). Bounded; node names do not matter to the
# rules, only to the messages.
_valid_calls: dict[tuple[object, ...], onnx.TypeProto | None] = {}
_MAX_VALID_CALLS = 4096


def _inference(op: OpSpec) -> Callable[[InferenceContext], None]:
    """The inference function of ``op``'s schema: its fingerprint looked up among the calls
    that passed, else every rule applied (a broken one raised as onnx's InferenceError).

    One function a node where there were four (each call costs ~0.3 µs, 100k nodes ask); the
    fingerprint is everything the rules, the declaration's say and the output type read, as
    bytes, in few calls into the context (each ~1.5-2.5 µs): an input's type is None both when
    the input is absent and when its type is unknown, which only then are told apart; an absent
    scale has no data either."""
    names = tuple(attribute.name for attribute in op.attributes)
    dynamic = not op.is_static

    def infer(ctx: InferenceContext) -> None:
        key: list[object] = [op.name]
        for name in names:
            found = ctx.get_attribute(name)
            key.append(None if found is None else found.SerializeToString())
        count = ctx.get_num_inputs()
        key.append(count)
        for index in range(min(count, 3)):
            type_proto = ctx.get_input_type(index)
            key.append(
                ctx.has_input(index) if type_proto is None else type_proto.SerializeToString()
            )
        if dynamic and count > 1:
            constant = ctx.get_input_data(1)
            key.append(None if constant is None else constant.SerializeToString())
        fingerprint = tuple(key)
        if fingerprint in _valid_calls:
            output = _valid_calls[fingerprint]
        else:
            try:
                output = _output_type(op, ctx, _checked_dst_type(op, ctx))
            except SpecError as error:
                raise InferenceError(str(error)) from None
            with _lock:
                if len(_valid_calls) >= _MAX_VALID_CALLS:
                    _valid_calls.clear()
                _valid_calls[fingerprint] = output
        if output is not None:
            ctx.set_output_type(0, output)

    return infer


def _checked_dst_type(op: OpSpec, ctx: InferenceContext) -> int:
    """Apply every rule to the node; its dst element type."""
    src_type, src_shape = _elem_and_shape(ctx, 0)
    scales_type, scales_shape = (None, None) if op.is_static else _elem_and_shape(ctx, 1)
    zps_type, zps_shape = (None, None) if op.is_static else _elem_and_shape(ctx, 2)
    has = [not op.is_static and ctx.get_num_inputs() > i and ctx.has_input(i) for i in (1, 2)]
    scale_values = None
    constant = ctx.get_input_data(1) if has[0] else None
    # External data is not readable from here (no base directory); kernels check it.
    if constant is not None and constant.data_location != onnx.TensorProto.EXTERNAL:
        scale_values = onnx.numpy_helper.to_array(constant)
    attributes = {a.name: _attr_value(ctx, a.name) for a in op.attributes}
    facts = NodeFacts(
        attributes={k: v for k, v in attributes.items() if v is not None},
        src=src_type or None,
        scales=scales_type or None,
        zps=zps_type or None,
        has_scales=has[0],
        has_zps=has[1],
        src_shape=src_shape,
        scales_shape=scales_shape,
        zps_shape=zps_shape,
        scale_values=scale_values,
    )
    return check_node(op, _node_name(ctx.get_display_name()), facts).dst


def _declaration_decides(op: OpSpec, ctx: InferenceContext) -> bool:
    """A quantize op whose dst neither output_dtype nor s8/u8 zps decide."""
    if not op.is_quantize or _attr_value(ctx, "output_dtype"):
        return False
    if op.is_static:
        return True
    zps_type, _ = _elem_and_shape(ctx, 2)
    return (dtypes.from_onnx(zps_type) if zps_type else None) not in DST_FROM_ZPS


def _output_type(op: OpSpec, ctx: InferenceContext, dst_type: int) -> onnx.TypeProto | None:
    """dst of ``dst_type`` and src's shape; None where the declaration decides."""
    if _declaration_decides(op, ctx):
        # The declared output type decides dst (the seed's rule) and the context cannot see the
        # declaration: infer nothing (onnx refuses an unset element type), so the declared
        # type stands.
        return None
    output = onnx.TypeProto()
    output.tensor_type.elem_type = dst_type
    count = ctx.get_num_inputs()
    src_type = ctx.get_input_type(0) if count and ctx.has_input(0) else None
    source = src_type.tensor_type if src_type is not None else None
    if source is not None and source.HasField("shape"):
        output.tensor_type.shape.CopyFrom(source.shape)
    return output


def register() -> None:
    """Register the custom-domain schemas with onnx (idempotent, thread-safe)."""
    with _lock:
        for op in OPS.values():
            if not defs.has(op.name, OPSET_VERSION, DOMAIN):
                defs.register_schema(build_schema(op))


def schemas() -> list[defs.OpSchema]:
    register()
    return [defs.get_schema(op.name, OPSET_VERSION, DOMAIN) for op in OPS.values()]
