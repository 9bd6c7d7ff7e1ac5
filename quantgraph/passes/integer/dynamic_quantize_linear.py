"""DynamicQuantizeLinear  ->  its scale and zero point in standard ops, then DynamicQuantize.

ONNX defines DynamicQuantizeLinear (uint8, per tensor) by a function body; onnxruntime's kernel
(and ONNX's reference) compute, in float32:

    lo = min(min(x), 0)          hi = max(max(x), 0)
    scale = 1 if hi == lo else (hi - lo) / 255          (the body divides by zero there)
    zero_point = uint8(round_half_even(clip(0 - lo / scale, 0, 255)))
    y = saturate(round_half_even(x / scale) + zero_point)

The first three lines become ReduceMin/ReduceMax/Min/Max/Sub/Div/Equal/Where/Clip/Round/Cast,
the last a per_tensor DynamicQuantize. Exact against onnxruntime's kernel for finite x (the same
float32 operations in the same order); where x holds NaN or infinities the two differ (documented
in docs/spec.md, held by tests).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ...ir.rewrite import ConstantFactory, replace_node
from ...ir.walk import GraphLike, is_standard, opset_version
from ...spec import DOMAIN, DYNAMIC_QUANTIZE, OPSET_VERSION, PER_TENSOR
from ..node_rewrite import NodeRewritePass, import_spec_domain
from ..report import RewriteReport, RewriteResult, Skip

OP = "DynamicQuantizeLinear"
MARK = "quantgraph.dynamic_quantize_linear"  # node metadata: which DynamicQuantizeLinear a node
# of the expansion stands for, so that lowering can give the original node back
QMAX = 255.0  # uint8: the op's only output type
DETAIL = "u8, per_tensor, scale and zero point from standard ops"


class DynamicQuantizeLinearPass(NodeRewritePass):
    """Rewrites ONNX DynamicQuantizeLinear nodes into standard ops and a DynamicQuantize."""

    op_types = frozenset({OP})

    def matches(self, node: ir.Node) -> bool:
        return node.op_type == OP and is_standard(node)

    def finish(self, model: ir.Model, report: RewriteReport) -> None:
        import_spec_domain(model, report, (OP,))

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str]:
        if (opset_version(model, graph) or 0) < 11:
            raise Skip("opset", "DynamicQuantizeLinear needs opset >= 11")
        if len(node.inputs) != 1 or node.inputs[0] is None or len(node.outputs) != 3:
            raise Skip(
                "node-arity", "DynamicQuantizeLinear takes one input and gives three outputs"
            )
        x = node.inputs[0]
        if x.dtype not in (ir.DataType.FLOAT, None):
            raise Skip("input-type", f"input type {x.dtype} is not float32")
        build = _Builder(graph, node, factory, factory.unique_name(node.name or OP))
        zero = build.constant("quantgraph_f32_0", 0.0)
        qmax = build.constant("quantgraph_f32_255", QMAX)
        one = build.constant("quantgraph_f32_1", 1.0)
        lo = build.op("Min", [build.op("ReduceMin", [x], keepdims=0), zero], "min")
        hi = build.op("Max", [build.op("ReduceMax", [x], keepdims=0), zero], "max")
        spread = build.op("Div", [build.op("Sub", [hi, lo]), qmax])
        flat = build.op("Equal", [hi, lo], dtype=ir.DataType.BOOL)
        scale = build.op("Where", [flat, one, spread])
        shifted = build.op("Sub", [zero, build.op("Div", [lo, scale])])
        rounded = build.op("Round", [build.op("Clip", [shifted, zero, qmax])])
        zero_point = build.op("Cast", [rounded], to=ir.DataType.UINT8, dtype=ir.DataType.UINT8)

        # The node's scale and zero-point outputs now come from the new nodes (same names).
        for old, new in ((node.outputs[1], scale), (node.outputs[2], zero_point)):
            ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=True)
            name, old.name = old.name, None
            new.name = name or new.name
        node.resize_outputs(1)
        inputs: list[ir.Value | None] = [
            x,
            build.marked(factory.reshaped(scale, [1], node, "1d")),
            build.marked(factory.reshaped(zero_point, [1], node, "1d")),
        ]
        node.metadata_props[MARK] = build.mark
        self.stale += replace_node(
            node,
            (DOMAIN, DYNAMIC_QUANTIZE.name, OPSET_VERSION),
            inputs,
            [ir.AttrString("qtype", PER_TENSOR), ir.AttrInt64("axis", 1)],
            ir.DataType.UINT8,
        )
        return DYNAMIC_QUANTIZE.name, DETAIL


class RestoreDynamicQuantizeLinearPass(NodeRewritePass):
    """Lowering: a DynamicQuantize that conversion expanded from a DynamicQuantizeLinear, with
    its marked scale and zero-point nodes, becomes that DynamicQuantizeLinear again."""

    def call(self, model: ir.Model) -> RewriteResult:
        self._marked: dict[int, dict[str, list[ir.Node]]] = {}  # graph -> mark -> nodes
        return super().call(model)

    def matches(self, node: ir.Node) -> bool:
        return (
            node.domain == DOMAIN
            and node.op_type == DYNAMIC_QUANTIZE.name
            and MARK in (node.metadata_props)
        )

    def rewrite(
        self, model: ir.Model, graph: GraphLike, node: ir.Node, factory: ConstantFactory
    ) -> tuple[str, str] | None:
        mark = node.metadata_props[MARK]
        helpers = [n for n in self._marked_in(graph).get(mark, []) if n is not node]
        outputs = self._scale_and_zero_point(node, helpers)
        if outputs is None:
            return None  # edited since conversion: SpecToQdqPass lowers it as it is
        scale, zero_point = outputs
        x = node.inputs[0]
        self.stale += [v for h in helpers for v in h.inputs]
        replace_node(node, ("", OP, None), [x], [], ir.DataType.UINT8)
        node.metadata_props.pop(MARK)
        node.resize_outputs(3)
        owned = set(helpers)
        for old, new in ((scale, node.outputs[1]), (zero_point, node.outputs[2])):
            new.type, new.shape = old.type, old.shape
            for use in list(old.uses()):
                if use.node not in owned:
                    use.node.replace_input_with(use.idx, new)
            for index, output in enumerate(graph.outputs):
                if output is old:
                    graph.outputs[index] = new
            name, old.name = old.name, None
            new.name = name
        graph.remove(helpers, safe=True)
        return OP, "restored from its expansion"

    def _marked_in(self, graph: GraphLike) -> dict[str, list[ir.Node]]:
        """``graph``'s marked nodes by mark, collected in one walk (not one a node)."""
        found = self._marked.get(id(graph))
        if found is None:
            found = {}
            for candidate in graph:
                mark = candidate.metadata_props.get(MARK)
                if mark is not None:
                    found.setdefault(mark, []).append(candidate)
            self._marked[id(graph)] = found
        return found

    @staticmethod
    def _scale_and_zero_point(
        node: ir.Node, helpers: list[ir.Node]
    ) -> tuple[ir.Value, ir.Value] | None:
        """The expansion's scale and zero point, when the marked nodes are still exactly the
        expansion (nothing outside uses their other values)."""
        if len(node.inputs) != 3 or node.inputs[0] is None:
            return None
        found: list[ir.Value] = []
        for reshaped in node.inputs[1:]:
            reshape = reshaped.producer() if reshaped is not None else None
            if reshape is None or reshape not in helpers or reshape.inputs[0] is None:
                return None
            found.append(reshape.inputs[0])
        scale, zero_point = found
        owned = {*helpers, node}
        for helper in helpers:
            for value in helper.outputs:
                if value in (scale, zero_point):
                    continue
                if value.is_graph_output() or any(u.node not in owned for u in value.uses()):
                    return None
        return scale, zero_point


