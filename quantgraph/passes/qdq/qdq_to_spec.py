"""QuantizeLinear / DequantizeLinear  ->  DynamicQuantize / DynamicDequantize (or static ops).

ONNX                                   spec (quantgraph domain)
QuantizeLinear(x, s, zp)       ->      DynamicQuantize(x, s', zp')      qtype, axis
DequantizeLinear(q, s, zp)     ->      DynamicDequantize(q, s', zp')    qtype, axis
  with constant s, zp and static=True: Quantize / Dequantize with scales=[...], zps=[...]
  float8 always goes static (the dynamic ops have no f8 rows)

s' and zp' are 1-D (a scalar becomes [1]); a missing zp becomes an explicit zero of the
quantized type. Nodes the spec cannot express stay as they are and are reported with why.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx_ir as ir

from ...errors import ModelError
from ...ir.opsets import MAX_OPSET, MIN_OPSET
from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.shape_inference import inferred_values
from ...ir.values import Shape, constant_array, elem_type, value_shape
from ...ir.walk import GraphLike, is_standard, opset_version
from ...spec import (
    DEFAULT_QUANTIZED,
    DEQUANTIZE,
    DOMAIN,
    DYNAMIC_DEQUANTIZE,
    DYNAMIC_QUANTIZE,
    OPSET_VERSION,
    PER_CHANNEL,
    PER_GROUP,
    PER_TENSOR,
    QUANTIZE,
    dtypes,
    resolve_axis,
)
from ..node_rewrite import NodeRewritePass, Progress
from ..report import RewriteReport, RewriteResult, Skip
from ..requirements import spec_domain_imported
from .qdq_plans import CONTRIB_DOMAIN, Plan, Replacement, plan_key

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
ORIGIN = "quantgraph.origin"  # node metadata: the domain a converted com.microsoft Q/DQ had
PADDED_META = "quantgraph.padded"  # node.meta of a padded blocked node: (extent, padded extent)
ONNX_DEFAULT_AXIS = 1  # QuantizeLinear/DequantizeLinear's (it happens to equal the spec's)
_KNOWN_ATTRIBUTES = {"axis", "saturate", "block_size", "output_dtype", "precision"}
# Quantized types the spec's ops take: dst of a quantize op, src of a dequantize op.
_QUANTIZED = tuple(dict.fromkeys((*DYNAMIC_QUANTIZE.dst_types, *QUANTIZE.dst_types)))
_DEQUANTIZABLE = tuple(dict.fromkeys((*DYNAMIC_DEQUANTIZE.src_types, *DEQUANTIZE.src_types)))
# The same as ONNX element types, and each op's scale types: asked once a node (the spec's
# tuples of DTypes compare field by field, ~1 µs a comparison).
_QUANTIZED_ONNX = frozenset(t.onnx for t in _QUANTIZED)
_DEQUANTIZABLE_ONNX = frozenset(t.onnx for t in _DEQUANTIZABLE)
_SCALES = {True: DYNAMIC_QUANTIZE.scales_types, False: DYNAMIC_DEQUANTIZE.scales_types}
_SCALES_ONNX = {quantize: frozenset(t.onnx for t in types) for quantize, types in _SCALES.items()}
_IR_TYPES = {t.onnx: ir.DataType(t.onnx) for t in dtypes.ALL}  # ir.DataType(x) is an enum call


class QdqToSpecPass(NodeRewritePass):
    """Rewrites standard Q/DQ nodes in every graph, subgraph and function of a model.

    ``static=True`` emits static Quantize/Dequantize where scale and zero point are constants.
    ``contrib=False`` leaves com.microsoft QuantizeLinear/DequantizeLinear alone (listed);
    by default they are converted like ONNX's where the spec covers them.
    """

    op_types = frozenset(QDQ_OPS)

    def __init__(
        self,
        *,
        static: bool = False,
        contrib: bool = True,
        report: RewriteReport | None = None,
        progress: Progress | None = None,
    ) -> None:
        super().__init__(report=report, progress=progress)
        self.static = static
        self.contrib = contrib

    def call(self, model: ir.Model) -> RewriteResult:
        self._inferred: dict[str, tuple[ir.DataType | None, Shape | None]] | None = None
        self._bad_scale: dict[int, bool] = {}  # by scale value: often shared by thousands
        self._opsets: dict[int, int | None] = {}  # by graph
        self._attrs: dict[tuple[str, object], ir.Attr] = {}  # equal attributes, one object
        self._shapes: dict[ir.Value, Shape | None] = {}  # scales and zero points: shared
        self._plans: dict[tuple[object, ...], Plan] = {}  # by what _plan reads: plan_key
        self._replacements: dict[tuple[object, ...], Replacement] = {}  # by the plan's key
        return super().call(model)

    def matches(self, node: ir.Node) -> bool:
        # Another domain's op that happens to share the name is not ours to touch.
        return node.op_type in QDQ_OPS and (is_standard(node) or node.domain == CONTRIB_DOMAIN)

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        if not is_standard(node) and not self.contrib:
            raise Skip("contrib-off", f"{node.domain} op left as is (contrib conversion is off)")
        key = plan_key(graph, node)
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._plan(model, graph, node)
            if key is not None:
                self._plans[key] = plan
        return self._rewrite(node, plan, factory, key), plan.detail

    def ensures(self, model: ir.Model) -> None:
        spec_domain_imported(model)

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        if report.converted_nodes:
            model.opset_imports.setdefault(DOMAIN, OPSET_VERSION)
            for function in model.functions.values():
                if any(n.domain == DOMAIN for n in function):
                    function.opset_imports.setdefault(DOMAIN, OPSET_VERSION)

    # -- what the node means ---------------------------------------------------------------

    def _plan(self, model: ir.Model, graph: GraphLike, node: ir.Node) -> Plan:
        quantize = node.op_type == "QuantizeLinear"
        attributes = node.attributes
        if is_standard(node):
            key = id(graph)
            if key not in self._opsets:
                self._opsets[key] = opset_version(model, graph)
            opset = self._opsets[key]
            if opset is None or not MIN_OPSET <= opset <= MAX_OPSET:
                raise Skip(
                    "opset",
                    f"opset {opset} is outside the supported range {MIN_OPSET}..{MAX_OPSET}",
                )
            if attributes:
                _refuse_unknown_to_opset(node, opset)
        # com.microsoft Q/DQ compute the same as ONNX's; their extra types are refused below.
        unknown = set(attributes) - _KNOWN_ATTRIBUTES if attributes else None
        if unknown:
            raise Skip("unknown-attribute", f"unknown attributes {sorted(unknown)}")
        block_size = attributes.get_int("block_size", 0) if attributes else 0
        if block_size and quantize:
            raise Skip(
                "blocked-quantize",
                "blocked QuantizeLinear (block_size) has no spec equivalent: per_group is "
                "DynamicDequantize's only",
            )
        precision = attributes.get_int("precision", 0) if attributes else 0
        if quantize and precision not in (0, ir.DataType.FLOAT):
            raise Skip(
                "precision", f"precision={_name(ir.DataType(precision))}: the spec divides in f32"
            )
        if len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
            raise Skip("missing-input", "x and scale inputs are required")
        source, scale = node.inputs[0], node.inputs[1]
        zero_point = node.inputs[2] if len(node.inputs) > 2 else None

        raw_scale_type = self._type_of(model, scale)
        scale_type = dtypes.from_onnx(int(raw_scale_type)) if raw_scale_type else None
        if scale_type is None or scale_type.onnx not in _SCALES_ONNX[quantize]:
            names = ", ".join(t.name for t in _SCALES[quantize])
            raise Skip(
                "scale-type",
                f"scale type {_name(raw_scale_type)} is not one of the spec's ({names})",
            )
        wanted = attributes.get_int("output_dtype", 0) if attributes else 0
        if not quantize and wanted not in (0, scale_type.onnx):
            raise Skip(
                "output-dtype",
                f"output_dtype={_name(ir.DataType(wanted))}: the spec's dst is the scales' type "
                f"({scale_type.name})",
            )
        source_type = self._type_of(model, source)
        if quantize and source_type not in (ir.DataType.FLOAT, None):
            raise Skip("input-type", f"input type {_name(source_type)} is not f32")
        quant_type = self._quantized_type(node, quantize, source_type, zero_point)

        if quant_type.is_float8:
            if scale_type != dtypes.F32:
                raise Skip(
                    "scale-type",
                    f"float8 with {scale_type.name} scales: the spec's f8 ops take f32",
                )
            if node.attributes.get_int("saturate", 1) == 0:
                raise Skip(
                    "float8-saturate",
                    "saturate=0 keeps float8 overflow as inf/NaN; the spec saturates",
                )
            zp_values = constant_array(zero_point)
            if zero_point is not None and (
                zp_values is None or np.any(zp_values.astype(np.float32))
            ):
                raise Skip(
                    "float8-zero-point",
                    "a float8 zero point must be a constant zero (the spec has no f8 zps)",
                )
            zero_point = None

        shape = self._shape_of(model, scale)
        if shape is None:
            raise Skip("unknown-shape", "scale has an unknown shape (run shape inference first)")
        axis = attributes.get_int("axis", ONNX_DEFAULT_AXIS) if attributes else ONNX_DEFAULT_AXIS
        groups = None
        if block_size:
            groups = self._groups(model, source, shape, axis, block_size)
        elif len(shape) > 1:
            raise Skip(
                "scale-rank", f"scale of rank {len(shape)} without block_size is not valid ONNX"
            )
        if zero_point is not None:
            zp_shape = self._shape_of(model, zero_point)
            if zp_shape is not None and zp_shape != shape and not _single(zp_shape, shape):
                raise Skip(
                    "zero-point-shape",
                    f"zero point shape {list(zp_shape)} differs from scale shape {list(shape)}",
                )
        if quantize and self._is_bad_scale(scale):
            raise Skip(
                "scale-value",
                "a zero or non-finite constant scale: the spec's quantize divides by it "
                "(rule scale-value)",
            )
        count = 1 if not shape else shape[0]
        qtype = PER_GROUP if groups else PER_TENSOR if count == 1 else PER_CHANNEL
        return Plan(
            quantize,
            qtype,
            axis,
            quant_type,
            scale,
            zero_point,
            count if not groups else None,
            shape,
            scale_type,
            groups,
            contrib=not is_standard(node),
            padded=node.meta.get(PADDED_META) if block_size else None,  # only blocked ones
        )

    def _groups(
        self, model: ir.Model, source: ir.Value, scale_shape: Shape, axis: int, block: int
    ) -> tuple[int, ...]:
        """ONNX's block_size along ``axis`` as the spec's group_shape: groups must tile src
        exactly (ONNX lets the last block be short; oneDNN's per_group does not)."""
        src_shape = self._shape_of(model, source)
        if src_shape is None or len(src_shape) != len(scale_shape):
            raise Skip(
                "unknown-shape", "blocked dequantization needs src and scale of one known rank"
            )
        resolved = resolve_axis(axis, len(src_shape))
        if resolved is None:
            raise Skip("blocks", f"axis {axis} is out of range for src of rank {len(src_shape)}")
        extent, blocks = src_shape[resolved], scale_shape[resolved]
        if extent is None or blocks is None:
            raise Skip(
                "unknown-shape",
                f"block_size {block} along axis {axis}: a symbolic dim cannot be checked to be "
                "tiled exactly by the groups",
            )
        if extent != blocks * block:
            short = -(-extent // block) == blocks
            raise Skip(
                "blocks",
                f"block_size {block} along axis {axis}: src dim {extent} is not {blocks} whole "
                "blocks (the spec's groups tile src exactly"
                + ("; a short last block is padded only in a constant src)" if short else ")"),
            )
        return tuple(block if d == resolved else 1 for d in range(len(src_shape)))

    def _is_bad_scale(self, scale: ir.Value) -> bool:
        known = self._bad_scale.get(id(scale))
        if known is None:
            values = constant_array(scale)
            known = values is not None and bool(np.any(~np.isfinite(values) | (values == 0)))
            self._bad_scale[id(scale)] = known
        return known

    def _type_of(self, model: ir.Model, value: ir.Value) -> ir.DataType | None:
        """A value's element type; for untyped intermediates, ONNX's shape inference is asked
        once per pass (on a copy: nothing it infers is written into the model)."""
        known = elem_type(value)
        return known if known is not None else self._inferred_of(model, value)[0]

    def _shape_of(self, model: ir.Model, value: ir.Value) -> Shape | None:
        """A value's shape as declared, else as ONNX's shape inference finds it (once a value:
        a scale is often shared by thousands of nodes, and the pass changes no shape)."""
        if value in self._shapes:
            return self._shapes[value]
        known = value_shape(value)
        found = known if known is not None else self._inferred_of(model, value)[1]
        self._shapes[value] = found
        return found

    def _inferred_of(
        self, model: ir.Model, value: ir.Value
    ) -> tuple[ir.DataType | None, Shape | None]:
        if value.name is None:
            return None, None
        if self._inferred is None:
            self._inferred = inferred_values(model)
        return self._inferred.get(value.name, (None, None))

    @staticmethod
    def _quantized_type(
        node: ir.Node, quantize: bool, source: ir.DataType | None, zero_point: ir.Value | None
    ) -> dtypes.DType:
        raw = elem_type(zero_point) if zero_point is not None else None
        if raw is None and quantize:
            requested = node.attributes.get_int("output_dtype", 0) if node.attributes else 0
            raw = ir.DataType(requested or DEFAULT_QUANTIZED.onnx)  # ONNX's default
        if raw is None and not quantize:
            raw = source
        if raw is None:
            raise Skip(
                "quantized-type",
                "the quantized type is unknown (no zero point and no type information)",
            )
        if raw == ir.DataType.INT32 and not quantize:
            raise Skip(
                "quantized-type",
                "int32 input (a bias): the spec dequantizes 8-bit, 4-bit and f8 only",
            )
        found = dtypes.from_onnx(int(raw))
        spec_types = _QUANTIZED if quantize else _DEQUANTIZABLE
        if found is None or found.onnx not in (
            _QUANTIZED_ONNX if quantize else _DEQUANTIZABLE_ONNX
        ):
            names = ", ".join(t.name for t in spec_types)
            raise Skip(
                "quantized-type",
                f"quantized type {_name(raw)} has no spec equivalent (the spec has {names})",
            )
        return found

    # -- the replacement --------------------------------------------------------------------

    def _rewrite(
        self,
        node: ir.Node,
        plan: Plan,
        factory: ConstantFactory,
        key: tuple[object, ...] | None = None,
    ) -> str:
        """``node`` replaced as ``plan`` says; ``key`` (the plan's, :func:`plan_key`) keeps
        the replacement for the nodes alike that follow, where it made nothing for this node
        alone (a Reshape of a run-time scale)."""
        replacement = self._replacements.get(key) if key is not None else None
        if replacement is None:
            replacement, shared = self._replacement(node, plan, factory)
            if shared and key is not None:
                self._replacements[key] = replacement
        source = node.inputs[0]
        if (
            replacement.static
            and not plan.quantize
            and source is not None
            and elem_type(source) is None
        ):
            # Static Dequantize has no zps input: the quantized type lives only in src's type.
            # Record it (ONNX ties x's type to the zero point's), or lowering cannot tell it.
            source.type = ir.TensorType(_IR_TYPES[plan.quant_type.onnx])
        if plan.contrib:  # lowering gives the node back its domain
            node.metadata_props[ORIGIN] = CONTRIB_DOMAIN
        self.stale += replace_node(
            node,
            (DOMAIN, replacement.op_type, OPSET_VERSION),
            [source, *replacement.operands],
            replacement.attributes,
            _IR_TYPES[plan.quant_type.onnx if plan.quantize else plan.scale_type.onnx],
        )
        return replacement.op_type

    def _replacement(
        self, node: ir.Node, plan: Plan, factory: ConstantFactory
    ) -> tuple[Replacement, bool]:
        """The spec op ``plan`` makes of ``node``, and whether it suits every node of that
        plan in this graph (False: a Reshape was inserted for this node)."""
        static = (self.static or plan.quant_type.is_float8) and plan.static_form_exists
        scales = constant_array(plan.scale) if static else None
        zps = constant_array(plan.zero_point) if static else None
        if static and (scales is None or (plan.zero_point is not None and zps is None)):
            if plan.quant_type.is_float8:
                raise Skip(
                    "float8-runtime-scale",
                    "float8 needs the static ops, and the scale is not a constant",
                )
            static = False
        attributes: list[ir.Attr] = [self._attr("qtype", plan.qtype)]
        if plan.group_shape is not None:
            attributes.append(self._attr("group_shape", plan.group_shape))
        else:
            attributes.append(self._attr("axis", plan.axis))
        shared = True
        operands: list[ir.Value | None] = []
        if static:
            assert scales is not None
            op_type = QUANTIZE.name if plan.quantize else DEQUANTIZE.name
            attributes.append(ir.AttrFloat32s("scales", [float(v) for v in scales.reshape(-1)]))
            if zps is not None:
                attributes.append(ir.AttrInt64s("zps", [int(v) for v in zps.reshape(-1)]))
        else:
            op_type = DYNAMIC_QUANTIZE.name if plan.quantize else DYNAMIC_DEQUANTIZE.name
            scale_type = _IR_TYPES[plan.scale_type.onnx]
            if plan.group_shape is not None:  # scales and zps keep src's rank
                operands = [plan.scale, plan.zero_point]
            else:
                scale, own_scale = self._as_1d(
                    node, plan.scale, plan.scale_shape, scale_type, factory
                )
                zero_point, own_zero_point = self._zero_point(node, plan, factory)
                operands = [scale, zero_point]
                shared = not own_scale and not own_zero_point
            if operands[1] is None:
                operands.pop()
        if plan.quantize and (static or len(operands) < 2):
            attributes.append(self._attr("output_dtype", plan.quant_type.onnx))
        return Replacement(op_type, operands, attributes, static), shared

    def _attr(self, name: str, value: str | int | tuple[int, ...]) -> ir.Attr:
        """One Attr object for every node of this pass with the same attribute (nothing
        changes an Attr in place; 100k nodes share three instead of holding 300k)."""
        found = self._attrs.get((name, value))
        if found is None:
            if isinstance(value, str):
                found = ir.AttrString(name, value)
            elif isinstance(value, tuple):
                found = ir.AttrInt64s(name, list(value))
            else:
                found = ir.AttrInt64(name, value)
            self._attrs[name, value] = found
        return found

    @staticmethod
    def _as_1d(
        node: ir.Node,
        value: ir.Value,
        shape: Shape | None,
        dtype: ir.DataType,
        factory: ConstantFactory,
    ) -> tuple[ir.Value, bool]:
        """``value`` as 1-D, and whether that was made for ``node`` alone (a Reshape)."""
        if shape is not None and len(shape) == 1:
            return value, False
        known = factory.known_1d(value)
        if known is not None:
            return known, False
        array = constant_array(value)  # an initializer or a Constant node
        if array is None:  # a run-time scalar, reshaped per use
            return factory.reshaped(value, [1], node, "1d", dtype), True
        return factory.constant_1d(value, array, node), False

    def _zero_point(
        self, node: ir.Node, plan: Plan, factory: ConstantFactory
    ) -> tuple[ir.Value | None, bool]:
        if plan.zero_point is not None:
            quantized = _IR_TYPES[plan.quant_type.onnx]
            return self._as_1d(node, plan.zero_point, plan.scale_shape, quantized, factory)
        if plan.count is None:
            return None, False  # unknown channel count: leave zps out, output_dtype says the type
        zero = np.zeros(plan.count, dtype=plan.quant_type.numpy)
        name = f"quantgraph_zero_{plan.quant_type.name}_{plan.count}"
        return factory.constant(name, zero, node), False


def _refuse_unknown_to_opset(node: ir.Node, opset: int) -> None:
    """An attribute the node's opset does not define (axis below 13, block_size below 21) makes
    the input invalid: onnx.checker and onnxruntime refuse to load it, so quantgraph says so
    rather than convert a model nobody could compare against."""
    extra = sorted(set(node.attributes) - _defined(node.op_type, opset))
    if not extra:
        return
    needed = next(
        (v for v in range(opset + 1, MAX_OPSET + 1) if set(extra) <= _defined(node.op_type, v)),
        MAX_OPSET,
    )
    raise ModelError(
        f"node '{node.name}': {node.op_type} has attribute {', '.join(extra)}, which opset "
        f"{opset} does not define (ONNX has it from opset {needed}), so onnx.checker and "
        f"onnxruntime refuse this model: convert it to opset {needed} "
        f"(onnx.version_converter.convert_version(model, {needed})) or quantize it with "
        "com.microsoft Q/DQ (quantize_static extra_options UseQDQContribOps)"
    )


@functools.cache
def _defined(op_type: str, opset: int) -> frozenset[str]:
    """The attributes ONNX defines for ``op_type`` at ``opset`` (asked once per pair)."""
    return frozenset(onnx.defs.get_schema(op_type, opset, "").attributes)


def _single(*shapes: Shape) -> bool:
    """Every shape holds exactly one element ([] and [1] both mean per tensor)."""
    return all(all(d == 1 for d in shape) for shape in shapes)


def _name(data_type: ir.DataType | None) -> str:
    return "unknown" if data_type is None else dtypes.onnx_name(int(data_type))
