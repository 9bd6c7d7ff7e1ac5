"""The main graph of a rewritten model as one oneDNN Graph description (onednn_description).

Every node becomes an op, as PyTorch's oneDNN fuser builds its graph: spec ops whose scales
and zero points are constants in their *static* form (oneDNN's int8 fusion patterns match
static Dequantize/Quantize only), the compute oneDNN has an op for (table in
:mod:`.onednn_ops`), and everything else a Wildcard so oneDNN sees where partitions must end.
Graph outputs get a Wildcard consumer too: a tensor the model returns is never fused away.

A DequantizeLinear or spec dequantize of a constant int32 bias becomes an f32 constant computed
once here (oneDNN takes f32 bias only). Logical tensor ids come from one counter per model, so
two partitions never share an id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from ...ir.values import constant_array, elem_type, optional_input, value_shape
from ...ir.walk import spec_op, subgraphs
from ...spec import PER_CHANNEL, PER_GROUP, PER_TENSOR, OpSpec
from . import onednn_ops
from .onednn_description import DTYPES, Op, Tensor, boolean, floats, ints, string

Attrs = dict[str, tuple[str, tuple[object, ...]]]

SPEC = "spec"
COMPUTE = "compute"
WILDCARD = "wildcard"
END = "end"

DYNAMIC_SCALES = (
    "its scales or zero points are computed at run time: oneDNN's int8 fusion patterns take "
    "static Quantize/Dequantize (constant scales and zero points) only"
)
PER_CHANNEL_ZPS = (
    "per-channel non-zero zero points: oneDNN v3.2 applies zps[0] to every channel and v3.13 "
    "refuses them, so a partition would differ from the spec"
)
SATURATES = (
    "int8 products saturate in int16 pairs on this CPU (no VNNI), as onnxruntime's own int8 "
    "kernels do; results may differ from the float composition by more than one step where "
    "|weights| > 64"
)
WEIGHT_ZPS = (
    "non-zero zero points on a constant weight: oneDNN's int8 convolution and matmul take "
    "symmetric weights only"
)


@dataclass
class Translation:
    """The whole-graph description and where each part came from."""

    tensors: dict[int, Tensor] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    nodes: dict[int, ir.Node] = field(default_factory=dict)  # op id -> its ONNX node
    roles: dict[int, str] = field(default_factory=dict)  # op id -> SPEC/COMPUTE/WILDCARD/END
    values: dict[int, ir.Value] = field(default_factory=dict)  # tensor id -> ONNX value
    folded: dict[int, np.ndarray] = field(default_factory=dict)  # tensor id -> f32 bias
    folded_nodes: dict[int, ir.Node] = field(default_factory=dict)  # tensor id -> its DQ
    reasons: dict[str, str] = field(default_factory=dict)  # spec op key -> why not translated
    copies: set[int] = field(default_factory=set)  # Dequantize ops copied per consumer
    wide_weights: set[int] = field(default_factory=set)  # weight Dequantizes beyond +-64

    def op(self, op_id: int) -> Op:
        return self._by_id()[op_id]

    def _by_id(self) -> dict[int, Op]:
        return {o.id: o for o in self.ops}


def key(node: ir.Node) -> str:
    """A node's identity in plans: its first output's name (unique in a model)."""
    return (node.outputs[0].name or "") if node.outputs else ""


class Translator:
    """Builds the :class:`Translation` of ``model``'s main graph for the loaded oneDNN."""

    def __init__(
        self,
        model: ir.Model,
        version: tuple[int, int, int] = (3, 2, 0),
        *,
        int8_saturates: bool = False,
    ) -> None:
        self.model = model
        self.version = version
        self.int8_saturates = int8_saturates
        self.result = Translation()
        self._ids: dict[int, int | None] = {}  # id(ir.Value) -> tensor id
        self._next_tensor = 0
        self._next_op = 0
        self._current: ir.Node | None = None  # the node being translated
        # (value, consumer) -> the tensor of that consumer's own copy of a Dequantize
        self._copies: dict[tuple[int, int], int] = {}

    # -- tensors ---------------------------------------------------------------------------

    def tensor(self, value: ir.Value | None) -> int | None:
        """The logical tensor of ``value``; None when oneDNN has no such tensor (another
        dtype, rank 0)."""
        if value is None:
            return None
        if self._current is not None:  # a Dequantize copied for this consumer
            copied = self._copies.get((id(value), id(self._current)))
            if copied is not None:
                return copied
        if id(value) in self._ids:
            return self._ids[id(value)]
        dtype = DTYPES.get(elem_type(value))  # type: ignore[arg-type]
        dims = value_shape(value)
        found: int | None = None
        if dtype is not None and dims != ():
            found = self._add_tensor(value, dtype, _is_constant(value), dims)
        self._ids[id(value)] = found
        return found

    def dims(self, tensor: int) -> tuple[int | None, ...] | None:
        """The dims of logical tensor ``tensor`` (None: unknown rank)."""
        return self.result.tensors[tensor].dims

    def _add_tensor(
        self, value: ir.Value, dtype: str, const: bool, dims: tuple[int | None, ...] | None
    ) -> int:
        found = self._next_tensor
        self._next_tensor += 1
        self.result.tensors[found] = Tensor(found, dtype, const, dims)
        self.result.values[found] = value
        return found

    # -- ops -------------------------------------------------------------------------------

    def add_op(
        self,
        node: ir.Node | None,
        kind: str,
        inputs: list[int],
        outputs: list[int],
        attrs: dict[str, tuple[str, tuple[object, ...]]] | None = None,
        role: str = COMPUTE,
    ) -> Op:
        op = Op(self._next_op, kind, tuple(inputs), tuple(outputs), tuple((attrs or {}).items()))
        self._next_op += 1
        self.result.ops.append(op)
        self.result.roles[op.id] = role
        if node is not None:
            self.result.nodes[op.id] = node
        return op

    def run(self) -> Translation:
        graph = self.model.graph
        for node in graph:
            self._node(node)
        self._current = None
        for value in graph.outputs:
            found = self.tensor(value)
            if found is not None:
                self.add_op(None, "Wildcard", [found], [], role=END)
        return self.result

    def _node(self, node: ir.Node) -> None:
        self._current = node
        if node.outputs and all(_is_constant(v) for v in node.outputs):
            # A Constant node (PyTorch's exporter writes them) makes constants, as initializers
            # are: no op of the description produces them (oneDNN refuses a Wildcard with a
            # constant output, and with it the whole graph).
            return
        if self._fold_bias(node):
            return
        spec = spec_op(node)
        if spec is not None:
            made = self._spec(node, spec)
            if isinstance(made, str):
                self.result.reasons[key(node)] = made
                self._wildcard(node)
            return
        if node.domain in ("", "ai.onnx") and onednn_ops.translate(self, node):
            return
        self._wildcard(node)

    def _wildcard(self, node: ir.Node) -> None:
        inputs = [self.tensor(v) for v in node.inputs]
        # Values a subgraph reads from this graph are inputs of the node that holds it.
        for inner in _node_subgraphs(node):
            for inner_node in inner:
                inputs += [self.tensor(v) for v in inner_node.inputs if v is not None]
        outputs = [self.tensor(v) for v in node.outputs]
        known_in = list(dict.fromkeys(i for i in inputs if i is not None))
        known_out = [o for o in outputs if o is not None]
        if known_in or known_out:
            self.add_op(node, "Wildcard", known_in, known_out, role=WILDCARD)

    # -- int32 bias ------------------------------------------------------------------------

    def _fold_bias(self, node: ir.Node) -> bool:
        spec = spec_op(node)
        standard = node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx")
        if not standard and (spec is None or spec.is_quantize):
            return False
        source = node.inputs[0] if node.inputs else None
        src = constant_array(source)
        if src is None or src.dtype != np.int32:
            return False
        if spec is not None and spec.is_static:
            scale = np.asarray(node.attributes["scales"].value, dtype=np.float32)
            zps = node.attributes.get("zps")
            zp = np.asarray(zps.value if zps is not None else [0], dtype=np.int64)
        else:
            scale_array = constant_array(optional_input(node, 1))
            zp_value = optional_input(node, 2)
            zp_array = constant_array(zp_value)
            if scale_array is None or (zp_value is not None and zp_array is None):
                return False
            scale = scale_array.astype(np.float32)
            zp = np.zeros(1, np.int64) if zp_array is None else zp_array.astype(np.int64)
        if src.ndim != 1 or scale.size not in (1, src.size) or zp.size not in (1, src.size):
            return False
        bias = (src.astype(np.int64) - zp.reshape(-1)).astype(np.float32) * scale.reshape(-1)
        self._fold(node, bias.astype(np.float32))
        return True

    def _fold(self, node: ir.Node, values: np.ndarray) -> None:
        """``node``'s output becomes the f32 constant ``values``, computed here once."""
        earlier = self._ids.get(id(node.outputs[0]))
        if earlier is not None:  # its var tensor, made before the fold was decided
            del self.result.tensors[earlier]
            del self.result.values[earlier]
        found = self._add_tensor(node.outputs[0], "f32", True, tuple(int(d) for d in values.shape))
        self._ids[id(node.outputs[0])] = found
        self.result.folded[found] = values
        self.result.folded_nodes[found] = node

    # -- spec ops --------------------------------------------------------------------------

    def _spec(self, node: ir.Node, spec: OpSpec) -> Op | str:
        given = {name: attr.value for name, attr in node.attributes.items()}
        attrs = spec.with_defaults(given)
        qtype = str(attrs.get("qtype", PER_TENSOR))
        axis = int(attrs.get("axis", 1))  # type: ignore[call-overload]
        src = self.tensor(node.inputs[0])
        dst = self.tensor(node.outputs[0])
        if src is None or dst is None:
            return "its tensors have a type or rank oneDNN Graph has no logical tensor for"
        src_type = self.result.tensors[src].dtype
        dst_type = self.result.tensors[dst].dtype
        if spec.is_static:
            scales = np.asarray(attrs["scales"], dtype=np.float32)
            zps_given = attrs.get("zps")
            zps = None if zps_given is None else np.asarray(zps_given, dtype=np.int64)
            scales_value: ir.Value | None = None
            zps_value: ir.Value | None = None
        else:
            scales_value, zps_value = node.inputs[1], optional_input(node, 2)
            scale_array = constant_array(scales_value)
            zp_array = constant_array(zps_value)
            if scale_array is None or (zps_value is not None and zp_array is None):
                return DYNAMIC_SCALES
            scales = scale_array
            zps = None if zp_array is None else zp_array.astype(np.int64)
        if spec.is_quantize:
            if src_type != "f32" or dst_type not in ("s8", "u8"):
                return (
                    f"Quantize {src_type} -> {dst_type}: oneDNN's int8 patterns take f32 -> s8/u8"
                )
        elif qtype == PER_GROUP or src_type in ("s4", "u4"):
            return self._dynamic_dequantize(node, src, dst, attrs, scales_value, zps_value)
        elif src_type not in ("s8", "u8") or dst_type != "f32" or scales.dtype != np.float32:
            return f"Dequantize {src_type} -> {dst_type}: oneDNN's int8 patterns take s8/u8 -> f32"
        if qtype not in (PER_TENSOR, PER_CHANNEL):
            return f"qtype {qtype} has no static form"
        if zps is not None and np.any(zps != 0):
            if qtype == PER_CHANNEL:
                return PER_CHANNEL_ZPS
            if not spec.is_quantize and _feeds_weight(node):
                return WEIGHT_ZPS
        if self.int8_saturates and src_type == "s8" and _feeds_weight(node):
            weight = constant_array(node.inputs[0])
            if (
                weight is not None
                and weight.size
                and int(np.abs(weight.astype(np.int32)).max()) > 64
            ):
                self.result.wide_weights.add(self._next_op)  # the Dequantize made below
        made = {
            "qtype": string(qtype),
            "axis": ints([axis]),
            "scales": floats(scales.reshape(-1).tolist()),
        }
        if zps is not None:
            made["zps"] = ints(zps.reshape(-1).tolist())
        if spec.is_quantize:
            return self.add_op(node, spec.static_form.name, [src], [dst], made, role=SPEC)
        return self._dequantize(node, src, dst, made)

    def _dequantize(self, node: ir.Node, src: int, dst: int, attrs: Attrs) -> Op:
        """One Dequantize per consumer, as PyTorch's fuser duplicates them: oneDNN fuses a
        Dequantize into a consumer's partition only when that consumer is its only one (the
        arithmetic is the same; the ONNX node stays while any consumer runs unfused)."""
        consumers = list(dict.fromkeys(id(u.node) for u in node.outputs[0].uses()))
        first = self.add_op(node, "Dequantize", [src], [dst], attrs, role=SPEC)
        if len(consumers) < 2 or node.outputs[0].is_graph_output():
            return first
        template = self.result.tensors[dst]
        for consumer in consumers[1:]:
            copy = self._add_tensor(node.outputs[0], template.dtype, False, template.dims)
            self._copies[(id(node.outputs[0]), consumer)] = copy
            made = self.add_op(node, "Dequantize", [src], [copy], attrs, role=SPEC)
            self.result.copies.add(made.id)
            if first.id in self.result.wide_weights:
                self.result.wide_weights.add(made.id)
        self.result.copies.add(first.id)
        return first

    def _dynamic_dequantize(
        self,
        node: ir.Node,
        src: int,
        dst: int,
        attrs: dict[str, object],
        scales_value: ir.Value | None,
        zps_value: ir.Value | None,
    ) -> Op | str:
        """4-bit weights (per_group): oneDNN v3.7+'s DynamicDequantize, constants as inputs."""
        if self.version < (3, 7, 0):
            found = ".".join(map(str, self.version))
            return (
                f"4-bit or per_group dequantize needs oneDNN v3.7+ (loaded v{found}: no s4/u4 "
                "data types, no per_group; oneDNN Graph fuses 4-bit weights in its gated-MLP "
                "pattern only, three dequantize -> MatMul with SiLU, and runs f32 activations "
                "with 4-bit weights optimized from v3.10)"
            )
        scales = self.tensor(scales_value)
        zps = self.tensor(zps_value) if zps_value is not None else None
        if scales is None or (zps_value is not None and zps is None):
            return "its scales or zero points have no oneDNN logical tensor"
        made = {"qtype": string(str(attrs["qtype"])), "axis": ints([int(attrs["axis"])])}  # type: ignore[call-overload]
        if "group_shape" in attrs:
            made["group_shape"] = ints(attrs["group_shape"])  # type: ignore[arg-type]
        inputs = [src, scales] + ([zps] if zps is not None else [])
        return self.add_op(node, "DynamicDequantize", inputs, [dst], made, role=SPEC)


