"""The onnxruntime engine: units go back to onnxruntime's own fused kernels, in their standard
Q/DQ form, at session time (the model file is never changed).

Which Q/DQ nodes onnxruntime fuses is decided by its optimizer (``qdq_selector_action_
transformer.cc``, the layout transformer, the Q/DQ clean-ups), and its rules change between
versions. So the plan does not guess: it lowers a private copy of the model to Q/DQ, lets the
installed onnxruntime optimize it at the session's level, and reads the optimized graph back.

* A Q/DQ node that comes out of the optimizer exactly as it went in (same op, inputs, constant
  values, attributes), and the compute nodes it belongs to with it, and that no layout
  Transpose feeds, is not fused: its spec op stays and runs on the session's backend. Our
  kernels are bit-exact with onnxruntime's QuantizeLinear/DequantizeLinear, so this costs no
  exactness. (onnxruntime rewrites some nodes by the Q/DQ around them and leaves those as they
  are: see :mod:`.ort_neighbours`.)
* Every other spec op is handed over in its Q/DQ form, so the session's model is, for the
  optimizer, the original QDQ model: what it fuses, it fuses as it does for the original, and
  the outputs equal the original's at the same optimization level, bit for bit.

* A spec op that lowering folds back into the original's own node (MatMulNBits,
  GatherBlockQuantized, a QOperator node...) is that node again: onnxruntime runs it with its
  kernel, as for the original. When every spec op folds back so, nothing is left to ask the
  optimizer and the plan is read off the lowered graph (no session, no weight restored).

Units group the handed-over spec ops with the compute node they feed (DequantizeLinear) or are
fed by (QuantizeLinear); the kernel is what the optimized graph computes that unit with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import onnx
import onnx_ir as ir

from ...ir.values import constant_array
from ...ir.walk import GraphLike, all_graphs, proto_graphs, spec_op
from ...passes import pipelines
from ...passes.contrib.restore_nbits import RestoreMatMulNBitsPass, recorded_chain
from ...passes.integer.dynamic_quantize_linear import RestoreDynamicQuantizeLinearPass
from ...passes.integer.integer_ops import RECORD as INTEGER_RECORD
from ...passes.integer.restore_integer_ops import RestoreIntegerOpsPass
from ...passes.integer.restore_qoperator import RestoreQOperatorPass
from ...passes.qdq.restore_cast_scale import RestoreCastScalePass
from ...passes.qdq.short_blocks import PADDED, TrimPaddedBlocksPass
from ...passes.qdq.spec_to_qdq import SpecToQdqPass
from ...passes.report import RewriteReport
from ...spec import DYNAMIC_DEQUANTIZE
from ..plan import GIVEN_BACK, ONNXRUNTIME, FusionPlan, LeftAlone, Unit
from .ort_neighbours import by_layout, neighbours
from .ort_optimized import optimized_graph, weightless_graph
from .unique_dequantize import unique_dequantize

QDQ = ("QuantizeLinear", "DequantizeLinear")
LONE_KERNEL = "onnxruntime's own, as it is:"  # a lone Q/DQ handed over (plan(lone=True))
# What a spec op lowers to when it stays a node of its own; any other node under a spec op's
# name is an original node given back (QLinearConv, QGemm...: it takes its Q's output name).
OWN_FORMS = (*QDQ, "DynamicQuantizeLinear", "Mul")
ONNX_DOMAINS = {"": "", "ai.onnx": ""}
LEVEL_NAMES = {0: "ORT_DISABLE_ALL", 1: "ORT_ENABLE_BASIC", 2: "ORT_ENABLE_EXTENDED"}


class _LowerSome(SpecToQdqPass):
    """Lowers only the spec ops whose first output is named in ``names``."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        return super().matches(node) and _key(node) in self.names


class _RestoreSome(RestoreDynamicQuantizeLinearPass):
    """Gives back the DynamicQuantizeLinear of the expansions named in ``names`` only."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        return super().matches(node) and _key(node) in self.names


class _RestoreNBitsSome(RestoreMatMulNBitsPass):
    """Gives back the MatMulNBits of the dequantizes named in ``names`` only."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        return super().matches(node) and _key(node) in self.names


