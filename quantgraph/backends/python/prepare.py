"""The form the Python backend's kernels run a model in, made by a pipeline of passes.

onnxruntime-extensions' Python ops read no attribute defaults, no list attributes and no
optional inputs, and cannot see their node (see :mod:`quantgraph.backends.python.ops`). So, in
order: the spec's rules are checked on every node (a broken one is the rule's
:class:`~quantgraph.spec.SpecError`, as on every backend); each node is stamped with its own op
and name; static ops become dynamic ones with constant inputs; qtype, axis and zero zps are
written out; what the kernels still cannot run is a :class:`~quantgraph.errors.BackendLimit`
naming the node; the nodes move to :data:`PREPARED_DOMAIN`, whose kernels read the stamps.
"""

from __future__ import annotations

import onnx_ir as ir

from ...errors import BackendLimit
from ...ir.shape_inference import inferred_values
from ...ir.values import elem_type, optional_input
from ...ir.walk import spec_nodes
from ...passes import (
    CheckSpecRulesPass,
    ExplicitFormPass,
    MoveDomainPass,
    NoDynamicForm,
    NoExplicitForm,
    StampOriginPass,
    StaticToDynamicPass,
    pipelines,
)
from ...passes.stamp_origin import MODEL_OP
from ...spec import DOMAIN, DST_FROM_ZPS, dst_type, dtypes

PREPARED_DOMAIN = f"{DOMAIN}.prepared"
GROUP_SHAPE_TEXT = "group_shape_text"  # group_shape as "32,1": extensions read no int lists
DST_VARIANT = "DynamicQuantize_{dst}"  # DynamicQuantize to a dst other than its zps type
# Types onnxruntime-extensions' Python ops cannot carry (module doc of backends/python/ops.py);
# float8 ones are static ops', which StaticToDynamicPass reports.
UNSUPPORTED = {
    dtypes.S4: "onnxruntime-extensions has no 4-bit tensor type",
    dtypes.U4: "onnxruntime-extensions has no 4-bit tensor type",
    dtypes.F16: "onnxruntime-extensions' Python ops abort the process on float16 tensors",
    dtypes.BF16: "onnxruntime-extensions' Python ops abort the process on bfloat16 tensors",
}


class UnsupportedTypesPass(ir.passes.InPlacePass):
    """Raises :class:`BackendLimit` for a node with a type the Python kernels cannot take."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        for _, node, op in spec_nodes(model):
            names = ("src", "scales", "zps")
            for index, name in enumerate(names[: 1 if op.is_static else 3]):
                raw = elem_type(optional_input(node, index))
                found = dtypes.from_onnx(int(raw)) if raw is not None else None
                if found in UNSUPPORTED:
                    raise BackendLimit(
                        f"python backend: {op.name} node '{node.name}' has {name} type {found}: "
                        f"{UNSUPPORTED[found]}; use backend='native'"
                    )
        return ir.passes.PassResult(model, modified=False)


class GroupShapeAsTextPass(ir.passes.InPlacePass):
    """Writes every dynamic dequantize node's group_shape as a string attribute ("" if none)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for _, node, op in spec_nodes(model):
            if op.is_quantize or op.is_static:
                continue
            groups = node.attributes.get_ints("group_shape")
            text = ",".join(str(g) for g in groups) if groups is not None else ""
            node.attributes[GROUP_SHAPE_TEXT] = ir.AttrString(GROUP_SHAPE_TEXT, text)
            modified = True
        return ir.passes.PassResult(model, modified)


class PythonLimitsPass(ir.passes.InPlacePass):
    """DynamicQuantize whose dst is not its zps type becomes ``DynamicQuantize_<dst>`` with an
    explicit output_dtype; :class:`BackendLimit` when the zps type is unknown.

    Overloads of an onnxruntime-extensions op cannot differ only in output type, so the op's
    own kernels' dst is their zps type (s8/u8), and each other dst has an op of its own.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        inferred: dict[str, tuple[ir.DataType | None, object]] | None = None
        modified = False
        for _, node, op in spec_nodes(model):
            if not op.is_quantize or op.is_static:
                continue
            zps_input = optional_input(node, 2)
            raw = elem_type(zps_input)
            if raw is None and zps_input is not None and zps_input.name:
                # A computed zero point without a declared type: ask shape inference (once).
                inferred = inferred if inferred is not None else dict(inferred_values(model))
                raw = inferred.get(zps_input.name, (None, None))[0]
            zp_type = dtypes.from_onnx(int(raw)) if raw is not None else None
            wanted = node.attributes.get_int("output_dtype", 0)
            zps = zp_type.onnx if zp_type is not None else None
            dst = dst_type(op, output_dtype=wanted, zps=zps)
            if zp_type in DST_FROM_ZPS and dst == zps:
                continue
            dst_dtype = dtypes.from_onnx(dst)  # the rules passed: a type of the tables
            if zp_type is not None and dst_dtype is not None:
                node.op_type = DST_VARIANT.format(dst=dst_dtype.name)
                node.attributes["output_dtype"] = ir.AttrInt64("output_dtype", dst)
                modified = True
                continue
            model_op = node.attributes.get_string(MODEL_OP, node.op_type)
            raise BackendLimit(
                f"python backend: {model_op} node '{node.name}' has zps whose type nothing "
                "declares, and onnxruntime-extensions overloads cannot differ only in output "
                "type (declare the zps type, or use backend='native')"
            )
        return ir.passes.PassResult(model, modified=modified)


def prepare_model(model: ir.Model) -> bool:
    """Put ``model`` in the form the Python kernels run (changed in place); whether it changed.

    Raises :class:`~quantgraph.spec.SpecError` for a node no backend could run and
    :class:`BackendLimit` for what only the Python backend cannot run, naming the node.
    """
    manager = ir.passes.PassManager(
        [
            CheckSpecRulesPass(),
            UnsupportedTypesPass(),
            StampOriginPass(),
            StaticToDynamicPass(),
            ExplicitFormPass(),
            PythonLimitsPass(),
            GroupShapeAsTextPass(),
            MoveDomainPass(DOMAIN, PREPARED_DOMAIN),
        ],
        steps=1,
    )
    try:
        return pipelines.run(manager, model).modified
    except (NoDynamicForm, NoExplicitForm) as error:
        raise BackendLimit(f"python backend: {error}; use backend='native'") from None