def _feeds_weight(node: ir.Node) -> bool:
    """True when ``node`` dequantizes a constant that a Conv/MatMul/Gemm takes as weight."""
    source = node.inputs[0]
    if source is None or not _is_constant(source):
        return False
    return any(
        u.node.op_type in ("Conv", "MatMul", "Gemm") and u.idx == 1 for u in node.outputs[0].uses()
    )


def _node_subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs in ``node``'s attributes and every graph nested in them."""
    found = []
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            direct = [attr.as_graph()]
        elif attr.type == ir.AttributeType.GRAPHS:
            direct = list(attr.as_graphs())
        else:
            continue
        for graph in direct:
            found += [graph, *subgraphs(graph)]
    return found


def _is_constant(value: ir.Value) -> bool:
    if value.is_graph_input():
        return False
    if value.is_initializer() or value.const_value is not None:
        return True
    producer = value.producer()
    return producer is not None and producer.op_type == "Constant" and producer.domain == ""


def translate(
    model: ir.Model, version: tuple[int, int, int] = (3, 2, 0), *, int8_saturates: bool = False
) -> Translation:
    """The main graph of ``model`` as one description for the oneDNN of ``version``.

    ``int8_saturates``: its int8 kernels saturate for s8 weights beyond +-64 on this CPU (no
    VNNI), as onnxruntime's own int8 kernels do there: such weights' Dequantizes are listed in
    ``wide_weights`` so the plan can say so. (Folding them into f32 constants instead gives
    oneDNN v3.2 an f32 convolution it partitions without the spec ops: no unit; tried.)
    """
    return Translator(model, version, int8_saturates=int8_saturates).run()


__all__ = ["COMPUTE", "END", "SPEC", "WILDCARD", "Translation", "Translator", "boolean", "key"]