class _RestoreCastScaleSome(RestoreCastScalePass):
    """Gives back the Cast [-> Sub] -> Mul of the dequantizes named in ``names`` only."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        return super().matches(node) and _key(node) in self.names


class _RestoreIntegerOpsSome(RestoreIntegerOpsPass):
    """Gives back the MatMulInteger/ConvInteger chain of a float op whose two dequantizes are
    both named in ``names`` only."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        return super().matches(node) and all(
            v is not None and v.name in self.names for v in node.inputs[:2]
        )


class _RestoreQOperatorSome(RestoreQOperatorPass):
    """Gives back the QOperator node of a float op whose units were handed over: one of its
    dequantizes or its quantize named in ``names`` (a spec op not handed over is no standard
    Q/DQ here, so the restore leaves that chain as it is)."""

    def __init__(self, names: set[str], report: RewriteReport) -> None:
        super().__init__(report=report)
        self.names = names

    def matches(self, node: ir.Node) -> bool:
        if not super().matches(node):
            return False
        around = [v.name for v in node.inputs if v is not None]
        around += [_key(use.node) for use in node.outputs[0].uses()]
        return any(name in self.names for name in around)


def _lower(model: ir.Model, names: set[str] | None, report: RewriteReport) -> None:
    """Lowering as ``quantgraph lower`` does it (DynamicQuantizeLinear, MatMulNBits, weight-only
    Cast chains, integer ops, QOperator nodes and padded short blocks folded back into their
    original nodes), of every spec op or of those in ``names``. The plan is read off the
    original's form, so the units handed to onnxruntime must be in that form too: a Cast chain
    onnxruntime folds into a float weight, lowered to DequantizeLinear -> MatMul instead, would
    become MatMulNBits; a MatMulInteger chain would become MatMulIntegerToFloat, not the
    original's DynamicQuantizeMatMul."""
    if names is None:  # onnxruntime never fuses Gather -> DequantizeLinear into
        # GatherBlockQuantized (1.32): that DequantizeLinear is judged as it is, not restored
        pipelines.run(pipelines.lowering(report, check=False, gather_qdq=True), model)
        return
    steps: tuple[ir.passes.PassBase, ...] = (
        _RestoreNBitsSome(names, report),
        _RestoreCastScaleSome(names, report),
        _RestoreIntegerOpsSome(names, report),  # before DynamicQuantizeLinear comes back
        _RestoreSome(names, report),
        _LowerSome(names, report),
        _RestoreQOperatorSome(names, report),  # reads the standard Q/DQ just lowered
        TrimPaddedBlocksPass(),
    )
    for step in steps:
        step(model)