class _Builder:
    """Standard-op nodes inserted before one node, named after it and marked as its
    expansion."""

    def __init__(
        self, graph: GraphLike, before: ir.Node, factory: ConstantFactory, mark: str
    ) -> None:
        self.graph, self.before, self.factory = graph, before, factory
        self.base = before.name or OP
        self.mark = mark

    def marked(self, value: ir.Value) -> ir.Value:
        producer = value.producer()
        if producer is not None:
            producer.metadata_props[MARK] = self.mark
        return value

    def constant(self, name: str, value: float) -> ir.Value:
        return self.factory.constant(name, np.array(value, np.float32), self.before)

    def op(
        self,
        op_type: str,
        inputs: list[ir.Value],
        suffix: str = "",
        *,
        dtype: ir.DataType = ir.DataType.FLOAT,
        **attributes: int,
    ) -> ir.Value:
        label = f"{self.base}_{suffix or op_type.lower()}"
        node = ir.Node(
            "",
            op_type,
            inputs,
            [ir.AttrInt64(k, int(v)) for k, v in attributes.items()],
            name=self.factory.unique_name(label),
            num_outputs=1,
            metadata_props={MARK: self.mark},
        )
        out = node.outputs[0]
        out.name = self.factory.unique_name(label)
        out.type, out.shape = ir.TensorType(dtype), ir.Shape([])
        self.graph.insert_before(self.before, node)
        return out