def plan(model: ir.Model, level: int, *, lone: bool = False) -> FusionPlan:
    """The plan for ``model`` (spec ops) at onnxruntime optimization ``level``, and the model
    rewritten in place to carry it out (handed-over units in Q/DQ form).

    ``lone``: a Q/DQ node onnxruntime keeps as it is goes to onnxruntime too, as its own
    QuantizeLinear/DequantizeLinear (fusion "auto"'s candidate: one custom-op call less a
    node on small models; bit-exact only with the onnx arithmetic, which the caller checks)."""
    import onnxruntime as ort

    found = FusionPlan(ONNXRUNTIME)
    spec = {_key(node): (graph, node) for graph, node in _spec_nodes(model)}
    if not spec:
        return found
    level_name = LEVEL_NAMES.get(level, "ORT_ENABLE_ALL")
    if level == int(ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        reason = f"the session's optimization level ({level_name}) fuses nothing"
        found.alone = [_alone(_where(model, g), n, reason) for g, n in spec.values()]
        return found
    if unique_dequantize(model):  # as onnxruntime does first: each copy is judged on its own
        spec = {_key(node): (graph, node) for graph, node in _spec_nodes(model)}

    # A spec op whose output a marked Slice trims (a padded short block) is known after
    # lowering by the Slice's output, which the folded DequantizeLinear takes over.
    renamed = _trimmed_names(model)
    nbits = _nbits_chains(model)
    lowered = model.clone()  # shares the tensors: external data stays where it is
    report = RewriteReport()
    _lower(lowered, None, report)
    cannot = {s.node: s.reason for s in report.skipped}
    survivors = any(
        renamed.get(_key(n), _key(n)) in spec and (spec_op(n) is not None or n.op_type in OWN_FORMS)
        for _, n in _graph_nodes_all(lowered)
    )
    # Nothing of a spec op left as a node of its own (every one folded back into the original's
    # MatMulNBits, GatherBlockQuantized, QOperator node...): no Q/DQ for the optimizer to decide
    # on, and the lowered graph names each unit's kernel. Asking onnxruntime would restore and
    # write every weight twice (26 of 58 s of `quantgraph run --fusion onnxruntime` at 3.8B).
    optimized = optimized_graph(lowered, level) if survivors else weightless_graph(lowered)
    after = _outputs_index(optimized)
    constants = _constants(optimized)
    transposed = by_layout(optimized, lowered)  # values its layout Transposes write

    opset = lowered.opset_imports.get("", 1)
    keep: set[str] = set()
    alone_too: set[str] = set()  # with ``lone``: kept as they are, run by onnxruntime
    given_back: dict[str, ir.Node] = {}  # spec op -> the original's node now under its name
    in_functions = {_key(n) for f in model.functions.values() for n in f}

    def left_as_is(node: ir.Node, key: str) -> bool:
        """onnxruntime keeps Q/DQ ``node`` as it is and rewrites nothing by it: its compute
        neighbours come out unchanged and no Transpose of its layout work feeds it."""
        if key in in_functions or not _unchanged(node, after.get(key), constants, opset):
            return False
        if any(v is not None and v.name in transposed for v in node.inputs[:1]):
            return False
        return all(
            _unchanged(n, after.get(_key(n)), constants, opset, any_domain=True)
            for n in neighbours(node)
        )

    for graph, node in _graph_nodes_all(lowered):
        key = renamed.get(_key(node), _key(node))
        if key not in spec:
            continue
        if spec_op(node) is None and node.op_type not in OWN_FORMS:
            given_back[key] = node  # a QOperator node: onnxruntime runs it as it is
            continue
        where = _where(lowered, graph)
        original = spec[key][1]
        if spec_op(node) is not None:  # SpecToQdqPass could not lower it
            keep.add(key)
            reason = cannot.get(node.name or "", "it has no standard Q/DQ form")
            found.alone.append(_alone(where, original, f"no standard Q/DQ form: {reason}"))
        elif left_as_is(node, key):
            if lone:
                alone_too.add(key)
                continue
            keep.add(key)
            found.alone.append(
                _alone(
                    where,
                    original,
                    f"onnxruntime keeps this {node.op_type} as it is at {level_name} (no fused "
                    "kernel takes it): runs on the session's backend",
                )
            )
    handed = set(spec) - keep
    in_units = (handed - set(given_back)) | {k for k, v in renamed.items() if v in handed}
    by_name = _by_name(after)
    found.units = _units(lowered, in_units, after, by_name, alone_too)
    in_lowered = {renamed.get(_key(n), _key(n)) for _, n in _graph_nodes_all(lowered)}
    folded: dict[tuple[str, str], Unit] = {}  # one unit per compute node
    for key in sorted((handed - in_lowered) | set(given_back), key=list(spec).index):
        graph, original = spec[key]  # every spec op is accounted for
        compute, output = nbits.get(key) or _consumer(original)
        back = given_back.get(key) or given_back.get(_quantized_by(compute))
        if back is not None:  # a QOperator's dequantizes and quantize: one unit, its node
            compute, output = back, _key(back)
        made = after.get(output)
        reason = (  # folded back into the original's MatMulNBits: its kernel runs it
            f"{GIVEN_BACK}MatMulNBits, given back: onnxruntime runs it with its own kernel, "
            "as for the original"
            if key in nbits
            else f"{GIVEN_BACK}{back.op_type}, given back: onnxruntime runs it as for the original"
            if back is not None
            else _folded_reason(compute)
        )
        where = _where(model, graph)
        group = (where, output or key)
        if group in folded:
            unit = folded[group]
            folded[group] = replace(unit, nodes=(*unit.nodes, original.name or key))
            continue
        folded[group] = Unit(
            compute="" if compute is None else compute.name or "",
            op_type="" if compute is None else compute.op_type,
            nodes=(original.name or key,),
            engine=ONNXRUNTIME,
            kernel=_kernel(compute, [output], after, by_name, given_back=back is not None)
            if back is not None
            else _fused_onward(compute, after)
            if made is None
            else _scale_chain_of(made, after),
            graph=where,
            reason=reason,
        )
    found.units += folded.values()
    _lower(model, handed, RewriteReport())
    return found


def _nbits_chains(model: ir.Model) -> dict[str, tuple[ir.Node, str]]:
    """Spec op -> (its MatMul, the output MatMulNBits takes over) for each dequantize that
    lowering folds back into a MatMulNBits."""
    found = {}
    for _, node in _spec_nodes(model):
        nodes = recorded_chain(node) if node.op_type == DYNAMIC_DEQUANTIZE.name else None
        if nodes:
            compute = next(n for n in nodes if n.op_type == "MatMul")
            found[_key(node)] = (compute, nodes[-1].outputs[0].name or "")
    return found


def _quantized_by(compute: ir.Node | None) -> str:
    """The name of the spec op quantizing ``compute``'s output (its only user), or ""."""
    if compute is None or not compute.outputs:
        return ""
    uses = list(compute.outputs[0].uses())
    return _key(uses[0].node) if len(uses) == 1 and spec_op(uses[0].node) else ""


def _folded_reason(compute: ir.Node | None) -> str:
    if compute is not None and INTEGER_RECORD in compute.metadata_props:
        op = json.loads(compute.metadata_props[INTEGER_RECORD])["op"]
        return (
            f"{GIVEN_BACK}{op} and scale chain, given back: onnxruntime runs them as for "
            "the original"
        )
    return "lowering folds it into the original's node; handed over in its Q/DQ form"


def _consumer(node: ir.Node) -> tuple[ir.Node | None, str]:
    """The first node reading ``node``'s output that is no spec op, and its output's name."""
    for use in node.outputs[0].uses():
        if spec_op(use.node) is None and use.node.outputs:
            return use.node, use.node.outputs[0].name or ""
    return None, ""


def _trimmed_names(model: ir.Model) -> dict[str, str]:
    """Output name of each marked Slice -> the name of the spec op it trims."""
    found = {}
    for graph in all_graphs(model):
        for node in graph:
            if node.op_type == "Slice" and PADDED in node.metadata_props and node.inputs:
                source = node.inputs[0]
                if source is not None and node.outputs[0].name and source.name:
                    found[node.outputs[0].name] = source.name
    return found


def _unchanged(
    node: ir.Node,
    optimized: onnx.NodeProto | None,
    constants: dict[str, np.ndarray],
    opset: int,
    *,
    any_domain: bool = False,
) -> bool:
    """``optimized`` is ``node`` as it went in. ``any_domain``: a node of any domain (a
    compute neighbour, com.microsoft's MatMulNBits); else of the ONNX domain only (a
    com.microsoft Q/DQ always goes back in its own form)."""
    if optimized is None or optimized.op_type != node.op_type:
        return False
    if any_domain:
        if ONNX_DOMAINS.get(optimized.domain, optimized.domain) != ONNX_DOMAINS.get(
            node.domain, node.domain
        ):
            return False
    elif optimized.domain not in ONNX_DOMAINS or node.domain not in ONNX_DOMAINS:
        return False
    inputs = [v for v in node.inputs]
    if len(optimized.input) != len(inputs):
        return False
    for value, name in zip(inputs, optimized.input, strict=True):
        if value is None:
            if name:
                return False
            continue
        theirs = constants.get(name)  # None for a large weight: never read by value
        mine = None if theirs is None else constant_array(value)
        if theirs is None or mine is None:  # computed (or large): must be the same tensor
            if name != value.name:
                return False
            continue
        if theirs.dtype != mine.dtype or not np.array_equal(theirs, mine, equal_nan=True):
            return False
    wanted = {name: _attribute(a) for name, a in node.attributes.items()}
    got = {a.name: onnx.helper.get_attribute_value(a) for a in optimized.attribute}
    # onnxruntime writes defaulted attributes out; a contrib op's defaults are not known here
    # (MatMulNBits' accuracy_level 0, weight_prepacked 0): its extra attributes are taken so
    defaults = _defaults(optimized.op_type, opset) if optimized.domain in ONNX_DOMAINS else None
    for name in set(got) - set(wanted):
        if defaults is None or (name in defaults and defaults[name] == got[name]):
            del got[name]
    return wanted == got


def _defaults(op_type: str, opset: int) -> dict[str, object]:
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:  # an op onnxruntime registers in the ONNX domain
        return {}
    return {
        name: onnx.helper.get_attribute_value(a.default_value)
        for name, a in schema.attributes.items()
        if a.default_value is not None and a.default_value.name
    }


def _attribute(attribute: ir.Attr) -> object:
    proto = ir.serde.serialize_attribute(attribute)
    return onnx.helper.get_attribute_value(proto)


def _by_name(after: dict[str, onnx.NodeProto]) -> dict[str, list[onnx.NodeProto]]:
    """The optimized nodes by the name they had before the layout transformer renamed them."""
    by_name: dict[str, list[onnx.NodeProto]] = {}
    for made in {id(n): n for n in after.values()}.values():
        by_name.setdefault(made.name.split("_token_")[0], []).append(made)
    return by_name


def _units(
    lowered: ir.Model,
    handed: set[str],
    after: dict[str, onnx.NodeProto],
    by_name: dict[str, list[onnx.NodeProto]],
    alone_too: frozenset[str] | set[str] = frozenset(),
) -> list[Unit]:
    """Handed-over Q/DQ nodes grouped with their compute node, in graph order (one of
    ``alone_too`` is a unit of its own: onnxruntime runs it as it is)."""
    units: dict[tuple[str, str], list[str]] = {}
    compute_of: dict[tuple[str, str], ir.Node | None] = {}
    graph_of: dict[tuple[str, str], str] = {}
    lowered_type: dict[tuple[str, str], str] = {}
    for graph, node in _graph_nodes_all(lowered):
        key = _key(node)
        if key not in handed:
            continue
        compute = None if key in alone_too else _compute_for(node)
        where = _where(lowered, graph)
        group = (where, _key(compute) if compute is not None else key)
        units.setdefault(group, []).append(node.name or key)
        lowered_type[group] = node.op_type
        compute_of.setdefault(group, compute)
        graph_of[group] = where
    found = []
    for group, names in units.items():
        compute = compute_of[group]
        outputs = [group[1]] if compute is None else [v.name or "" for v in compute.outputs]
        found.append(
            Unit(
                compute="" if compute is None else (compute.name or ""),
                op_type="" if compute is None else compute.op_type,
                nodes=tuple(names),
                engine=ONNXRUNTIME,
                kernel=f"{LONE_KERNEL} {lowered_type[group]}"
                if group[1] in alone_too
                else _kernel(compute, outputs, after, by_name),
                graph=graph_of[group],
            )
        )
    return found


def _scale_chain_of(made: onnx.NodeProto, after: dict[str, onnx.NodeProto]) -> str:
    """``made``'s kernel; a Mul ending an integer op's Cast -> Mul scale chain (onnxruntime
    keeps ConvInteger's as it is) is named by its integer op."""
    if made.op_type == "Mul":
        for name in made.input:
            cast = after.get(name)
            is_cast = cast is not None and cast.op_type == "Cast"
            source = after.get(cast.input[0]) if cast is not None and is_cast else None
            if source is not None and source.op_type in ("ConvInteger", "MatMulInteger"):
                return f"{source.op_type} (then its Cast -> Mul scale chain)"
    return _kernel_name(made)


def _fused_onward(compute: ir.Node | None, after: dict[str, onnx.NodeProto]) -> str:
    """What runs a unit whose compute output the optimizer removed: the fused kernel that took
    in the next node too (quantize_dynamic's MatMulInteger -> Cast -> Mul -> Add becomes one
    DynamicQuantizeMatMul writing the Add's output), else it was folded away."""
    if compute is not None:
        for value in compute.outputs:
            for use in value.uses():
                made = after.get(use.node.outputs[0].name or "") if use.node.outputs else None
                if made is not None:
                    return f"{_kernel_name(made)} (with the {use.node.op_type} after it)"
    return "folded away by onnxruntime's optimizer"


def _compute_for(node: ir.Node) -> ir.Node | None:
    """A DequantizeLinear's consumer (or that of a weight-only Cast chain's Mul, given back)
    or a QuantizeLinear's producer, when it is compute."""
    if node.op_type in ("DequantizeLinear", "Mul"):
        for use in node.outputs[0].uses():
            if use.node.op_type not in QDQ:
                return use.node
        return None
    source = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None
    return source if source is not None and source.op_type not in QDQ else None


def _kernel(
    compute: ir.Node | None,
    outputs: list[str],
    after: dict[str, onnx.NodeProto],
    by_name: dict[str, list[onnx.NodeProto]],
    *,
    given_back: bool = False,
) -> str:
    """What onnxruntime runs the unit as: the optimized node computing its outputs
    (``given_back``: ``compute`` is the original's integer node, no float op)."""
    wanted = list(outputs)
    if compute is not None:  # a fused kernel writes the Q's output where there is one
        for value in compute.outputs:
            for use in value.uses():
                if use.node.op_type == "QuantizeLinear":
                    wanted.extend(v.name or "" for v in use.node.outputs)
    candidates = [after[name] for name in reversed(wanted) if name in after]
    if compute is not None and compute.name:  # the layout transformer renames: conv1_token_1
        candidates += [n for n in by_name.get(compute.name, ())]
    for node in candidates:
        if node.op_type == "Cast" and node.input and node.input[0] in after:
            node = after[node.input[0]]  # a float16 op runs in float32 between inserted Casts
        if node.op_type in ("Transpose", "Cast"):
            continue
        kernel = _kernel_name(node)
        if compute is not None and kernel == compute.op_type and not given_back:  # float
            sources = (after.get(name) for name in node.input)
            if any(s is not None and s.op_type == "DequantizeLinear" for s in sources):
                return (
                    f"{kernel} (float, reading onnxruntime's own DequantizeLinear, as the original)"
                )
            return f"{kernel} (float; onnxruntime folded its Q/DQ: constants dequantized once)"
        return kernel
    return "folded away by onnxruntime's optimizer"


def _kernel_name(node: onnx.NodeProto) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain else node.op_type


def _alone(where: str, node: ir.Node, reason: str) -> LeftAlone:
    return LeftAlone(node.name or _key(node), node.op_type, reason, where)


def _where(model: ir.Model, graph: GraphLike) -> str:
    """The graph's name in reports: empty for the main graph."""
    return "" if graph is model.graph else (graph.name or "")


def _key(node: ir.Node) -> str:
    """A node's identity across copies and onnxruntime's optimizer: its first output's name
    (unique in a model; node names may be empty or repeated)."""
    return node.outputs[0].name or "" if node.outputs else ""


def _spec_nodes(model: ir.Model) -> Iterator[tuple[GraphLike, ir.Node]]:
    for graph, node in _graph_nodes_all(model):
        if spec_op(node) is not None:
            yield graph, node


def _graph_nodes_all(model: ir.Model) -> Iterator[tuple[GraphLike, ir.Node]]:
    for graph in all_graphs(model):
        for node in graph:
            yield graph, node


def _outputs_index(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """Every node of the optimized model (subgraphs too) by each of its output names."""
    found: dict[str, onnx.NodeProto] = {}
    for graph in proto_graphs(model.graph):
        for node in graph.node:
            for name in node.output:
                if name:
                    found[name] = node
    return found


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The optimized model's small constants (initializers and Constant nodes) by name."""
    found: dict[str, np.ndarray] = {}
    for graph in proto_graphs(model.graph):
        for tensor in graph.initializer:
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                found[tensor.name] = onnx.numpy_helper.to_array(tensor)
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for attribute in node.attribute:
                    if attribute.name == "value":
                        found[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    return found
